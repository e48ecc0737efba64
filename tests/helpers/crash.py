"""Drivers for crash tests: the CLI and the simulated provider as separate processes, SIGKILLed.

Imported by `scenarios/test_crash.py`; also run as a script, where it is the CLI with one extra trick:
`LEXPILOT_TEST_KILL_AT=POINT:N` makes the process SIGKILL itself at the N-th pass through a named
point (`KILL_POINTS`), so that the narrow windows between "the provider did it" and "the database
recorded it" are hit on purpose rather than by luck. The package has no such hook: it exists only in
the child processes this script runs. `LEXPILOT_TEST_READY_FILE=PATH` makes it create PATH once its
imports are done, so that a parent can time a kill from the start of the command's work.
`LEXPILOT_TEST_ONE_REQUEST_BATCHES=1` lowers every provider's batch minimum to one request, in the
product and in an in-process simulated provider, as `lower_minimums` does in the tests' own
process (AWS Bedrock's 100 records would send a small study's every group through its call).

    python tests/helpers/crash.py poll-and-advance --submit --wait --root WS
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
KILL_ENV = "LEXPILOT_TEST_KILL_AT"
READY_ENV = "LEXPILOT_TEST_READY_FILE"  # created once the CLI's imports are done
ONE_REQUEST_BATCHES_ENV = "LEXPILOT_TEST_ONE_REQUEST_BATCHES"

# name -> (module, attribute path, "before" | "after" the call)
KILL_POINTS: dict[str, tuple[str, str, str]] = {
    # prepare: a run is committed but its threads (or its manifest file) are not written yet
    "prepare.before_threads": ("lexpilot_batch.engine.loop", "add_threads", "before"),
    "prepare.before_manifest": ("lexpilot_batch.study.runs", "write_manifest_file", "before"),
    # compile: the wave's files are renamed into place, the transaction recording them is open
    "compile.before_commit": ("lexpilot_batch.engine.request_files", "WaveWriter.close", "after"),
    # submit: the provider holds the uploaded file / the created batch, the database does not know
    "submit.after_upload": ("lexpilot_batch.providers.openai.batch", "OpenAIBatchBackend.upload", "after"),
    "submit.after_create": ("lexpilot_batch.providers.openai.batch", "OpenAIBatchBackend.create", "after"),
    # poll: a result file is saved but not recorded; a file's results applied but not committed
    "poll.after_download": ("lexpilot_batch.providers.openai.batch", "OpenAIBatchBackend.download", "after"),
    "ingest.before_commit": ("lexpilot_batch.engine.ingest", "apply_result_files", "after"),
    "poll.before_close_waves": ("lexpilot_batch.engine.poll", "close_finished_waves", "before"),
    # compaction: a finished wave's file compressed but not recorded; recorded, the plain one not removed
    "compact.before_record": ("lexpilot_batch.state.compaction", "_record", "before"),
    "compact.before_unlink": ("lexpilot_batch.state.compaction", "_record", "after"),
}
# The same gaps on the native batch APIs' backends (`scenarios/test_crash_native.py`), and a synchronous call
# answered but its line not written (a `--tail-sync` group sent through Messages / generateContent).
NATIVE_KILL_POINTS: dict[str, tuple[str, str, str]] = {
    **{
        f"{api}.after_{step}": (f"lexpilot_batch.providers.{api}.batch", f"{cls}.{step}", "after")
        for api, cls in (("anthropic", "AnthropicBatchBackend"), ("google", "GoogleBatchBackend"))
        for step in ("upload", "create", "download")
    },
    **{
        f"{api}.after_call": (f"lexpilot_batch.providers.{api}.chat", f"{cls}.asend", "after")
        for api, cls in (("anthropic", "AnthropicChat"), ("google", "GeminiChat"))
    },
}


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install_kill_point(spec: str) -> None:
    """Wrap the named function so that its N-th call in this process ends in SIGKILL."""
    point, _, nth_text = spec.partition(":")
    module_name, attr_path, when = {**KILL_POINTS, **NATIVE_KILL_POINTS}[point]
    nth = int(nth_text or "1")
    owner: Any = importlib.import_module(module_name)
    *parents, name = attr_path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    original = getattr(owner, name)
    calls = 0
    lock = threading.Lock()  # a synchronous call runs in several threads at once

    def number() -> int:
        nonlocal calls
        with lock:
            calls += 1
            return calls  # this call's number, whatever the others do meanwhile

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mine = number()
        if mine == nth and when == "before":
            _die()
        result = original(*args, **kwargs)
        if mine == nth and when == "after":
            _die()
        return result

    async def async_wrapper(*args: Any, **kwargs: Any) -> Any:  # a call awaited on the sync runner's loop
        mine = number()
        if mine == nth and when == "before":
            _die()
        result = await original(*args, **kwargs)
        if mine == nth and when == "after":
            _die()
        return result

    setattr(owner, name, async_wrapper if inspect.iscoroutinefunction(original) else wrapper)


# --- processes ----------------------------------------------------------------------------------


def base_env(**extra: str) -> dict[str, str]:
    """The parent's environment without any LEXPILOT_/OPENAI_ setting that could leak into a run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEXPILOT_", "OPENAI_"))}
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra)
    return env


