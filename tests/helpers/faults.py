"""Drivers and checks for `scenarios/test_faults.py`: run the whole benchmark under a fault, then hold the
result against a fault-free run and against the provider's own files.

The checks read the workspace's database and the result files it saved under `responses/`, and
re-validate every answer independently of `lexpilot_batch.engine.ingest`, so that a request answered from
an error line, a non-200 response, an empty, truncated or malformed answer is caught even if ingest
itself were wrong.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.benchmark import judges
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.engine.result_lines import read_lines
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.state.compaction import read_saved, saved_files
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status import detail
from lexpilot_batch.util import resources
from tests.helpers.engine import FINISH_SECONDS, finish, open_session, prepare_runs, records, rounds

LIMIT = 6  # cases per run: every task and every protocol branch, in about a second
STAGE = "all"

ThreadKey = tuple[str, str, str, int, str]  # run id, model, task, case index, variant


@dataclass
class Outcome:
    """What a finished (or given up) workspace holds, read once while it is open."""

    records: dict[ThreadKey, dict]
    threads: dict[ThreadKey, tuple[str, str | None]]  # (status, reason)
    requests: list[dict[str, Any]]
    files: list[dict[str, Any]]
    anomalies: list[dict[str, Any]]
    status: dict[str, Any]
    rendered: str
    answered: set[tuple[str, int, str]]  # (run id, case index, step) answered
    other_batches: list[dict[str, Any]] = field(default_factory=list)  # refused or duplicate batches kept aside
    server: Counter = field(default_factory=Counter)  # the simulated provider's call counters
    sim_batches: list[dict[str, Any]] = field(default_factory=list)  # Batch objects it holds
    sim_uploads: list[dict[str, Any]] = field(default_factory=list)  # request files (purpose batch) it holds

    def by_custom_id(self) -> dict[str, dict[str, Any]]:
        return {r["custom_id"]: r for r in self.requests}

    def failed_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["status"] == "failed"]


def read_outcome(ws: Workspace) -> Outcome:
    db = ws.store.conn
    threads = {
        (r["run_id"], r["model"], r["task"], r["case_idx"], r["variant"]): (r["status"], r["reason"])
        for r in db.execute(
            "SELECT runs.run_id, runs.model, t.task, t.case_idx, t.variant, t.status, t.reason FROM threads t"
            " JOIN runs ON runs.pk = t.run_pk"
        )
    }
    requests = [
        dict(r)
        for r in db.execute("SELECT q.*, runs.run_id FROM requests q JOIN runs ON runs.pk = q.run_pk ORDER BY q.pk")
    ]
    info = detail.collect(ws)
    return Outcome(
        records=records(ws),
        threads=threads,
        requests=requests,
        files=[dict(r) for r in db.execute("SELECT * FROM files ORDER BY pk")],
        anomalies=[dict(r) for r in db.execute("SELECT * FROM anomalies ORDER BY pk")],
        other_batches=[dict(r) for r in db.execute("SELECT * FROM other_batches ORDER BY at")],
        status=info,
        rendered=detail.render(info),
        answered={
            (r["run_id"], r["case_idx"], r["step"]) for r in requests if r["status"] in ("answered", "discarded")
        },
    )


def simulated_batches(state_dir: Path) -> list[dict[str, Any]]:
    """Every Batch object a simulated provider's state folder holds."""
    folder = state_dir / "batches"
    if not folder.is_dir():
        return []
    return [json.loads(p.read_text(encoding="utf-8"))["batch"] for p in sorted(folder.glob("*.json"))]


def simulated_uploads(state_dir: Path) -> list[dict[str, Any]]:
    """Every request file (purpose `batch`) a simulated provider's state folder holds."""
    folder = state_dir / "files"
    if not folder.is_dir():
        return []
    objects = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
    return [f for f in objects if f.get("purpose") == "batch"]


Drive = Callable[[Workspace, Session], Any]


