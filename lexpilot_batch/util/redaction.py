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
  (`x-api-key`, `x-goog-api-key`, `api-key`) echoed as `name: value` or `"name": "value"`, and
  every **key-shaped token** in free text (`KEY_SHAPES`: OpenAI's and DeepSeek's `sk-…`, Anthropic's
  `sk-ant-…`, Groq's `gsk_…`, Google's `AIza…`), by `[redacted]`.

Text is redacted *before* it is cut: a key straddling the cut would otherwise lose the characters
that make it match, and the rest of it would be kept. `redact_cut(text, n)` is the one way the
product shortens text that may hold provider words (an error body, an unreadable line, a reason).

A provider's result file is saved with its secrets replaced too (`Scrubber`: the configured values
and the key-shaped tokens, streamed a chunk at a time, a secret straddling two chunks caught whole),
its bytes otherwise as the provider sent them; callers count and record what it replaced.

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
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlsplit

from lexpilot_batch.util.fileio import write_atomic

MIN_SECRET_LENGTH = 8
# A variable is a key variable when its name (upper-cased: Windows keeps names as typed) ends so.
# AWS's secret key and session token (boto3's chain reads them: AWS Bedrock) are keys too.
KEY_VARIABLE_SUFFIXES = ("API_KEY", "_AUTH_TOKEN", "_ACCESS_TOKEN", "_SECRET_ACCESS_KEY", "_SESSION_TOKEN")
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
# Key-shaped tokens, known or not: the shapes providers give their keys, not preceded by a token
# character (so "risk-free" or an id ending in "-sk-" is no key). OpenAI's `sk-` (`sk-proj-…`),
# DeepSeek's, DashScope's and Moonshot's `sk-` too, Anthropic's `sk-ant-api03-…`: at least 20
# characters after the prefix; Groq's `gsk_` and 20 or more; Google's API keys, `AIza` and 35.
KEY_SHAPES = (r"sk-[A-Za-z0-9_-]{20,}", r"gsk_[A-Za-z0-9]{20,}", r"AIza[0-9A-Za-z_-]{35,}")
_SHAPE_BEFORE = r"(?<![A-Za-z0-9_-])"
_KEY_SHAPE = re.compile(_SHAPE_BEFORE + "(?:" + "|".join(KEY_SHAPES) + ")")
# How far past a cut `redact_cut` reads, besides the longest known secret: a credential that
# starts before the cut needs this much after it to be recognised (a URL's userinfo up to its `@`).
_CUT_MARGIN = 1024

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
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    return _KEY_SHAPE.sub(MARK, text)


def redact_cut(text: str, n: int) -> str:
    """At most the first `n` characters of `text` redacted: redacted first, then cut, so that a
    secret straddling the cut is replaced whole, never half-kept. Only a window past the cut is
    read (`_CUT_MARGIN` and the longest known secret), so a huge body costs no more than a short one."""
    if not text:
        return text
    _, labels = _secret_pattern()
    window = n + _CUT_MARGIN + max((len(form) for form in labels), default=0)
    return redact(text[:window])[:n]


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


# --- saved files ----------------------------------------------------------------------------------

# The bytes of a token, after a key shape's prefix or a bearer scheme.
_TOKEN_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# What a `Scrubber` looks for where the literal before it is found: each key shape (its prefix is
# the literal; not preceded by a token byte) and bearer tokens ("earer", then "Bearer" or "bearer"
# and a token with a byte that is not a letter: "Bearer authentication" is prose, as `_scheme` reads it).
_SHAPES_AT = tuple((shape.split("[", 1)[0].encode(), re.compile(shape.encode())) for shape in KEY_SHAPES)
_BEARER_AT = re.compile(rb"[Bb]earer[ \t]{1,8}([A-Za-z0-9+/=_.~-]{8,})")
# The bytes a `Scrubber` holds back at the end of a chunk, besides the longest known secret: enough
# for the longest prefix a key-shaped token needs before it matches (Google's, 39 characters) and a
# bearer scheme's 8-character token.
_SCRUB_MARGIN = 64


