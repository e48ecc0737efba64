"""What must never leave the process: API keys, URL userinfo and key-like query parameters.

The one rule for everything the product prints (every command's output, its `Error:` lines, a
traceback), stores (errors and reasons in the database, manifests, file endpoints) or writes of
its own (the sync backend's failure lines under `responses/`), whatever a provider echoed back:
gateways and proxies put the request's headers, and so the key, into their 400/404/500 bodies.

`redact(text)` replaces

- the value of every **key variable** (`KEY_VARIABLE_SUFFIXES`: `OPENAI_API_KEY`,
  `LEXPILOT_{EVAL,USER,JUDGE}_API_KEY`, `ANTHROPIC_API_KEY`, `GOOGLE_API_KEY`, `AZURE_OPENAI_API_KEY`,
  `DASHSCOPE_API_KEY`, `DEEPSEEK_API_KEY`, each `<SERVICE>_API_KEY` of `openai-api/<service>/`,
  `GEMINI_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, ...) set in the environment, and of every key handed to
  a provider client (`register_secret`: a model list's own `key_var`), by `[redacted NAME]`;
- the credentials inside every `*_BASE_URL` variable (userinfo, its password, key-like query
  values), wherever they show up, by `[redacted NAME userinfo]` / `[redacted NAME query]`;
- and, whether or not we know the secret, the userinfo of any URL (`http://[redacted]@host/v1`),
  the value of any key-like query parameter (`KEY_QUERY_PARAMETERS`: `?api-key=[redacted]`), the
  credentials of `Bearer` and `Basic` authorization values and of key headers
  (`x-api-key`, `x-goog-api-key`, `api-key`) echoed as `name: value` or `"name": "value"`.

A value shorter than `MIN_SECRET_LENGTH` characters is never taken for a secret (an empty or
placeholder key such as vLLM's `EMPTY` would otherwise blank out ordinary words). The values are
also matched as a JSON writer that escapes `/`, and a URL encoder, would write them.

Model answers are data, not messages: callers redact provider *error* text and leave answers as
the provider gave them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlsplit

MIN_SECRET_LENGTH = 8
# A variable is a key variable when its name (upper-cased: Windows keeps names as typed) ends so.
KEY_VARIABLE_SUFFIXES = ("API_KEY", "_AUTH_TOKEN", "_ACCESS_TOKEN")
URL_VARIABLE_SUFFIX = "_BASE_URL"
# Query parameters that carry credentials (case-insensitive): Azure's `api-key`, Google's `key`,
# OAuth's `access_token`, Azure SAS `sig`, AWS presigned URLs' `X-Amz-*`, and the usual others.
KEY_QUERY_PARAMETERS = (
    "key",
    "api-key",
    "api_key",
    "apikey",
    "x-api-key",
    "x-goog-api-key",
    "token",
    "access_token",
    "access-token",
    "id_token",
    "refresh_token",
    "auth",
    "auth_token",
    "authorization",
    "sig",
    "signature",
    "secret",
    "client_secret",
    "password",
    "passwd",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
)
# Headers that carry a key as their whole value (`Authorization` carries a scheme first: below).
_KEY_HEADERS = ("x-api-key", "x-goog-api-key", "api-key", "api_key", "apikey", "authorization")

MARK = "[redacted]"

# What the generic rules stop at: the end of a URL, of a JSON string, of a header value, and an
# earlier redaction's mark.
_STOP = r"\s\"'<>\\\[\]"
_USERINFO = re.compile(rf"(?<=://)[^{_STOP}/?#@]+@")
_QUERY = re.compile(
    rf"(?i)(?<=[?&;])({'|'.join(re.escape(p) for p in KEY_QUERY_PARAMETERS)})=[^{_STOP}&#;]+",
)
# A bearer token holds a digit or a token character, so "Bearer authentication" stays prose; Basic
# credentials are base64 of "user:password" (`_scheme`).
_SCHEME = re.compile(r"(?i)\b(Bearer|Basic)(\s+)([A-Za-z0-9+/=_.~-]{8,})")
_HEADER = re.compile(
    rf"(?i)\b({'|'.join(re.escape(h) for h in _KEY_HEADERS)})([\"']?\s*[:=]\s*[\"']?)[^{_STOP},;&}}]{{{MIN_SECRET_LENGTH},}}"
)

_lock = threading.Lock()
_registered: dict[str, str] = {}  # value -> the variable it came from (`register_secret`)
# (the state it was worked out from, the pattern, the label of each form): `_secret_pattern`
_compiled: tuple[Any, re.Pattern[str] | None, dict[str, str]] = (None, None, {})

T = TypeVar("T")


def is_key_variable(name: str) -> bool:
    """Whether an environment variable of this name holds a key (`KEY_VARIABLE_SUFFIXES`)."""
    return name.upper().endswith(KEY_VARIABLE_SUFFIXES)


def register_secret(name: str, value: str | None) -> None:
    """Redact `value`, the key held in variable `name`, from now on, as `[redacted NAME]`: a key
    handed to a provider client is registered so, whatever variable a model list named for it."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.setdefault(value, name)


