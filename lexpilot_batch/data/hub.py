"""Datasets on the Hugging Face Hub: `--dataset hf://datasets/OWNER/NAME[@REVISION][/FILE]`.

The benchmark's own data is the Hub dataset `Medivvv/LexPilot` (`LexPilot_release_multiturn.json`).
A `hf://` dataset is read through `huggingface_hub` (the optional extra `hub`), which downloads it
into its own cache and honours its own variables: `HF_TOKEN` (or the token `hf auth login` keeps)
for private and gated repositories, `HF_ENDPOINT` for mirrors, `HF_HUB_OFFLINE=1` for the cache
alone, `HF_HOME` / `HF_HUB_CACHE` for where the cache is. The file is then validated as a local
file is (`dataset.scan`). What `download` returns carries the commit the revision resolved to:
the cache keeps every file under `snapshots/<commit>/`, so the commit is known offline too, and a
run's manifest records it beside the file's SHA-256.

The URL follows `huggingface_hub`'s file-system convention (`HfFileSystem`, `parse_hf_uri`): a
revision after `@`, percent-encoded when it holds a `/` (`@refs%2Fheads%2Fdev`) unless it is a
special ref (`@refs/pr/3`, `@refs/convert/parquet`); the file name may be left out for the
benchmark's file. It is parsed here rather than by the library, so that a `hf://` dataset given
without the extra installed is recognised and the extra named.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from lexpilot_batch.errors import ConfigError, DataError
from lexpilot_batch.util.extras import require
from lexpilot_batch.util.redaction import register_secret

PREFIX = "hf://"
BENCHMARK_REPO = "Medivvv/LexPilot"
DEFAULT_FILE = "LexPilot_release_multiturn.json"
DEFAULT_REVISION = "main"  # what the Hub serves when no revision is named
# Revisions that hold a `/` and are written as they are (the library's `_SPECIAL_REFS_REVISION_REGEX`).
_SPECIAL_REF = re.compile(r"^refs/(?:convert/[\w.-]+|pr/\d+)")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_NAME = re.compile(r"^[\w.-]+$")
_EXAMPLE = f"{PREFIX}datasets/{BENCHMARK_REPO}@main/{DEFAULT_FILE}"
# Where the token `huggingface_hub` sends comes from: these variables, or the file `hf auth login` writes.
TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


@dataclass(frozen=True)
class HubFile:
    """A file of a Hub dataset at a revision (None: the default branch, as the Hub resolves it)."""

    repo: str  # OWNER/NAME
    filename: str = DEFAULT_FILE
    revision: str | None = None

    @property
    def url(self) -> str:
        """The `hf://` URL naming this file, as `--dataset` takes it."""
        at = ""
        if self.revision is not None:
            special = _SPECIAL_REF.fullmatch(self.revision) is not None
            at = "@" + (self.revision if special else quote(self.revision, safe=""))
        return f"{PREFIX}datasets/{self.repo}{at}/{self.filename}"

    def pinned(self, commit: str) -> HubFile:
        """The same file at one commit: what a later command reads to get the very bytes again."""
        return replace(self, revision=commit)

    def fill_command(self) -> str:
        """The `huggingface_hub` command that downloads this file into the cache."""
        return f"hf download {self.repo} {self.filename} --repo-type dataset --revision {self.revision or DEFAULT_REVISION}"


@dataclass(frozen=True)
class HubDownload:
    """A Hub dataset file in the local cache: which file, the commit its revision resolved to, where."""

    file: HubFile
    commit: str
    path: Path

    @property
    def label(self) -> str:
        """The file as messages name it: its URL and the commit it was read at."""
        return f"{self.file.url} (commit {self.commit[:12]})"


def is_hub_url(text: str) -> bool:
    return text.startswith(PREFIX)


def parse_hub_url(text: str) -> HubFile:
    """The Hub file a `hf://datasets/OWNER/NAME[@REVISION][/FILE]` URL names; `DataError` saying
    what is wrong with any other."""
    body = text[len(PREFIX) :] if is_hub_url(text) else ""
    kind, _, location = body.partition("/")
    if kind != "datasets":
        raise DataError(
            f"--dataset {text}: a Hugging Face dataset is named hf://datasets/OWNER/NAME[@REVISION][/FILE], "
            f"e.g. {_EXAMPLE} (models, spaces and buckets hold no LexPilot dataset)"
        )
    location = location.strip("/")
    at = location.find("@")
    if at == -1 or location[:at].count("/") > 1:  # an `@` past OWNER/NAME is part of the file name
        owner, _, rest = location.partition("/")
        name, _, path = rest.partition("/")
        revision = None
    else:
        owner, _, name = location[:at].partition("/")
        after = location[at + 1 :]
        special = _SPECIAL_REF.search(after)
        raw = special.group() if special else after.split("/", 1)[0]
        path = after[len(raw) :].removeprefix("/")
        revision = unquote(raw)
        if not revision:
            raise DataError(f"--dataset {text}: nothing after '@'; name a branch, tag or commit, e.g. {_EXAMPLE}")
    if not (_NAME.match(owner) and _NAME.match(name)):
        raise DataError(f"--dataset {text}: the dataset must be named OWNER/NAME, e.g. {_EXAMPLE}")
    return HubFile(f"{owner}/{name}", path or DEFAULT_FILE, revision)


def dataset_source(text: str | None) -> Path | HubFile | None:
    """What `--dataset TEXT` names: a Hub file for a `hf://` URL, a local path otherwise."""
    if text is None:
        return None
    return parse_hub_url(text) if is_hub_url(text) else Path(text)


def download(file: HubFile) -> HubDownload:
    """The file in `huggingface_hub`'s cache, downloaded there first unless it is cached at a pinned
    commit (or `HF_HUB_OFFLINE` is set), and the commit its revision resolved to.

    Every failure is one `DataError` naming the file and what to do; the token is never in it.
    """
    hub = require("huggingface_hub", "hub", "hf:// datasets", ConfigError)
    from huggingface_hub import constants, errors

    _register_tokens(constants)
    offline = bool(getattr(constants, "HF_HUB_OFFLINE", False))
    cache = constants.HF_HUB_CACHE
    try:
        path = hub.hf_hub_download(
            file.repo, file.filename, repo_type="dataset", revision=file.revision, library_name="lexpilot-batch"
        )
    except errors.LocalEntryNotFoundError as exc:
        raise _not_cached(file, cache, constants.ENDPOINT, offline, exc) from None
    except errors.GatedRepoError:
        raise DataError(
            f"{file.url}: the dataset {file.repo} is gated on {constants.ENDPOINT}: accept its conditions on its "
            "page with your account, then set HF_TOKEN to a token of that account (or run `hf auth login`)."
        ) from None
    except errors.RepositoryNotFoundError:
        raise DataError(
            f"{file.url}: {constants.ENDPOINT} has no dataset {file.repo}, or it is private and no token of an "
            "account that may read it was sent: check the name, or set HF_TOKEN (or run `hf auth login`)."
        ) from None
    except errors.RevisionNotFoundError:
        raise DataError(
            f"{file.url}: the dataset {file.repo} has no revision {file.revision!r} on {constants.ENDPOINT}; "
            "name a branch, tag or commit it has (its page lists them), or leave '@...' out for its default branch."
        ) from None
    except errors.EntryNotFoundError:
        raise DataError(
            f"{file.url}: the dataset {file.repo} has no file {file.filename!r} at revision "
            f"{file.revision or DEFAULT_REVISION} on {constants.ENDPOINT}; name one of its files (the default is "
            f"{DEFAULT_FILE})."
        ) from None
    except errors.HfHubHTTPError as exc:
        raise DataError(
            f"{file.url}: {constants.ENDPOINT} refused the download ({_first_line(exc)}); try again later, or set "
            "HF_ENDPOINT to a mirror."
        ) from None
    except OSError as exc:  # a cache that cannot be written, a connection dropped during the download
        raise DataError(
            f"{file.url}: downloading into the Hugging Face cache {cache} failed ({exc}); check that it can be "
            "written (HF_HOME or HF_HUB_CACHE moves it) and that the Hub is reachable, then try again."
        ) from None
    return HubDownload(file, _commit_of(Path(path), file), Path(path))


def _register_tokens(constants: Any) -> None:
    """The token `huggingface_hub` may send is a secret of ours too: no message or file may show it
    (`redaction`), whatever the Hub or a proxy echoes back."""
    for name in TOKEN_VARIABLES:
        register_secret(name, os.environ.get(name))
    token_path = getattr(constants, "HF_TOKEN_PATH", None)
    if token_path:
        with contextlib.suppress(OSError, UnicodeDecodeError):  # no stored token: nothing to hide
            register_secret("HF_TOKEN", Path(token_path).read_text(encoding="utf-8").strip())


def _not_cached(file: HubFile, cache: str, endpoint: str, offline: bool, exc: Exception) -> DataError:
    fill = (
        f"fill it with `lexpilot-batch validate-data --dataset {file.url}` (or `{file.fill_command()}`) "
        "where the Hub can be reached"
    )
    if offline:
        return DataError(
            f"{file.url} is not in the Hugging Face cache {cache}, and HF_HUB_OFFLINE is set, so the Hub is not asked: "
            f"{fill}, with HF_HUB_OFFLINE unset and the same HF_HOME; or point HF_HOME (or HF_HUB_CACHE) at the "
            "cache that holds it."
        )
    return DataError(
        f"{file.url}: {endpoint} could not be reached ({_first_line(exc.__cause__ or exc)}), and the file is not "
        f"in the Hugging Face cache {cache}. Check the connection, or set HF_ENDPOINT to a mirror of the Hub "
        f"(e.g. https://hf-mirror.com); or {fill}."
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _commit_of(path: Path, file: HubFile) -> str:
    """The commit of a file in the cache: it lies at `snapshots/<commit>/<file name>` (the cache's
    documented layout), wherever the revision named pointed."""
    depth = len(file.filename.split("/"))
    parts = path.parts
    if len(parts) > depth + 1 and parts[-depth - 2] == "snapshots" and _COMMIT.match(parts[-depth - 1]):
        return parts[-depth - 1]
    raise DataError(
        f"{file.url}: huggingface_hub gave {path}, which is not a file of its cache's snapshots/<commit>/ folders, "
        "so the commit it was read at cannot be told; download it into the cache (leave HF_HUB_CACHE unset or "
        "pointing at a cache folder) and try again."
    )