class SimServer:
    """`python -m lexpilot_batch.simulated` in its own process; `url` is its first stdout line."""

    def __init__(self, state_dir: Path, seed: int, faults: str, log: Path, port: int = 0) -> None:
        self.state_dir = state_dir
        self._log = open(log, "ab")  # noqa: SIM115 - closed when the process stops
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lexpilot_batch.simulated",
                "--state-dir",
                str(state_dir),
                "--port",
                str(port),
                "--seed",
                str(seed),
                "--faults",
                faults,
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=base_env(),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode("utf-8").strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"simulated provider did not print its URL (got {line!r}); see {log}")
        self.url = line

    @property
    def port(self) -> int:
        return int(self.url.rstrip("/").rsplit(":", 1)[1].split("/")[0])

    def kill(self) -> None:
        """SIGKILL the provider, as a crash of its host would."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()

    def __enter__(self) -> SimServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def can_send_sigint(platform: str = sys.platform) -> bool:
    """Whether `Popen.send_signal(SIGINT)` presses Ctrl-C in a child: not on Windows, where it
    raises ValueError (only CTRL_C_EVENT and CTRL_BREAK_EVENT, to a process group, are sent;
    https://docs.python.org/3/library/subprocess.html#subprocess.Popen.send_signal)."""
    return platform != "win32" and hasattr(signal, "SIGINT")


def skip_without_sigint(platform: str = sys.platform) -> None:
    if not can_send_sigint(platform):
        import pytest

        pytest.skip("this platform cannot send SIGINT to a child process (Popen.send_signal)")


@dataclass
class Client:
    """How to run CLI commands on one workspace, with a log of everything they print."""

    root: Path
    env: dict[str, str]
    extra: list[str] = field(default_factory=list)  # e.g. --provider simulated --sim-seed ...
    log_path: Path | None = None

    def argv(self, *args: str, kill_at: str | None = None) -> tuple[list[str], dict[str, str]]:
        env = dict(self.env)
        if kill_at:
            env[KILL_ENV] = kill_at
        extra = self.extra if args[0] in ("prepare", "submit", "poll-and-advance", "run") else []
        # The script form is the CLI itself, plus the optional kill point.
        return [sys.executable, str(HERE), *args, "--root", str(self.root), *extra], env

    def _log(self):
        return open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL

    def run(self, *args: str, timeout: float = 60.0) -> None:
        """Run a command to its end; it must succeed."""
        argv, env = self.argv(*args)
        done = subprocess.run(argv, env=env, capture_output=True, timeout=timeout, check=False)
        if self.log_path:
            with open(self.log_path, "ab") as log:
                log.write(b"$ " + " ".join(args).encode() + b"\n" + done.stdout + done.stderr)
        if done.returncode != 0:
            raise AssertionError(
                f"`{' '.join(args)}` exited {done.returncode}:\n{done.stderr.decode('utf-8', 'replace')[-3000:]}"
            )

    def start(self, *args: str, kill_at: str | None = None, ready: Path | None = None) -> subprocess.Popen:
        argv, env = self.argv(*args, kill_at=kill_at)
        if ready is not None:
            env[READY_ENV] = str(ready)
        log = self._log()
        try:
            return subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        finally:
            if log is not subprocess.DEVNULL:
                log.close()

    def start_ready(self, *args: str) -> subprocess.Popen:
        """Start a command and return once its imports are done (or it ended): delays then count
        from the start of its work."""
        ready = self.root.parent / f".{self.root.name}.ready"
        ready.unlink(missing_ok=True)
        proc = self.start(*args, ready=ready)
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        return proc

    def kill_after(self, delay: float, *args: str) -> bool:
        """Start a command and SIGKILL it `delay` seconds into its work (after the imports, which
        take most of a second and touch nothing); False if it ended by itself first."""
        proc = self.start_ready(*args)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return True
        if proc.returncode != 0:
            raise AssertionError(f"`{' '.join(args)}` exited {proc.returncode} before it was killed")
        return False

    def interrupt_after(self, delay: float, *args: str) -> int | None:
        """Start a command and press Ctrl-C (SIGINT) `delay` seconds into its work; its exit code,
        or None if it ended by itself first (successfully). Skipped where SIGINT cannot be sent."""
        skip_without_sigint()
        proc = self.start_ready(*args)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            return proc.wait(timeout=60)
        if proc.returncode != 0:
            raise AssertionError(f"`{' '.join(args)}` exited {proc.returncode} before it was interrupted")
        return None

    def kill_at(self, point: str, *args: str, timeout: float = 60.0) -> bool:
        """Run a command that kills itself at `point` (`name:N`); False if it never got there."""
        proc = self.start(*args, kill_at=point)
        proc.wait(timeout=timeout)
        if proc.returncode == -signal.SIGKILL:
            return True
        if proc.returncode != 0:
            raise AssertionError(f"`{' '.join(args)}` with {KILL_ENV}={point} exited {proc.returncode}")
        return False


def lower_minimums(monkeypatch: Any) -> None:
    """A batch of one request is taken everywhere: the scenarios' studies are a case or two, and
    below a provider's minimum (AWS Bedrock's 100 records, an adjustable quota) every group would
    go through its synchronous call, leaving its batches untested. The product's minimum and the
    simulated provider's own (a module's `MIN_RECORDS`) are lowered alike; tests/providers/bedrock/
    checks the real one. `monkeypatch`: pytest's, in the tests' process or in a child this script is."""
    import dataclasses

    from lexpilot_batch.providers import registry
    from lexpilot_batch.simulated import apis as simulated_apis

    for name, limits in list(registry.PROFILES.items()):
        if limits.min_requests > 1:
            monkeypatch.setitem(registry.PROFILES, name, dataclasses.replace(limits, min_requests=1))
    for api in simulated_apis.APIS:
        module = sys.modules[api.handlers.__module__]
        if hasattr(module, "MIN_RECORDS"):
            monkeypatch.setattr(module, "MIN_RECORDS", 1)


# --- reading a workspace and a provider's state folder --------------------------------------------


def open_db(root: Path) -> sqlite3.Connection | None:
    path = root / "state" / "lexpilot.sqlite3"
    if not path.exists():
        return None
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    return db


def server_objects(state_dir: Path) -> tuple[set[str], set[str]]:
    """(uploaded OpenAI batch-input file ids, batch ids) persisted by a simulated provider."""
    files, batches = set(), set()
    for path in (state_dir / "files").glob("*.json"):
        if path.with_suffix(".data").exists() and json.loads(path.read_text("utf-8"))["purpose"] == "batch":
            files.add(path.stem)
    for path in (state_dir / "batches").glob("*.json"):
        # A batch of the native routes goes by the id its API gives it.
        api = json.loads(path.read_text("utf-8"))["sim"].get("native", {}).get("api")
        stem = path.stem.removeprefix("batch_")
        batches.add({"anthropic": f"msgbatch_{stem}", "gemini": f"batches/{stem}"}.get(api, path.stem))
    return files, batches


def kill_phase(root: Path, server_state: Path, before: str | None) -> tuple[str, str, int]:
    """Where a killed command stood, read from what it left behind; the state's fingerprint; and
    how many uploads the provider holds that no file records (harmless: they never became batches).

    The phase names the latest wave's file statuses ("w3 compiled=1 submitted=2"), plus what only
    the leftovers show: a provider object the database does not know of yet (upload or batch
    creation not recorded), a half-compiled wave's files, a result file half saved.
    """
    db = open_db(root)
    if db is None:
        return "startup (no database yet)", "", 0
    try:
        files = [dict(r) for r in db.execute("SELECT * FROM files ORDER BY pk")]
        waves = db.execute("SELECT COUNT(*), MAX(n) FROM waves").fetchone()
        requests = db.execute("SELECT status, COUNT(*) FROM requests GROUP BY status").fetchall()
        threads = db.execute("SELECT status, COUNT(*) FROM threads GROUP BY status").fetchall()
        runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError as exc:  # killed while creating the schema
        db.close()
        return f"startup ({exc})", "", 0
    db.close()
    fingerprint = json.dumps(
        [
            [(f["pk"], f["status"], f["batch_status"]) for f in files],
            list(waves),
            [tuple(r) for r in requests],
            [tuple(r) for r in threads],
            runs,
        ]
    )
    uploaded, created = server_objects(server_state)
    unrecorded_uploads = uploaded - {f["provider_file_id"] for f in files}
    unrecorded_batches = created - {f["batch_id"] for f in files}
    extras = []
    if unrecorded_batches:
        extras.append(f"+{len(unrecorded_batches)} batch not recorded")
    building = list((root / "requests").rglob(".building-*"))
    if building:
        extras.append("+half-compiled files")
    if list((root / "responses").rglob(".*.tmp")):
        extras.append("+half-saved result")
    latest = waves[1]
    statuses = Counter(f["status"] for f in files if f["wave"] == latest)
    if not runs:
        phase = "prepare (no run yet)"
    elif latest is None:
        phase = f"prepare ({sum(n for _, n in threads)} threads, no wave)"
    else:
        phase = f"w{latest} " + " ".join(f"{s}={n}" for s, n in sorted(statuses.items()))
    if fingerprint == before and not extras:
        phase += " (no change)"
    return " ".join([phase, *extras]), fingerprint, len(unrecorded_uploads)


# --- the final state, for comparing a killed run with an uninterrupted one -----------------------


def final_state(root: Path) -> dict[str, Any]:
    """Threads (status, record) and requests (what was asked and how it ended), keyed stably."""
    db = open_db(root)
    assert db is not None, f"no workspace database under {root}"
    try:
        threads = {
            (r["run_id"], r["model"], r["task"], r["case_idx"], r["variant"]): (
                r["status"],
                json.loads(r["record"]) if r["record"] else None,
                strip_batch_ids(r["reason"]),
            )
            for r in db.execute(
                "SELECT runs.run_id, runs.model, t.task, t.case_idx, t.variant, t.status, t.record, t.reason"
                " FROM threads t JOIN runs ON runs.pk = t.run_pk"
            )
        }
        from tests.helpers.engine import request_key  # the workspaces compared have tags of their own

        requests = {
            request_key(r["custom_id"]): (
                r["wave"],
                r["step"],
                r["attempt"],
                r["role"],
                r["status"],
                r["error_kind"],
                r["value"],
            )
            for r in db.execute("SELECT * FROM requests")
        }
    finally:
        db.close()
    return {"threads": threads, "requests": requests}


def strip_batch_ids(reason: str | None) -> str | None:
    """Failure reasons name the provider's batch id, which differs between two providers."""
    if reason is None:
        return None
    return re.sub(r"batch_[0-9a-f]+", "batch_*", reason)


# --- where a kill landed, and what must hold after any sequence of kills -------------------------


class KillLog:
    """Where each kill landed, from what the killed process left behind."""

    def __init__(self, root: Path, server_state: Path) -> None:
        self.root, self.server_state = root, server_state
        self.fingerprint: str | None = None
        self.orphans = 0
        self.phases: list[str] = []

    def before(self) -> None:
        _, self.fingerprint, self.orphans = kill_phase(self.root, self.server_state, None)

    def landed(self, how: str) -> None:
        phase, self.fingerprint, orphans = kill_phase(self.root, self.server_state, self.fingerprint)
        if orphans > self.orphans:
            phase += " +upload not recorded"
        self.orphans = orphans
        self.phases.append(f"{how}: {phase}")

    def summary(self, title: str) -> str:
        counts = Counter(p.split(": ", 1)[1] for p in self.phases)
        lines = [f"{title}: {len(self.phases)} kills"] + [f"  {p}" for p in self.phases]
        lines.append("  by state: " + "; ".join(f"{k} ×{n}" for k, n in sorted(counts.items())))
        return "\n".join(lines)


def check_same_as_reference(root: Path, reference: dict) -> None:
    state = final_state(root)
    assert set(state["threads"]) == set(reference["threads"])
    differing = [k for k in reference["threads"] if state["threads"][k] != reference["threads"][k]]
    assert not differing, f"{len(differing)} thread(s) differ from the uninterrupted run, e.g. {differing[:3]}"
    missing = sorted(set(reference["requests"]) - set(state["requests"]))
    extra = sorted(set(state["requests"]) - set(reference["requests"]))
    assert not missing and not extra, f"requests lost: {missing[:5]}; requests added: {extra[:5]}"
    changed = [c for c in reference["requests"] if state["requests"][c] != reference["requests"][c]]
    assert not changed, [(c, reference["requests"][c], state["requests"][c]) for c in changed[:3]]


def check_nothing_in_flight(client: Client) -> None:
    argv, env = client.argv("status", "--format", "json")
    out = subprocess.run(argv, env=env, capture_output=True, check=True, timeout=60).stdout
    status = json.loads(out)
    in_flight = {(r["run_id"], t): c["in_flight"] for r in status["runs"] for t, c in r["tasks"].items()}
    assert sum(in_flight.values()) == 0, in_flight
    assert status["open_files"] == []
    assert sum(c["pending"] for c in status["requests"].values()) == 0, status["requests"]


def check_compacted(root: Path) -> None:
    """Every file of the finished workspace is compacted once, holding the bytes recorded, with no
    plain copy or half-written one left beside it."""
    from lexpilot_batch.state.compaction import verify
    from lexpilot_batch.state.workspace import Workspace

    with Workspace(root, writable=False) as ws:
        assert verify(ws) == []
        compacted = {r[0] for r in ws.store.conn.execute("SELECT path FROM compacted")}
        kept = set()
        for r in ws.store.conn.execute("SELECT path, output_path, error_path FROM files"):
            kept |= {rel for rel in r if rel}
    assert compacted == kept
    leftovers = [p for p in root.rglob("*.jsonl") if p.parent.parent.name in ("requests", "responses")]
    assert not leftovers, f"plain copies of compacted files left: {leftovers[:3]}"
    assert not list(root.rglob(".*.gz.*.tmp")), "half-written compressed files left"


if __name__ == "__main__":
    spec = os.environ.get(KILL_ENV)
    if spec:
        install_kill_point(spec)
    # What the CLI imports lazily, imported up front, so that "ready" means "about to work".
    import openai  # noqa: F401
    import tqdm  # noqa: F401

    import lexpilot_batch.engine.loop  # noqa: F401
    from lexpilot_batch.cli import main

    if os.environ.get(ONE_REQUEST_BATCHES_ENV):
        import pytest

        lower_minimums(pytest.MonkeyPatch())

    if os.environ.get(READY_ENV):
        Path(os.environ[READY_ENV]).touch()

    sys.argv[0] = "lexpilot-batch"
    main()
