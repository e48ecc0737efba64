"""The workspace database: a blank database migrated to head has the expected schema, and so
does one upgraded from every earlier released version."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import pytest

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.state import readonly as readonly_module
from lexpilot_batch.state.migrations import MIGRATIONS
from lexpilot_batch.state.readonly import open_read_only, sqlite_uri
from lexpilot_batch.state.store import Store

# table -> [(column, type, NOT NULL, primary-key position)], in column order
TABLES = {
    "anomalies": [
        ("pk", "INTEGER", 0, 1),
        ("file_pk", "INTEGER", 0, 0),
        ("kind", "TEXT", 1, 0),
        ("custom_id", "TEXT", 0, 0),
        ("detail", "TEXT", 1, 0),
        ("at", "REAL", 1, 0),
    ],
    "cases": [
        ("dataset", "TEXT", 1, 1),
        ("idx", "INTEGER", 1, 2),
        ("case_number", "TEXT", 1, 0),
        ("cause_class", "TEXT", 1, 0),
        ("data", "TEXT", 1, 0),
        ("cause", "TEXT", 0, 0),
    ],
    "categories": [("sha256", "TEXT", 0, 1), ("classes", "TEXT", 1, 0)],
    "compacted": [
        ("path", "TEXT", 0, 1),
        ("sha256", "TEXT", 1, 0),
        ("bytes", "INTEGER", 1, 0),
        ("stored_bytes", "INTEGER", 1, 0),
        ("at", "REAL", 1, 0),
    ],
    "judge_words": [("request_pk", "INTEGER", 0, 1), ("raw", "TEXT", 0, 0), ("reasoning", "TEXT", 0, 0)],
    "files": [
        ("pk", "INTEGER", 0, 1),
        ("wave", "INTEGER", 1, 0),
        ("path", "TEXT", 1, 0),
        ("roles", "TEXT", 1, 0),
        ("model", "TEXT", 1, 0),
        ("endpoint", "TEXT", 1, 0),
        ("shard", "INTEGER", 1, 0),
        ("n_requests", "INTEGER", 1, 0),
        ("bytes", "INTEGER", 1, 0),
        ("sha256", "TEXT", 1, 0),
        ("status", "TEXT", 1, 0),
        ("provider_file_id", "TEXT", 0, 0),
        ("batch_id", "TEXT", 0, 0),
        ("batch_status", "TEXT", 0, 0),
        ("request_counts", "TEXT", 0, 0),
        ("batch_errors", "TEXT", 0, 0),
        ("output_file_id", "TEXT", 0, 0),
        ("error_file_id", "TEXT", 0, 0),
        ("output_path", "TEXT", 0, 0),
        ("error_path", "TEXT", 0, 0),
        ("submitted_at", "REAL", 0, 0),
        ("finished_at", "REAL", 0, 0),
        ("backend", "TEXT", 1, 0),
        ("provider", "TEXT", 0, 0),
        ("url", "TEXT", 0, 0),
        ("tokens", "INTEGER", 1, 0),
        ("creates", "INTEGER", 1, 0),
        ("creating_at", "REAL", 0, 0),
        ("not_found", "INTEGER", 1, 0),
        ("uploading_at", "REAL", 0, 0),
        ("held", "TEXT", 0, 0),
        ("damaged", "INTEGER", 1, 0),
        ("redacted", "INTEGER", 1, 0),
        ("sent_after", "REAL", 0, 0),
        ("instance", "TEXT", 0, 0),
        ("lost_answers", "INTEGER", 1, 0),
        ("cancel_asked", "REAL", 0, 0),
    ],
    "instances": [
        ("id", "TEXT", 0, 1),
        ("parent", "TEXT", 0, 0),
        ("why", "TEXT", 1, 0),
        ("place", "TEXT", 1, 0),
        ("at", "REAL", 1, 0),
    ],
    "meta": [("key", "TEXT", 0, 1), ("value", "TEXT", 1, 0)],
    "other_batches": [
        ("batch_id", "TEXT", 0, 1),
        ("file_pk", "INTEGER", 0, 0),
        ("path", "TEXT", 1, 0),
        ("why", "TEXT", 1, 0),
        ("status", "TEXT", 0, 0),
        ("at", "REAL", 1, 0),
    ],
    "retries": [
        ("pk", "INTEGER", 0, 1),
        ("at", "REAL", 1, 0),
        ("selection", "TEXT", 1, 0),
        ("threads", "INTEGER", 1, 0),
        ("after_wave", "INTEGER", 1, 0),
    ],
    "migrations": [("name", "TEXT", 0, 1), ("applied_at", "REAL", 1, 0)],
    "requests": [
        ("pk", "INTEGER", 0, 1),
        ("custom_id", "TEXT", 1, 0),
        ("run_pk", "INTEGER", 1, 0),
        ("case_idx", "INTEGER", 1, 0),
        ("step", "TEXT", 1, 0),
        ("attempt", "INTEGER", 1, 0),
        ("role", "TEXT", 1, 0),
        ("model", "TEXT", 1, 0),
        ("parser", "TEXT", 1, 0),
        ("n_claims", "INTEGER", 1, 0),
        ("wave", "INTEGER", 1, 0),
        ("file_pk", "INTEGER", 1, 0),
        ("status", "TEXT", 1, 0),
        ("text", "TEXT", 0, 0),
        ("value", "TEXT", 0, 0),
        ("error", "TEXT", 0, 0),
        ("error_kind", "TEXT", 0, 0),
        ("prompt_chars", "INTEGER", 1, 0),
        ("prompt_tokens", "INTEGER", 0, 0),
        ("completion_tokens", "INTEGER", 0, 0),
        ("reasoning_tokens", "INTEGER", 0, 0),
        ("cached_tokens", "INTEGER", 0, 0),
        ("cache_write_tokens", "INTEGER", 0, 0),
        ("cost_usd", "REAL", 0, 0),
        ("answered_at", "REAL", 0, 0),
    ],
    "runs": [
        ("pk", "INTEGER", 0, 1),
        ("run_id", "TEXT", 1, 0),
        ("model", "TEXT", 1, 0),
        ("key", "TEXT", 1, 0),
        ("dataset", "TEXT", 1, 0),
        ("manifest", "TEXT", 1, 0),
        ("templates", "TEXT", 1, 0),
        ("speculate", "INTEGER", 1, 0),
        ("created_at", "REAL", 1, 0),
    ],
    "threads": [
        ("pk", "INTEGER", 0, 1),
        ("run_pk", "INTEGER", 1, 0),
        ("task", "TEXT", 1, 0),
        ("case_idx", "INTEGER", 1, 0),
        ("variant", "TEXT", 1, 0),
        ("status", "TEXT", 1, 0),
        ("record", "TEXT", 0, 0),
        ("reason", "TEXT", 0, 0),
        ("score", "TEXT", 0, 0),
        ("fresh_after", "INTEGER", 1, 0),
    ],
    "waves": [("n", "INTEGER", 0, 1), ("compiled_at", "REAL", 1, 0), ("closed_at", "REAL", 0, 0)],
}
# index -> (table, columns, unique); UNIQUE constraints are SQLite's own autoindexes
INDEXES = {
    "files_status": ("files", ("status", "wave"), False),
    "requests_file": ("requests", ("file_pk",), False),
    "requests_usage": (
        "requests",
        (
            "run_pk",
            "role",
            "status",
            "file_pk",
            "prompt_tokens",
            "completion_tokens",
            "cached_tokens",
            "cache_write_tokens",
            "cost_usd",
        ),
        False,
    ),
    "threads_active": ("threads", ("status", "run_pk", "case_idx"), False),
}
UNIQUE = {
    ("files", ("path",)),
    ("requests", ("custom_id",)),
    ("requests", ("run_pk", "case_idx", "step", "attempt")),
    ("runs", ("key",)),
    ("runs", ("run_id", "model")),
    ("threads", ("run_pk", "task", "case_idx", "variant")),
}
FOREIGN_KEYS = {
    ("threads", "run_pk", "runs", "pk"),
    ("files", "wave", "waves", "n"),
    ("requests", "run_pk", "runs", "pk"),
    ("requests", "file_pk", "files", "pk"),
    ("other_batches", "file_pk", "files", "pk"),
    ("judge_words", "request_pk", "requests", "pk"),
}


def schema(db: sqlite3.Connection) -> dict:
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    columns = {t: [(c[1], c[2], c[3], c[5]) for c in db.execute(f"PRAGMA table_info({t})")] for t in tables}
    indexes, unique, foreign = {}, set(), set()
    for table in tables:
        for _, name, is_unique, origin, _ in db.execute(f"PRAGMA index_list({table})"):
            cols = tuple(c[2] for c in db.execute(f"PRAGMA index_info({name})"))
            if origin == "u":
                unique.add((table, cols))
            elif origin == "c":
                indexes[name] = (table, cols, bool(is_unique))
        for row in db.execute(f"PRAGMA foreign_key_list({table})"):
            foreign.add((table, row[3], row[2], row[4]))
    return {"tables": columns, "indexes": indexes, "unique": unique, "foreign_keys": foreign}


# In order; a released migration keeps its name and place, a new one is appended.
MIGRATION_NAMES = [
    "0001_initial",
    "0002_file_backend",
    "0003_drop_requests_case",
    "0004_scores_and_usage",
    "0005_usage_by_file",
    "0006_categories",
    "0007_file_provider",
    "0008_rescore_interaction_fields",
    "0009_operations",
    "0010_compacted_files",
    "0011_usage_cached",
    "0012_uploading",
    "0013_download_checks",
    "0014_provider_times",
    "0015_instances",
    "0016_cancel_asked",
    "0017_judge_words",
    "0018_reported_cost",
    "0023_answered_at",
]


def test_a_blank_database_migrated_to_head_has_the_expected_schema(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    try:
        assert schema(store.conn) == {
            "tables": TABLES,
            "indexes": INDEXES,
            "unique": UNIQUE,
            "foreign_keys": FOREIGN_KEYS,
        }
        assert [name for name, _ in MIGRATIONS] == MIGRATION_NAMES
        assert [r[0] for r in store.conn.execute("SELECT name FROM migrations ORDER BY rowid")] == MIGRATION_NAMES
    finally:
        store.close()


@pytest.mark.parametrize("released", range(1, len(MIGRATIONS)))
def test_a_database_of_every_earlier_version_upgrades_to_the_same_schema(tmp_path, released):
    path = tmp_path / "db.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, step in MIGRATIONS[:released]:  # as that version left it
        db.execute("BEGIN")
        step(db)
        db.execute("INSERT INTO migrations VALUES (?, ?)", (name, time.time()))
        db.execute("COMMIT")
    db.close()
    store = Store(path)
    try:
        assert schema(store.conn)["tables"] == TABLES
        assert schema(store.conn)["indexes"] == INDEXES
        assert schema(store.conn)["unique"] == UNIQUE
    finally:
        store.close()
    again = Store(path)  # nothing left to apply
    try:
        assert again.conn.execute("SELECT COUNT(*) FROM migrations").fetchone()[0] == len(MIGRATIONS)
    finally:
        again.close()


def test_batches_cancelled_before_cancels_were_recorded_are_taken_as_asked_for(tmp_path):
    """0016_cancel_asked: who cancelled a batch before then, the database cannot say; `doctor`
    (`batches_cancelled_elsewhere`) names only those cancelled unasked since."""
    path = tmp_path / "db.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    before = [name for name, _ in MIGRATIONS].index("0016_cancel_asked")
    for name, step in MIGRATIONS[:before]:
        db.execute("BEGIN")
        step(db)
        db.execute("INSERT INTO migrations VALUES (?, ?)", (name, time.time()))
        db.execute("COMMIT")
    required = [r[1] for r in db.execute("PRAGMA table_info(files)") if r[3] and r[4] is None and not r[5]]
    for pk, status in enumerate(("cancelled", "cancelling", "completed", None), 1):
        values = {c: 0 for c in required} | {"pk": pk, "path": f"f{pk}", "batch_status": status, "finished_at": 5.0}
        db.execute(
            f"INSERT INTO files ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})", tuple(values.values())
        )
    db.close()
    store = Store(path)
    try:
        asked = dict(store.conn.execute("SELECT pk, cancel_asked FROM files").fetchall())
        assert asked == {1: 5.0, 2: 5.0, 3: None, 4: None}
    finally:
        store.close()


def test_a_database_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "db.sqlite3"
    Store(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("INSERT INTO migrations VALUES ('9999_from_the_future', 0)")
    db.close()
    with pytest.raises(LexpilotError, match="newer lexpilot-batch"):
        Store(path)


class WindowsOs:
    """`os` as `store` sees it on Windows: `os.access` says every folder can be written to (it reads
    only the read-only attribute, which Windows ignores for folders), and creating a file in
    `read_only` is refused (an ACL, a read-only share). `created`: the files opened to be created.
    (Only `store`'s `os`: pathlib and pytest go on with the real one.)"""

    name = "nt"

    def __init__(self, read_only: Path | None) -> None:
        self.read_only = read_only
        self.created: list[str] = []

    def __getattr__(self, attr: str) -> Any:
        return getattr(os, attr)

    def access(self, path: Any, mode: int, **kwargs: Any) -> bool:
        return True

    def open(self, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT:
            self.created.append(os.fspath(path))
            if self.read_only is not None and Path(path).parent == self.read_only:
                raise PermissionError(13, "Access is denied", os.fspath(path))
        return os.open(path, flags, *args, **kwargs)


def test_a_folder_windows_will_not_write_opens_the_workspace_read_only(tmp_path, monkeypatch):
    path = tmp_path / "state" / "lexpilot.sqlite3"
    Store(path).close()  # no write-ahead log left: opened as immutable
    windows = WindowsOs(read_only=path.parent)
    monkeypatch.setattr(readonly_module, "os", windows)
    store = Store(path, readonly=True)
    try:
        assert store.readonly  # not a connection that fails at its first write, or makes a -wal
        assert store.conn.execute("SELECT COUNT(*) FROM migrations").fetchone()[0] == len(MIGRATIONS)
    finally:
        store.close()
    assert windows.created and all(Path(name).parent == path.parent for name in windows.created)
    assert sorted(p.name for p in path.parent.iterdir()) == ["lexpilot.sqlite3"]


def test_a_folder_windows_will_write_is_probed_without_a_file_left_behind(tmp_path, monkeypatch):
    path = tmp_path / "state" / "lexpilot.sqlite3"
    Store(path).close()
    before = sorted(p.name for p in path.parent.iterdir())
    windows = WindowsOs(read_only=None)
    monkeypatch.setattr(readonly_module, "os", windows)
    store = Store(path, readonly=True)
    try:
        assert not store.readonly
    finally:
        store.close()
    assert windows.created and all(Path(name).parent == path.parent for name in windows.created)
    assert sorted(p.name for p in path.parent.iterdir()) == before


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        (PurePosixPath("/home/me/ws/state/lexpilot.sqlite3"), "file:///home/me/ws/state/lexpilot.sqlite3"),
        (PurePosixPath("/data/50% #1?/lexpilot.sqlite3"), "file:///data/50%25 %231%3F/lexpilot.sqlite3"),
        (PureWindowsPath(r"C:\Users\me\ws\state\lexpilot.sqlite3"), "file:///C:/Users/me/ws/state/lexpilot.sqlite3"),
        (PureWindowsPath(r"D:\实验 #2\100%\db"), "file:///D:/实验 %232/100%25/db"),
        (PureWindowsPath(r"\\server\share\lab\ws\db"), "file:////server/share/lab/ws/db"),
        (PureWindowsPath(r"\\server.corp\share #1\ws\db"), "file:////server.corp/share %231/ws/db"),
    ],
)
def test_the_read_only_uri_is_one_sqlite_accepts(path, uri):
    assert sqlite_uri(path) == uri


def test_sqlite_refuses_pathlibs_uri_of_a_unc_path_and_takes_ours(tmp_path):
    """SQLite parses URIs alike on every platform: `as_uri()`'s authority is refused outright, ours
    is a path (which this machine has not, hence the other error)."""
    unc = PureWindowsPath(r"\\server\share\ws\state\lexpilot.sqlite3")
    with pytest.raises(sqlite3.OperationalError, match="invalid uri authority"):
        sqlite3.connect(f"{unc.as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as ours:
        sqlite3.connect(f"{sqlite_uri(unc)}?mode=ro", uri=True)
    assert "authority" not in str(ours.value)


def test_a_read_only_workspace_opens_under_a_folder_named_with_uri_characters(tmp_path):
    path = tmp_path / "50% #1?" / "state" / "lexpilot.sqlite3"
    Store(path).close()
    db = open_read_only(path)
    try:
        assert db.execute("SELECT COUNT(*) FROM migrations").fetchone()[0] == len(MIGRATIONS)
    finally:
        db.close()
