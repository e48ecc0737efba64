"""Per-model options: a model list file (`--models FILE`) and `--model-arg MODEL:KEY=VALUE`.

A model list names a study's models in one readable file, TOML or JSON (by its suffix):

    [[eval]]                                  # each evaluated model (what --model names)
    name = "openai/gpt-4o-mini"

    [[eval]]
    name = "qwen-plus"
    provider = "dashscope"                    # the same as name = "dashscope/qwen-plus"

    [[eval]]
    name = "openai-api/local/Qwen/Qwen2.5-7B-Instruct"
    base_url = "http://127.0.0.1:8000/v1"     # over LOCAL_BASE_URL
    key_var = "LOCAL_API_KEY"                 # the variable holding its key (never the key)
    backend = "sync"
    body = { top_p = 0.8 }                    # body fields set for this model
    drop = ["temperature"]                    # body fields removed

    [judge]                                   # the judge (--judge-model); [user] likewise
    name = "openai/o4-mini"
    body = { reasoning_effort = "high" }

An entry may also be just its name: `eval = ["openai/gpt-4o-mini", "dashscope/qwen-plus"]`,
`user = "deepseek/deepseek-chat"`. `reasoning = true` tells that a model is an OpenAI reasoning
model when its name does not (an Azure deployment). A model's options hold in every role it
plays; `--model-arg` sets a field over the file's, `KEY=null` removes it.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import BACKENDS
from lexpilot_batch.providers.prefixes import known_prefixes, parse_model
from lexpilot_batch.providers.routing.routes import ModelRoute
from lexpilot_batch.util.redaction import has_credentials

# Fields of every body that lexpilot-batch itself sets, or that would break reading the answers.
RESERVED_FIELDS = {
    "model": "the model is the entry's name",
    "messages": "the messages are the benchmark's prompts",
    "contents": "the contents are the benchmark's prompts",
    "stream": "batch lines cannot stream",
    "n": "one answer per request is read",
}
_ENTRY_FIELDS = ("name", "provider", "base_url", "key_var", "backend", "body", "drop", "reasoning")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ModelOptions:
    """What a command says about one model besides its name."""

    args: dict[str, Any] = field(default_factory=dict)  # body fields to set; None removes one
    reasoning: bool | None = None  # None: the name decides (`bodies.request.is_openai_reasoning_model`)
    route: ModelRoute = field(default_factory=ModelRoute)


@dataclass(frozen=True)
class ModelList:
    """A model list file: the evaluated models, the User Model and judge if it names them, and options."""

    eval: tuple[str, ...] = ()
    user: str | None = None
    judge: str | None = None
    options: dict[str, ModelOptions] = field(default_factory=dict)  # by registered name


def load_model_list(path: Path) -> ModelList:
    """Read and check a model list; every mistake is a `ConfigError` naming the file and the entry."""
    data = _read(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a model list is an object with eval, user and judge")
    unknown = sorted(set(data) - {"eval", "user", "judge"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; a model list has eval, user and judge")
    evals = data.get("eval", [])
    if not isinstance(evals, list):
        raise ConfigError(f"{path}: eval must be a list of models ([[eval]] tables in TOML)")
    options: dict[str, ModelOptions] = {}
    names: list[str] = []
    for i, entry in enumerate(evals):
        names.append(_entry(path, f"eval[{i}]", entry, options))
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: an evaluated model is listed twice")
    user = _entry(path, "user", data["user"], options) if "user" in data else None
    judge = _entry(path, "judge", data["judge"], options) if "judge" in data else None
    return ModelList(tuple(names), user, judge, options)


def _read(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the model list ({exc.strerror or exc})") from None
    try:
        if path.suffix.lower() == ".toml":
            # utf-8-sig: Windows PowerShell 5.1's `Set-Content -Encoding utf8` and Notepad write a BOM.
            return _toml().loads(raw.decode("utf-8-sig"))
        if path.suffix.lower() == ".json":
            return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: a model list must be UTF-8 text") from None
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError
        raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from None
    raise ConfigError(f"{path}: a model list is a .toml or .json file")


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:
        import tomli
    except ImportError:  # pragma: no cover - installed with the package on Python 3.10
        raise ConfigError(
            "reading a TOML model list on Python 3.10 needs tomli: pip install tomli (or use a .json model list)"
        ) from None
    return tomli


def _entry(path: Path, where: str, entry: Any, options: dict[str, ModelOptions]) -> str:
    """The registered name of one entry; its options join `options`."""
    at = f"{path}: {where}"
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict):
        raise ConfigError(f"{at}: an entry is a model name or a table with {', '.join(_ENTRY_FIELDS)}")
    unknown = sorted(set(entry) - set(_ENTRY_FIELDS))
    if unknown:
        raise ConfigError(f"{at}: unknown field(s) {', '.join(unknown)}; the fields are {', '.join(_ENTRY_FIELDS)}")
    name, provider = entry.get("name"), entry.get("provider")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{at}: name must be the model's name")
    name = name.strip()
    if provider is not None:
        if not _is_prefix(provider):
            raise ConfigError(
                f"{at}: provider must be a provider prefix without its slash; the prefixes are {known_prefixes()}"
            )
        if not name.startswith(provider + "/"):
            name = f"{provider}/{name}"
    parse_model(name, at)
    for key in ("base_url", "key_var", "backend"):
        if key in entry and not (isinstance(entry[key], str) and entry[key].strip()):
            raise ConfigError(f"{at}: {key} must be a non-empty string")
    if "base_url" in entry and has_credentials(entry["base_url"]):
        raise ConfigError(
            f"{at}: base_url must not hold credentials (user:password@, or a key-like query parameter such as "
            "?api-key=); name the key's variable in key_var"
        )
    if "key_var" in entry and not _FIELD.fullmatch(entry["key_var"]):
        raise ConfigError(f"{at}: key_var names an environment variable (the key itself never goes in a file)")
    if "backend" in entry and entry["backend"] not in BACKENDS:
        raise ConfigError(f"{at}: backend must be one of {', '.join(BACKENDS)}")
    if "reasoning" in entry and not isinstance(entry["reasoning"], bool):
        raise ConfigError(f"{at}: reasoning must be true or false")
    body = entry.get("body", {})
    drop = entry.get("drop", [])
    if not isinstance(body, dict) or not isinstance(drop, list) or not all(isinstance(d, str) for d in drop):
        raise ConfigError(f"{at}: body must be a table of fields, drop a list of field names")
    args = {**{k: v for k, v in body.items()}, **dict.fromkeys(drop)}
    for key, value in args.items():
        check_field(key, value, at)
    found = ModelOptions(
        args,
        entry.get("reasoning"),
        ModelRoute(entry.get("base_url"), entry.get("key_var"), entry.get("backend")),
    )
    if name in options and options[name] != found:
        raise ConfigError(f"{at}: {name} is listed again with other options")
    options[name] = found
    return name


def _is_prefix(provider: Any) -> bool:
    try:
        return isinstance(provider, str) and parse_model(f"{provider}/x").key == provider
    except ConfigError:
        return False


def check_field(key: str, value: Any, where: str) -> None:
    if not _FIELD.fullmatch(key):
        raise ConfigError(f"{where}: {key!r} is not a request body field name")
    if key in RESERVED_FIELDS:
        raise ConfigError(f"{where}: the body field {key!r} cannot be set per model: {RESERVED_FIELDS[key]}")


def parse_model_arg(text: str) -> tuple[str, str, Any]:
    """`MODEL:KEY=VALUE` as (model, key, value); VALUE is JSON when it parses (`0.2`, `null`,
    `{"type": "json_object"}`), else the text itself (`high`). None removes the field."""
    head, sep, raw = text.partition("=")
    model, colon, key = head.rpartition(":")
    if not sep or not colon or not model.strip():
        raise ConfigError(f"--model-arg {text!r}: write MODEL:KEY=VALUE, e.g. openai/o4-mini:reasoning_effort=high")
    check_field(key, None, f"--model-arg {text!r}")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        if raw.strip()[:1] in ("{", "[", '"'):
            # PowerShell 5.1 strips the double quotes inside a native command's argument, so
            # '...={"type": "json_object"}' arrives as {type: json_object}: never pin that as text.
            raise ConfigError(
                f"--model-arg {text!r}: the value looks like JSON but does not parse ({exc}). In PowerShell 5.1, "
                'double quotes inside an argument are stripped: escape each one as \\" (or use PowerShell 7.3+), '
                "or put it in a model list, --models FILE (TOML or JSON; docs/providers.md), instead"
            ) from None
        value = raw
    return model.strip(), key, value


def with_model_args(
    options: Mapping[str, ModelOptions], args: Iterable[tuple[str, str, Any]]
) -> dict[str, ModelOptions]:
    """`options` with each `--model-arg` set over its model's fields."""
    out = dict(options)
    for model, key, value in args:
        current = out.get(model, ModelOptions())
        out[model] = ModelOptions({**current.args, key: value}, current.reasoning, current.route)
    return out
