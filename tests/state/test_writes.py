"""Every write to the workspace database is `state/`'s: an INSERT, UPDATE, DELETE or REPLACE
statement in any other module of the package fails here, named by module and line, so that where a
row is written is found from the file names (`state/requests.py`, `state/threads.py`...).

The simulated provider is left out: a test double of the providers' APIs, with a state folder of its
own (`simulated/store.py`). The migrations' SQL is in `state/migrations.py`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import lexpilot_batch

PACKAGE = Path(lexpilot_batch.__file__).resolve().parent
OWNER = "state"
EXEMPT = {"simulated"}

# A write statement, wherever it stands in a string and in any case: `INSERT [OR ...] INTO t (`,
# `REPLACE INTO t VALUES`, `UPDATE [OR ...] t SET c =`, `DELETE FROM t WHERE` (or nothing after the
# table), the table or the columns set perhaps an f-string's hole. What follows the table tells SQL
# from prose ("insert into the list", "the update is set aside", "delete from the provider").
_TABLE = r"(?:[\w.\"]+|\{\})"
WRITE = re.compile(
    rf"\b(?:INSERT(?:\s+OR\s+\w+)?|REPLACE)\s+INTO\s+{_TABLE}\s*(?:\(|VALUES\b|SELECT\b|DEFAULT\b)"
    rf"|\bUPDATE(?:\s+OR\s+\w+)?\s+{_TABLE}\s+SET\s+(?:\w+\s*=|\{{\}})"
    rf"|\bDELETE\s+FROM\s+{_TABLE}\s*(?:WHERE\b|;|$)",
    re.IGNORECASE,
)


def sql_writes(source: str) -> list[int]:
    """The lines of a module whose strings hold a write statement. An f-string is read whole with
    its holes left blank (`f"UPDATE {table} SET"`); docstrings are prose and are skipped."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
        else:
            continue
        if WRITE.search(text):
            lines.add(node.lineno)
    return sorted(lines)


def test_no_module_outside_state_writes_to_the_database() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        folder = path.relative_to(PACKAGE).parts[0]
        if folder == OWNER or folder in EXEMPT:
            continue
        found += [f"{path.relative_to(PACKAGE)}:{line}" for line in sql_writes(path.read_text(encoding="utf-8"))]
    assert not found, "SQL writes outside state/ (give each a named function of state/):\n" + "\n".join(found)


def test_the_state_folder_does_write() -> None:
    """The finder reads the owner's modules as it reads the others: it would see their writes."""
    assert sql_writes((PACKAGE / OWNER / "requests.py").read_text(encoding="utf-8"))


def test_the_write_finder_sees_every_spelling_and_skips_prose() -> None:
    planted = '''
"""A docstring that says: UPDATE files SET nothing, DELETE FROM nowhere."""
db.execute("UPDATE files SET not_found = ? WHERE pk = ?", (1, 2))
db.execute(f"UPDATE requests SET status = '{FAILED}' WHERE pk = ?", (3,))
db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", ("k", "v"))
db.execute("insert into anomalies (kind) values (?)", ("x",))
db.execute(f"DELETE FROM {table} WHERE pk = ?", (4,))
db.execute("REPLACE INTO meta VALUES (?, ?)", ("k", "v"))
db.execute(
    "UPDATE OR IGNORE threads"
    " SET status = ?",
)
message = "the update is set aside; delete from the provider what we insert into the list"
db.execute(f"UPDATE files SET {columns} WHERE pk = ?", (5,))
rows = db.execute("SELECT * FROM files WHERE status = ?", ("compiled",))


def f():
    """INSERT INTO nothing: a docstring."""
'''
    assert sql_writes(planted) == [3, 4, 5, 6, 7, 8, 10, 14]
