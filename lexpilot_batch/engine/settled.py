"""What a process compiling wave after wave keeps of the requests it has read, so that each compile
reads from SQLite only what changed since the last.

Every compile advances each active (run, case) from all of its requests (`compiler`), so a group
of the fifth wave is read for the fourth time; that reading, not the protocols, was most of a
compile's own work. Yet a request that is settled (answered, failed or discarded) never changes
again, except from answered to discarded, which no compile tells apart: every writer of `requests`
starts from a pending row (ingest, a lost batch, `doctor`), and only rows that are still pending
are ever deleted (an unsent wave, a file cut for a token budget). So `Settled` holds, for each group
the last compile left active, its rows below a `boundary` — the lowest pk still pending when that
compile committed, below which every row was settled — and the next compile reads only the rows at
or above it, and the whole of any group it does not hold.

What is held is checked before it is used, and dropped at the slightest doubt: another connection
committed since (`PRAGMA data_version`: another command, another process), or the rows below the
boundary are no longer as many, as many failed, and none pending as when it was taken. A compile
that fails keeps nothing of what it read (`View` is installed only after its transaction commits).
Only a process that compiles several times profits: `lexpilot-batch run` and `poll-and-advance
--wait`; a single `poll-and-advance` starts empty and reads everything, as it always did.

With a group's rows it holds what the compiler built of them (`compiler._by_step`: the attempts by
step and the answers), so the next compile builds only from the rows read since; a group whose rows
are cut at the new boundary, or that is read for fewer steps, is built again from its rows.

Memory is bounded: at most `MAX_ROWS` rows (about 670 bytes each, and what was built of them: at 1x
the engine's peak RSS went from 146 to 155 MB; every active group's fit),
`MAX_CASES` parsed cases and `PIECES_BYTES` of encoded prompt pieces are held; groups beyond them
are read from SQLite in full, as without this module.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from lexpilot_batch.data import Case
from lexpilot_batch.providers.lines import Pieces
from lexpilot_batch.state.states import RequestState

MAX_ROWS = 60_000
MAX_CASES = 512
PIECES_BYTES = 16 << 20

Group = tuple[int, int]  # (case_idx, run_pk), as `compiler._active_groups` yields them


@dataclass(frozen=True)
class _Below:
    """What the database held below the boundary when the rows were taken."""

    boundary: int
    rows: int
    failed: int
    pending: int = 0


def _below(db: sqlite3.Connection, boundary: int) -> _Below:
    n, failed, pending = db.execute(
        f"SELECT COUNT(*), TOTAL(status = '{RequestState.FAILED}'), TOTAL(status = '{RequestState.PENDING}')"
        " FROM requests WHERE pk < ?",
        (boundary,),
    ).fetchone()
    return _Below(boundary, n, int(failed), int(pending))


Held = tuple[frozenset[str], list, Any]  # (step prefixes read, rows, what the compiler built of them or None)


@dataclass
class View:
    """One compile's use of what is held: the boundary it reads above, the groups it may take as
    held, and what it keeps for the next compile."""

    held: dict[Group, Held]
    cases: dict[tuple[str, int], Case]
    opened: _Below | None = None  # below the boundary at the compile's start, as checked; None: nothing held
    kept: dict[Group, Held] = field(default_factory=dict)
    kept_rows: int = 0
    hits: int = 0  # groups taken as held (the tests count them)
    below: _Below | None = None  # at the end of the compile

    @property
    def boundary(self) -> int | None:
        """The pk at and above which rows are read; None: every group is read in full."""
        return self.opened.boundary if self.opened is not None else None

    def take(self, group: Group, prefixes: frozenset[str]) -> tuple[list, Any] | None:
        """The group's held rows whose step starts with one of `prefixes`, in the order they were
        read, and what the compiler built of exactly those rows (None when it must build it again:
        fewer prefixes, or rows let go at the boundary); None when the group is not held for all
        of those prefixes. Taken once: what the next compile needs, this one keeps anew (`keep`),
        so the two are never both in memory; a compile that fails leaves the groups it took unheld,
        and the next reads them in full."""
        found = self.held.pop(group, None)
        if found is None or not prefixes <= found[0]:
            return None
        self.hits += 1
        if prefixes == found[0]:
            return found[1], found[2]
        starts = tuple(prefixes)
        return [r for r in found[1] if r[1].startswith(starts)], None

    def keep(self, group: Group, prefixes: frozenset[str], rows: list, built: Any = None) -> None:
        """Hold a group that stays active, with every row it was advanced from and what the
        compiler built of them (the rows at or above the next boundary are dropped when the compile
        ends, and what was built of them with them)."""
        if self.kept_rows + len(rows) <= MAX_ROWS:
            self.kept[group] = (prefixes, rows, built)
            self.kept_rows += len(rows)

    def case(self, key: tuple[str, int]) -> Case | None:
        return self.cases.get(key)

    def add_case(self, key: tuple[str, int], case: Case) -> None:
        if len(self.cases) < MAX_CASES:
            self.cases[key] = case

    def close(self, db: sqlite3.Connection) -> None:
        """At the end of the compile, inside its transaction: the new boundary, and what lies below
        it. Below the old boundary nothing is pending (`Settled.open` checked it): only the rows
        above it are looked at."""
        start = self.opened.boundary if self.opened is not None else 0
        low = db.execute(
            f"SELECT MIN(pk) FROM requests WHERE pk >= ? AND status = '{RequestState.PENDING}'", (start,)
        ).fetchone()[0]
        if low is None:
            low = (db.execute("SELECT MAX(pk) FROM requests").fetchone()[0] or 0) + 1
        if self.opened is None:
            self.below = _below(db, low)
        else:
            n, failed = db.execute(
                f"SELECT COUNT(*), TOTAL(status = '{RequestState.FAILED}') FROM requests WHERE pk >= ? AND pk < ?",
                (start, low),
            ).fetchone()
            self.below = _Below(low, self.opened.rows + n, self.opened.failed + int(failed))
        for group, (prefixes, rows, _) in list(self.kept.items()):
            # `requests.REQUEST_COLUMNS` ends with the pk.
            if any(r[-1] >= low for r in rows):
                self.kept[group] = (prefixes, [r for r in rows if r[-1] < low], None)


class Settled:
    """The held rows of one connection's workspace, across the compiles of one process."""

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None
        self._version: Any = None
        self._below: _Below | None = None
        self._groups: dict[Group, Held] = {}
        self._cases: dict[tuple[str, int], Case] = {}
        # Prompt pieces as request lines hold them (`lines.Pieces`): a pure function of the text, so
        # kept whatever happens to the rest; a case's history is encoded once, not once a wave.
        self.pieces = Pieces(PIECES_BYTES)

    def open(self, db: sqlite3.Connection) -> View:
        """A compile's view, inside its transaction: what is held, if it still stands."""
        version = db.execute("PRAGMA data_version").fetchone()[0]
        below = self._below
        if db is not self._conn or version != self._version or below is None or _below(db, below.boundary) != below:
            self._drop()
            return View({}, {})
        return View(self._groups, self._cases, opened=below)

    def install(self, view: View, db: sqlite3.Connection) -> None:
        """After the compile's transaction committed: hold what it kept."""
        if view.below is None:
            self._drop()
            return
        self._conn = db
        self._version = db.execute("PRAGMA data_version").fetchone()[0]
        self._below = view.below
        self._groups = view.kept
        self._cases = view.cases

    def _drop(self) -> None:
        self._conn, self._version, self._below = None, None, None
        self._groups, self._cases = {}, {}