def run_benchmark(
    root: Path,
    faults: str = "",
    *,
    limit: int = LIMIT,
    retries: int = 8,
    drive: Drive | None = None,
    session_factory: Callable[[Workspace], Session] | None = None,
    check: bool = True,
    **options: Any,
) -> Outcome:
    """Prepare `--stage all` for `limit` cases, drive it to the end, check the invariants that hold
    under every fault (unless `check` is false), and return what the workspace holds."""
    with Workspace(root) as ws:
        session = session_factory(ws) if session_factory else open_session(ws, faults, retries=retries, **options)
        try:
            prepare_runs(ws, session, stage=STAGE, limit=limit)
            (drive or finish)(ws, session)
            server = Counter(session._server.stats) if session._server is not None else Counter()
        finally:
            session.close()
        outcome = read_outcome(ws)
    outcome.server = server
    outcome.sim_batches = simulated_batches(root / "state" / "simulated")
    outcome.sim_uploads = simulated_uploads(root / "state" / "simulated")
    if check:
        check_invariants(root, outcome)
    return outcome


def finish_despite(*errors: type[BaseException], seconds: float = FINISH_SECONDS) -> Drive:
    """`finish`, where a round that raises one of `errors` (a lost answer, a stopped command) is
    simply followed by the next one, as a user would run the command again."""

    def drive(ws: Workspace, session: Session) -> int:
        interrupted = 0
        for _ in rounds(seconds):
            try:
                left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            except errors:
                interrupted += 1
                continue
            if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                return interrupted
        raise AssertionError("the workspace did not finish")

    return drive


# --- checks -------------------------------------------------------------------------------------


def why_unusable(line: dict[str, Any], parser: str, n_claims: int) -> str | None:
    """None for a usable answer line; otherwise what is wrong with it (SPEC §6, checked here
    independently of the engine's ingest)."""
    if line.get("error"):
        return "error"
    response = line.get("response")
    if not isinstance(response, dict) or response.get("status_code") != 200:
        return "status"
    choices = (response.get("body") or {}).get("choices") or []
    if not choices:
        return "no choices"
    if choices[0].get("finish_reason") != "stop":
        return "truncated"
    content = (choices[0].get("message") or {}).get("content")
    if not isinstance(content, str) or not content.strip():
        return "empty"
    try:
        answer_of(content, parser, n_claims)
    except judges.MalformedOutput:
        return "malformed"
    return None


def answer_of(content: str, parser: str, n_claims: int) -> tuple[str, Any]:
    text = judges.parse_text(content)
    value = {
        "text": lambda: text,
        "lca_label": lambda: judges.parse_lca_label(content),
        "dcg_decision": lambda: judges.parse_dcg_decision(content),
        "verdicts": lambda: judges.parse_verdicts(content, n_claims),
    }[parser]()
    return text, value


def first_lines(root: Path, outcome: Outcome) -> dict[str, dict[str, Any]]:
    """The first result line of each request in the saved files of its own request file, in the
    order ingest reads them (output file, then error file): the one that decides the request."""
    owner = {r["custom_id"]: r["file_pk"] for r in outcome.requests}
    first: dict[str, dict[str, Any]] = {}
    for f in outcome.files:
        for key in ("output_path", "error_path"):
            if not f[key]:
                continue
            for _, line, _, _ in read_lines(root / f[key]):
                cid = line.get("custom_id") if line else None
                if line is not None and isinstance(cid, str) and owner.get(cid) == f["pk"] and cid not in first:
                    first[cid] = line
    return first