class Scrubber:
    """Replaces secrets in a stream of bytes, a chunk at a time: the value of every key this module
    knows (`[redacted NAME]`), key-shaped tokens (`KEY_SHAPES`) and bearer tokens (`[redacted]`);
    every other byte is passed on as it came. What might be the start of a secret at the end of a
    chunk is held back until the next one (or `close`), so a secret straddling two chunks is
    replaced whole. `replaced` counts the replacements.

    For a provider's result file, saved under `responses/` (`providers.file_batch.save_streamed`
    and each backend's download, the sync backend's lines, `ingest FILE`'s copy): a key a gateway
    echoed into it must not be stored whole. Answers are JSON strings, and a mark holds no quote or
    backslash, so every line stays the JSON it was.

    Every byte of a result file passes through it, so it is kept cheap: each literal (a known
    secret's form, a shape's prefix, a bearer scheme) is looked for with `bytes.find`, at the speed
    of memory, and a pattern is tried only where one is found: a file with no secret costs a few
    passes of `find` (about 1 µs for a 1.5 KB result line), not a regular expression over every byte.
    """

    def __init__(self) -> None:
        _, labels = _secret_pattern()
        known = {form.encode("utf-8"): f"[redacted {label}]".encode() for form, label in labels.items()}
        # A known secret of a key's shape (most are) is found where its shape is: no pass of its own.
        self._shaped = {f: m for f, m in known.items() if any(p.match(f) for _, p in _SHAPES_AT)}
        self._known = {f: m for f, m in known.items() if f not in self._shaped}
        self._hold = max((len(form) for form in known), default=0) + _SCRUB_MARGIN
        self._before = b""  # the last byte passed on: what a key shape must not follow
        self._carry = b""  # bytes held back
        self.replaced = 0

    def feed(self, chunk: bytes) -> bytes:
        """What of the stream so far can be passed on, secrets replaced."""
        return self._scan(chunk, final=False)

    def close(self) -> bytes:
        """The rest of the stream, secrets replaced."""
        return self._scan(b"", final=True)

    def _found(self, buf: bytes, start: int) -> list[tuple[int, int, int, bytes]]:
        """Every secret in `buf` from `start`: (start, rank, end, what replaces it), a known secret
        ranked before a shape at the same place (its mark names its variable)."""
        found = []
        for form, mark in self._known.items():
            at = buf.find(form, start)
            while at != -1:
                found.append((at, 0, at + len(form), mark))
                at = buf.find(form, at + 1)
        for literal, pattern in _SHAPES_AT:
            at = buf.find(literal, start)
            while at != -1:
                for form, mark in self._shaped.items():
                    if buf.startswith(form, at):
                        found.append((at, 0, at + len(form), mark))
                if (at == 0 or buf[at - 1] not in _TOKEN_BYTES) and (match := pattern.match(buf, at)):
                    found.append((at, 1, match.end(), MARK.encode()))
                at = buf.find(literal, at + 1)
        at = buf.find(b"earer", start)
        while at != -1:
            if at >= 1 and (match := _BEARER_AT.match(buf, at - 1)) and not match.group(1).isalpha():
                found.append((at - 1, 1, match.end(), buf[at - 1 : match.start(1)] + MARK.encode()))
            at = buf.find(b"earer", at + 1)
        found.sort()
        return found

    def _scan(self, data: bytes, final: bool) -> bytes:
        buf = self._before + self._carry + data
        start = len(self._before)
        size = len(buf)
        # Past `limit` a secret may begin whose end is not read yet: held back, unless the stream ends.
        limit = size if final else size - self._hold
        out: list[bytes] = []
        pos = start
        stop = None
        for at, _, end, mark in self._found(buf, start):
            if at < pos:
                continue  # inside a secret already replaced
            if not final and (at >= limit or end >= size):
                # Not decided yet: a secret that may begin later or go on in the next chunk.
                stop = max(pos, min(limit, at))
                break
            out += (buf[pos:at], mark)
            self.replaced += 1
            pos = end
        if stop is None:
            stop = max(pos, limit)
        out.append(buf[pos:stop])
        if stop > 0:
            self._before = buf[stop - 1 : stop]
        self._carry = buf[stop:]
        return b"".join(out)


def scrub(chunks: Iterable[bytes], scrubber: Scrubber) -> Iterator[bytes]:
    """`chunks` passed through `scrubber` (which counts what it replaced)."""
    for chunk in chunks:
        out = scrubber.feed(chunk)
        if out:
            yield out
    rest = scrubber.close()
    if rest:
        yield rest


def save_scrubbed(dest: Path, chunks: Iterable[bytes]) -> int:
    """Write `chunks` (a download as it arrives) to `dest` whole or not at all
    (`fileio.write_atomic`), every secret replaced on the way (`scrub`); how many were."""
    scrubber = Scrubber()
    write_atomic(dest, scrub(chunks, scrubber))
    return scrubber.replaced
