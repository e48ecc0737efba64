"""A local stand-in for the Hugging Face Hub, for the tests of `hf://` datasets (`data/hub.py`).

A small dataset repository in the Hub's layout (a dataset card `README.md` and the benchmark's
`LexPilot_release_multiturn.json` at its root, commits, a branch and a tag), served on loopback
with the routes `huggingface_hub` calls to download a file, as `hf_hub_download` reads them
(`file_download.get_hf_file_metadata`, `utils/_http.hf_raise_for_status`):

- `HEAD` and `GET /datasets/OWNER/NAME/resolve/REVISION/PATH` (REVISION percent-encoded): the file,
  with `X-Repo-Commit` (the commit the revision resolved to), `ETag` (the git blob id of a file
  kept in git) and `Content-Length`;
- `GET /api/datasets/OWNER/NAME/revision/REVISION` (`HfApi.dataset_info`): `id`, `sha`, `siblings`;
- errors as the Hub words them: `X-Error-Code` `RepoNotFound` (401 without a token that may read
  a private repository, 404 for none), `RevisionNotFound`, `EntryNotFound` (with `X-Repo-Commit`).

A new process is pointed at it by its environment (`hub_env`: `HF_ENDPOINT`, and `HF_HOME` a
temporary folder), as a user points the library at a mirror; this process by `point_library_at`,
since the library reads its variables once, when first imported. Every request is recorded
(`requests`), so that a test can tell that an offline read asked nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

from lexpilot_batch.util import resources

FILE = "LexPilot_release_multiturn.json"
CARD = """---
license: mit
language:
- zh
pretty_name: LexPilot
---
# LexPilot (test fixture)

A stand-in for the dataset card of the LexPilot benchmark, for offline tests.
"""


def commit_id(label: str) -> str:
    """A 40-hex commit id, as the Hub's are."""
    return hashlib.sha1(label.encode("utf-8")).hexdigest()


def blob_id(content: bytes) -> str:
    """What git names a blob, and the Hub sends as the ETag of a file kept in git."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class HubRepo:
    """A dataset repository: its commits' files and the refs (branches, tags) pointing at them."""

    commits: dict[str, dict[str, bytes]]  # commit id -> {path: content}
    refs: dict[str, str]  # branch or tag -> commit id
    token: str | None = None  # set: a private repository, readable only with this token

    def resolve(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.refs.get(revision)


def lexpilot_repo(token: str | None = None) -> tuple[HubRepo, dict[str, bytes]]:
    """The fixture repository `Medivvv/LexPilot`: `main` holds the bundled sample's cases as the
    benchmark's file (written otherwise than the sample, so that it is not taken for the sample);
    the tag `v0.9` an earlier commit where the first case's plaintiff type was written otherwise.
    Returns the repository and its dataset file's content by ref."""
    cases = json.loads(resources.sample_dataset().read_bytes())
    latest = json.dumps(cases, ensure_ascii=False, indent=1).encode("utf-8")
    cases[0]["plaintiff_type"] = cases[0]["plaintiff_type"] + "（旧版）"
    older = json.dumps(cases, ensure_ascii=False, indent=1).encode("utf-8")
    first, second = commit_id("v0.9"), commit_id("main")
    card = CARD.encode("utf-8")
    repo = HubRepo(
        commits={first: {"README.md": card, FILE: older}, second: {"README.md": card, FILE: latest}},
        refs={"main": second, "v0.9": first},
        token=token,
    )
    return repo, {"main": latest, "v0.9": older}


@dataclass
class FakeHub:
    repos: dict[str, HubRepo]  # OWNER/NAME -> dataset repository
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Authorization
    url: str = ""

    @contextmanager
    def serving(self) -> Iterator[FakeHub]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

            def do_GET(self) -> None:
                hub._answer(self, body=True)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join()

    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        self.requests.append((handler.command, handler.path, handler.headers.get("Authorization")))
        path = handler.path.split("?", 1)[0]
        if path.startswith("/api/datasets/") and "/revision/" in path:
            repo_id, _, revision = path[len("/api/datasets/") :].partition("/revision/")
            found = self._find(handler, repo_id, unquote(revision), None)
            if found is not None:
                commit, files = found
                info = {"id": repo_id, "sha": commit, "siblings": [{"rfilename": name} for name in sorted(files)]}
                self._send(handler, 200, json.dumps(info).encode("utf-8"), {"Content-Type": "application/json"}, body)
            return
        if path.startswith("/datasets/") and "/resolve/" in path:
            repo_id, _, rest = path[len("/datasets/") :].partition("/resolve/")
            revision, _, name = rest.partition("/")
            found = self._find(handler, repo_id, unquote(revision), unquote(name))
            if found is not None:
                commit, files = found
                content = files[unquote(name)]
                headers = {
                    "X-Repo-Commit": commit,
                    "ETag": f'"{blob_id(content)}"',
                    "Content-Type": "application/octet-stream",
                }
                self._send(handler, 200, content, headers, body)
            return
        self._send(handler, 404, b"not a route of this stand-in", {}, body)

    def _find(
        self, handler: BaseHTTPRequestHandler, repo_id: str, revision: str, name: str | None
    ) -> tuple[str, dict[str, bytes]] | None:
        """The commit and files asked for, or None once the Hub's error is sent."""
        repo = self.repos.get(repo_id)
        allowed = repo is not None and (
            repo.token is None or handler.headers.get("Authorization") == f"Bearer {repo.token}"
        )
        if repo is None or not allowed:
            status = 401 if handler.headers.get("Authorization") is None else 404
            self._send(handler, status, b"Repository not found", {"X-Error-Code": "RepoNotFound"}, True)
            return None
        commit = repo.resolve(revision)
        if commit is None:
            self._send(handler, 404, b"Invalid rev id", {"X-Error-Code": "RevisionNotFound"}, True)
            return None
        files = repo.commits[commit]
        if name is not None and name not in files:
            headers = {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}
            self._send(handler, 404, b"Entry not found", headers, True)
            return None
        return commit, files

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, content: bytes, headers: dict[str, str], body: bool
    ) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        if body and handler.command != "HEAD":
            handler.wfile.write(content)


def hub_env(hub: FakeHub, home: Path, **extra: str) -> dict[str, str]:
    """The variables a process's `huggingface_hub` reads for the stand-in: its endpoint, a cache of
    the test's own, no token or offline switch of the shell running the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE_", "LEXPILOT_", "OPENAI_"))}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(home), PYTHONIOENCODING="utf-8", **extra)
    return env


def point_library_at(monkeypatch: pytest.MonkeyPatch, hub: FakeHub, home: Path, *, offline: bool = False) -> None:
    """`huggingface_hub` in this process, pointed at the stand-in as `hub_env` points a new process.

    The library reads its variables once, when first imported, and an earlier test of the process
    may have imported it: the variables are set, and the module's copies of them too (as their
    names stand in `huggingface_hub.constants`), for this test only."""
    from huggingface_hub import constants

    for name in list(os.environ):
        if name.startswith(("HF_", "HUGGING_FACE_")):
            monkeypatch.delenv(name)
    values = {
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_TOKEN_PATH": str(home / "token"),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HOME", values["HF_HOME"])
    monkeypatch.setattr(constants, "HF_HUB_CACHE", values["HF_HUB_CACHE"])
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", values["HF_TOKEN_PATH"])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
