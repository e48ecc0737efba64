"""Values a command is given that must be one value each: a model, a run id. Several joined by a
comma or whitespace (a shell variable quoted whole, a copied list) would be registered as one name,
sent as one model and answered by nobody."""

from __future__ import annotations

import re

from lexpilot_batch.errors import ConfigError

# Options that take one value each time they are given (`--model`, `--run-id`) or one value at all
# (`--user-model`, `--judge-model`): several joined by commas or spaces (a shell variable quoted
# whole, a copied list) would be registered as one name, sent as one model and answered by nobody.
_REPEATABLE = frozenset({"--model", "--run-id"})
_JOINED = re.compile(r"[,\s]")


_WHAT = {
    "--model": "evaluated model",
    "--run-id": "run id",
    "--user-model": "User Model role",
    "--judge-model": "judge role",
}


def check_one_value(value: str, option: str) -> None:
    """Refuse a value holding a comma or whitespace: several values given as one."""
    if not _JOINED.search(value):
        return
    parts = [p for p in re.split(r"[,\s]+", value) if p]
    joined = "joined by a comma" if "," in value else "joined by whitespace"
    if option in _REPEATABLE:
        example = " ".join(f"{option} {p}" for p in parts) if len(parts) > 1 else f"{option} VALUE"
        how = f"pass the option once per value: {example}"
    else:
        how = f"the {_WHAT[option]} takes one model: pass the option once per value, e.g. {option} {parts[0]}"
    what = _WHAT.get(option, "value")
    raise ConfigError(f"{option} {value!r} ({what}) holds {len(parts)} values {joined}, read as one name; {how}")