def redact(text: str) -> str:
    """`text` with every secret this module knows of, and every credential it can recognise, replaced."""
    if not text:
        return text
    pattern, labels = _secret_pattern()
    if pattern is not None:
        text = pattern.sub(lambda m: f"[redacted {labels[m.group(0)]}]", text)
    if "://" in text:
        text = _USERINFO.sub(MARK + "@", text)
    if "=" in text:
        text = _QUERY.sub(lambda m: f"{m.group(1)}={MARK}", text)
    text = _SCHEME.sub(_scheme, text)
    return _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)


def redact_url(url: str) -> str:
    """A URL as it may be recorded: its userinfo and key-like query values replaced by the plain
    mark first, so that the record does not depend on which variable held them, then `redact`."""
    url = _USERINFO.sub(MARK + "@", url)
    return redact(_QUERY.sub(lambda m: f"{m.group(1)}={MARK}", url))


def _scheme(match: re.Match[str]) -> str:
    scheme, space, credentials = match.groups()
    if scheme.lower() == "basic":
        try:
            secret = b":" in base64.b64decode(credentials, validate=True)
        except ValueError:  # binascii.Error too
            secret = False
    else:
        secret = any(not ch.isalpha() for ch in credentials)
    return f"{scheme}{space}{MARK}" if secret else match.group(0)


def redact_data(value: T) -> T:
    """A JSON-like value (dicts, lists, strings) with `redact` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_data(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [redact_data(v) for v in value]  # type: ignore[return-value]
    return value


def has_credentials(url: str) -> bool:
    """Whether a URL carries userinfo or a key-like query parameter: no file may hold one."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return "@" in parts.netloc or any(name.lower() in KEY_QUERY_PARAMETERS for name, _ in parse_qsl(parts.query))


def _environment_secrets(environ: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    """(value, label) of every secret the environment holds: key variables' values, and the
    credentials inside base URL variables."""
    for name, value in environ.items():
        upper = name.upper()
        if is_key_variable(upper):
            yield value, upper
        elif upper.endswith(URL_VARIABLE_SUFFIX) and ("@" in value or "=" in value):
            try:
                parts = urlsplit(value)
                password = parts.password
            except ValueError:
                continue
            userinfo = parts.netloc.rpartition("@")[0]
            for secret in (userinfo, password or ""):
                yield secret, f"{upper} userinfo"
            for parameter, secret in parse_qsl(parts.query):
                if parameter.lower() in KEY_QUERY_PARAMETERS:
                    yield secret, f"{upper} query"


def _forms(value: str) -> set[str]:
    """How a secret may be written: as it is, JSON-escaped (`\\/` too), URL-encoded."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    return {value, escaped, escaped.replace("/", "\\/"), quote(value, safe="")}


def _environment_state() -> tuple[Any, ...]:
    """The environment as it is now, read cheaply: `os.environ` decodes every item on each read
    (about 50 µs for 40 variables, on every redaction), so CPython's mapping under it is compared
    where it exists; the secrets are worked out again only when it changed."""
    data = getattr(os.environ, "_data", None)
    return tuple(data.items()) if isinstance(data, dict) else tuple(os.environ.items())


def _secret_pattern() -> tuple[re.Pattern[str] | None, dict[str, str]]:
    """One alternation of every known secret's forms, longest first, and the label of each form;
    worked out again when the environment or the registered keys change (so a key set after
    start-up is covered too)."""
    global _compiled
    with _lock:
        state = (_environment_state(), tuple(_registered.items()))
    if state == _compiled[0]:
        return _compiled[1], _compiled[2]
    names: dict[str, set[str]] = {}
    for value, label in _environment_secrets(os.environ):
        if len(value) >= MIN_SECRET_LENGTH:
            names.setdefault(value, set()).add(label)
    for value, name in state[1]:
        names.setdefault(value, {name})
    labels = {form: " or ".join(sorted(found)) for value, found in names.items() for form in _forms(value)}
    pattern = re.compile("|".join(re.escape(f) for f in sorted(labels, key=len, reverse=True))) if labels else None
    _compiled = (state, pattern, labels)
    return pattern, labels