def check_invariants(root: Path, outcome: Outcome) -> None:
    """What holds whatever the fault: nothing garbage scored, one answer per step, no stray batch."""
    assert not [r for r in outcome.requests if r["status"] == "pending"], "requests left pending at the end"
    first = first_lines(root, outcome)
    for r in outcome.requests:
        line = first.get(r["custom_id"])
        if r["status"] in ("answered", "discarded"):
            assert line is not None, f"{r['custom_id']} answered without a result line"
            why = why_unusable(line, r["parser"], r["n_claims"])
            assert why is None, f"{r['custom_id']} was scored from an unusable line ({why}): {json.dumps(line)[:300]}"
            content = line["response"]["body"]["choices"][0]["message"]["content"]
            text, value = answer_of(content, r["parser"], r["n_claims"])
            assert (r["text"], json.loads(r["value"])) == (text, value), f"{r['custom_id']} stored another answer"
        elif line is not None:
            assert why_unusable(line, r["parser"], r["n_claims"]) is not None, (
                f"{r['custom_id']} failed although its line is a usable answer: {json.dumps(line)[:300]}"
            )
    # Per (run, case, step): attempts 1..n, every one but the last failed, at most one answered.
    steps: dict[tuple, list[dict]] = {}
    for r in outcome.requests:
        steps.setdefault((r["run_id"], r["case_idx"], r["step"]), []).append(r)
    for key, attempts in steps.items():
        attempts.sort(key=lambda a: a["attempt"])
        assert [a["attempt"] for a in attempts] == list(range(1, len(attempts) + 1)), key
        assert all(a["status"] == "failed" for a in attempts[:-1]), f"{key}: a non-failed attempt was retried"
        answered = [a for a in attempts if a["status"] in ("answered", "discarded")]
        assert len(answered) <= 1, f"{key} answered {len(answered)} times"
        waves = [a["wave"] for a in attempts]
        assert waves == sorted(set(waves)), f"{key}: two attempts in one wave"
    # The provider holds exactly one batch per submitted batch-backend file, each one recorded;
    # besides it, only batches kept aside: refused for the quota (they ran nothing) or duplicates
    # found and cancelled, none of them ever a file's own batch (whose results are applied).
    aside = {b["batch_id"] for b in outcome.other_batches}
    recorded = {f["batch_id"] for f in outcome.files}
    assert not aside & recorded, "a batch kept aside is a file's own batch"
    if outcome.sim_batches:
        per_file = Counter(
            (b["metadata"] or {}).get("lexpilot_file") for b in outcome.sim_batches if b["id"] not in aside
        )
        doubled = {path: n for path, n in per_file.items() if n > 1}
        assert not doubled, f"the provider holds several batches for one request file: {doubled}"
        stray = [b["id"] for b in outcome.sim_batches if b["id"] not in recorded | aside]
        assert not stray, f"batches the workspace does not know of: {stray}"


def assert_same_as(expected: Outcome, outcome: Outcome) -> None:
    """Every thread done, with the fault-free run's records, from the same answered steps."""
    not_done = {k: v for k, v in outcome.threads.items() if v[0] != "done"}
    assert not not_done, f"threads not done: {not_done}"
    assert outcome.threads.keys() == expected.threads.keys()
    assert outcome.records == expected.records
    assert outcome.answered == expected.answered
    requested = {(r["run_id"], r["case_idx"], r["step"]) for r in outcome.requests}
    assert requested == expected.answered, "a step was requested that the fault-free run never needed"


def retried(outcome: Outcome) -> list[dict[str, Any]]:
    return [r for r in outcome.requests if r["attempt"] > 1]


class SyncProvider:
    """Every role on the `sync` backend, through a simulated provider named by the environment."""

    def __init__(self, state: Path, faults: str, monkeypatch: pytest.MonkeyPatch, **options) -> None:
        self.server = SimulatedServer(state, faults=parse_faults(faults))
        self.server.start()
        monkeypatch.setenv("OPENAI_BASE_URL", self.server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        self.options = options

    def session(self, ws: Workspace) -> Session:
        backends: dict[str, str | None] = {"eval": "sync", "user": "sync", "judge": "sync"}
        return Session(ws, ProviderOptions(backends=backends, retries=8, **self.options))

    def close(self) -> None:
        self.server.stop()


# --- another workspace's answers ----------------------------------------------------------------


def saved_output_lines(root: Path) -> dict[str, list[bytes]]:
    """Every line of a finished workspace's saved output files, by file (`wNNNN/<name>`)."""
    return {
        path.relative_to(root / "responses").as_posix(): read_saved(path).splitlines(keepends=True)
        for path in saved_files(root / "responses", "*.output.jsonl")
    }


def name_of(dest: Path) -> str:
    return f"{dest.parent.name}/{dest.name}"


def reversed_sample(tmp_path: Path) -> Path:
    cases = json.loads(resources.sample_dataset().read_text(encoding="utf-8"))
    path = tmp_path / "reversed.json"
    path.write_text(json.dumps(cases[::-1], ensure_ascii=False), encoding="utf-8")
    return path
