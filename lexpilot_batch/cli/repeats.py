"""A single-value option given twice is refused, naming both values.

The command-line parser keeps the last of a repeated option: `--stage lca --stage dcg` ran only
DCG, and `--speculate --no-speculate` did not speculate, without a word. Every command is built
with `CheckedCommand`, which reads the words before they are parsed: an option that takes one
value given two different ones, or a flag given with its opposite, is refused. The same value
twice is harmless and passes; options that take several (`--model`, `--run-id`, ...) are not
concerned. `--stage` takes one stage: `all` runs every task, and `prepare` run once per stage
adds each stage's threads to the same runs.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand

from lexpilot_batch.errors import ConfigError

STAGE_HINT = " (--stage all runs every task; prepare once per stage adds each stage's threads to the same runs)"


def _single_options(command: Any) -> dict[str, tuple[str, Any]]:
    """Each spelling of each single-value option or flag: -> (the option's name, the value it sets)."""
    spelled: dict[str, tuple[str, Any]] = {}
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option" or getattr(param, "multiple", False):
            continue
        if getattr(param, "count", False):
            continue
        if getattr(param, "is_flag", False) and not getattr(param, "is_bool_flag", False):
            continue
        flag = getattr(param, "is_bool_flag", False)
        for opt in param.opts:
            spelled[opt] = (param.name, True if flag else None)
        for opt in param.secondary_opts:
            spelled[opt] = (param.name, False)
    return spelled


def refuse_repeats(command: Any, args: list[str]) -> None:
    """Refuse a single-value option given two different values (module docstring)."""
    spelled = _single_options(command)
    seen: dict[str, tuple[str, str]] = {}  # option name -> (as written, value)
    words = iter(args)
    for word in words:
        if word == "--":
            break
        name, _, inline = word.partition("=")
        if name not in spelled:
            continue
        param, flag_value = spelled[name]
        if flag_value is not None:
            value, written = str(flag_value), name
        else:
            value = inline if inline or "=" in word else next(words, "")
            written = f"{name} {value}"
        if param in seen and seen[param][1] != value:
            first = seen[param][0]
            if flag_value is not None:
                raise ConfigError(f"{first} and {written} contradict each other: give one of them")
            hint = STAGE_HINT if param == "stage" else ""
            raise ConfigError(f"{first} and {written}: {name} takes one value, and these differ; give it once{hint}")
        seen.setdefault(param, (written, value))


class CheckedCommand(TyperCommand):
    """A command that refuses a single-value option given twice with different values."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        refuse_repeats(self, list(args))
        return super().parse_args(ctx, args)
