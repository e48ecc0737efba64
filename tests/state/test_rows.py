"""The typed rows `state/` hands up (`waves.FileRow`, `requests.RequestRow`) name exactly the
columns their queries read, in order: the compiler reads a request row by position on its hot path."""

from __future__ import annotations

from pathlib import Path

from lexpilot_batch.state.requests import REQUEST_COLUMNS, RequestRow
from lexpilot_batch.state.store import Store
from lexpilot_batch.state.waves import FileRow


def test_a_file_row_names_every_column_of_files(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    try:
        columns = [r["name"] for r in store.conn.execute("PRAGMA table_info(files)")]
    finally:
        store.close()
    assert list(FileRow.__annotations__) == columns


def test_a_request_row_names_the_compilers_columns_in_their_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    try:
        cursor = store.conn.execute(f"SELECT {REQUEST_COLUMNS} FROM requests")
        columns = [d[0] for d in cursor.description]
    finally:
        store.close()
    assert list(RequestRow.__annotations__) == columns
    assert columns[-1] == "pk"  # `engine.settled` reads it last
