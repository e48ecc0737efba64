"""Benchmark of the wave engine: waves to finish, local overhead per request, peak memory.

    python bench/run_bench.py --scale N [--speculate] [--runs 5] [--root DIR] [--keep]

Generates a synthetic dataset of N x 432 cases in the real schema (`synthetic`), runs every task of
every run (`stage="all"`) through the simulated provider to completion, and prints ONE JSON line
with the time spent in each part of the engine, the waves it took, peak RSS and the workspace size;
with `--batch-latency`, the time to result under the simulated provider's latency model
(`latency_model`); with `--check-export`, the workspace against an uncompressed copy
(`export_check`). Progress goes to stderr. See bench/README.md for what every number means.

By default the simulated provider runs as a separate process (`python -m lexpilot_batch.simulated`)
reached over loopback HTTP with `--provider env`, so that its memory and CPU are not counted as the
product's; `--simulator in-process` uses `ProviderOptions(provider="simulated")` instead. The
report is built in a child process as well, the way `lexpilot-batch report` runs on a finished
workspace, so its peak memory is measured on its own.

This is a benchmark, not a test: it wraps engine functions from the outside to time them and never
changes what they do.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from draws import check_draws_args, time_to_result_draws
from export_check import check_export
from floor import FloorAlongside, serialisation_floor
from latency_model import (
    DEFAULT_PRICE,
    check_latency_args,
    expected_latency,
    poll_pause,
    simulator_faults,
    sleeps_latency,
    time_to_result,
)
from synthetic import generate_dataset

try:  # POSIX only; on Windows peak RSS is reported as null
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

BENCHMARK_CASES = 432  # the real LexPilot release
MB = 1024 * 1024
TIMED = ("compile", "submit", "ingest", "advance", "report")
MAX_ROUNDS = 100_000  # poll rounds before the bench gives up (a latency and a quota make many)


# --- memory --------------------------------------------------------------------------------------


def peak_rss_mb() -> float | None:
    """Peak resident set size of this process so far, in MB (None where getrusage is missing)."""
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KB, macOS bytes.
    return round(peak / MB if sys.platform == "darwin" else peak / 1024, 1)


def own_peak_rss_mb() -> float | None:
    """Peak RSS of this process's own memory: VmHWM where /proc has it, else `peak_rss_mb()`.

    A child started by `subprocess` inherits its parent's ru_maxrss across exec on Linux, so
    children report VmHWM, which belongs to their own address space.
    """
    return process_peak_rss_mb(os.getpid()) or peak_rss_mb()


def current_rss_mb() -> float | None:
    try:
        with open("/proc/self/statm") as fh:
            return round(int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB, 1)
    except (OSError, ValueError, AttributeError):
        return None


def process_peak_rss_mb(pid: int) -> float | None:
    """VmHWM of another live process (Linux only)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def tree_size(root: Path, exclude: Path | None = None) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if exclude is not None and Path(dirpath) == exclude.parent and exclude.name in dirnames:
            dirnames.remove(exclude.name)
        for name in filenames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


# --- timing wrappers -----------------------------------------------------------------------------


class Meter:
    """Accumulates wall time per key and notes which key raised this process's peak RSS."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)  # this process's CPU time: steadier on a busy machine
        self.calls: dict[str, int] = defaultdict(int)
        self.peak_raised_by: dict[str, float] = defaultdict(float)
        self._peak = peak_rss_mb() or 0.0
        self.workspace_peak = 0  # bytes

    def note_peak(self, key: str) -> None:
        peak = peak_rss_mb()
        if peak is not None and peak > self._peak:
            self.peak_raised_by[key] += peak - self._peak
            self._peak = peak

    def wrap(self, fn: Callable, key: str) -> Callable:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - start
                self.cpu[key] += time.process_time() - cpu
                self.calls[key] += 1
                self.note_peak(key)

        return timed

    def wrap_fast(self, fn: Callable, key: str) -> Callable:
        """For functions called once per thread or request: no RSS check, and only the wall clock.
        A CPU clock is a system call (about a microsecond on a virtual machine), and these run
        100,000 times a 1x run: reading it here added what it measured to the compile's time."""
        seconds, calls = self.seconds, self.calls
        clock = time.perf_counter

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[key] += clock() - start
                calls[key] += 1

        return timed


def instrument(meter: Meter) -> None:
    """Wrap the engine's functions where the engine calls them (module globals), timing each part."""
    from lexpilot_batch.benchmark.protocols import PROTOCOLS
    from lexpilot_batch.engine import compiler, downloads, poll
    from lexpilot_batch.engine import loop as engine

    engine.open_dataset = meter.wrap(engine.open_dataset, "prepare.load_dataset")
    engine.register_run = meter.wrap(engine.register_run, "prepare.register_run")
    engine.add_threads = meter.wrap(engine.add_threads, "prepare.add_threads")
    engine.compile_wave = meter.wrap(engine.compile_wave, "compile_wave")
    engine.check_compiled_files = meter.wrap(engine.check_compiled_files, "submit.verify")
    engine.submit_files = meter.wrap(engine.submit_files, "submit.upload_create")
    engine.poll_files = meter.wrap(engine.poll_files, "poll_files")
    from lexpilot_batch.state.compaction import Compactor

    start_compacting = Compactor.run

    def measured_compact(self: Compactor) -> Any:
        # The workspace is largest just before a finished wave's files are compressed: the next
        # wave's are written by then.
        root = self.ws.root
        meter.workspace_peak = max(meter.workspace_peak, tree_size(root, exclude=self.ws.state_dir / "simulated"))
        return start_compacting(self)

    # What compaction costs the critical path: waiting for the worker, recording what it packed and
    # handing it the next files (`compact`); its own time on its thread is `compact_worker`.
    Compactor.run = meter.wrap(measured_compact, "compact")  # type: ignore[method-assign]
    Compactor.finish = meter.wrap(Compactor.finish, "compact")  # type: ignore[method-assign]
    Compactor._pack_all = meter.wrap(Compactor._pack_all, "compact_worker")  # type: ignore[method-assign]
    # The provider's own work, which the engine waits for at zero latency and which a real provider
    # does within its latency: the simulated provider answers a batch when it is created, and a
    # chat completion when it is called. Left out of the local time of `time_to_result`.
    from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
    from lexpilot_batch.providers.sync.runner import SyncRunner

    OpenAIBatchBackend.create = meter.wrap(OpenAIBatchBackend.create, "provider.create")  # type: ignore[method-assign]
    OpenAIBatchBackend.retrieve = meter.wrap(OpenAIBatchBackend.retrieve, "provider.retrieve")  # type: ignore[method-assign]
    SyncRunner.run = meter.wrap(SyncRunner.run, "provider.sync")  # type: ignore[method-assign]
    # A batch's results: saved, then checked and applied (`downloads.collect`); a sync file's applied.
    downloads.download = meter.wrap(downloads.download, "ingest.download")
    downloads.ingest_file = meter.wrap(downloads.ingest_file, "ingest.apply")
    poll.ingest_file = meter.wrap(poll.ingest_file, "ingest.apply")
    compiler._request = meter.wrap_fast(compiler._request, "compile.request_lines")
    compiler._flush = meter.wrap(compiler._flush, "compile.insert_requests")
    for protocol in PROTOCOLS.values():
        # An instance attribute shadows the method: `PROTOCOLS[task].advance(...)` calls this.
        protocol.advance = meter.wrap_fast(protocol.advance, "advance")  # type: ignore[method-assign]


# --- the simulated provider in its own process ---------------------------------------------------


class SimulatorProcess:
    """`python -m lexpilot_batch.simulated` on a free loopback port; its first stdout line is the URL."""

    def __init__(self, state_dir: Path, log_path: Path, faults: str = "none") -> None:
        self.log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lexpilot_batch.simulated",
                "--state-dir",
                str(state_dir),
                "--port",
                "0",
                "--faults",
                faults,
            ],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.stop()
            raise RuntimeError(f"the simulated provider did not start; see {log_path}")
        self.peak_rss_mb: float | None = None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.peak_rss_mb = process_peak_rss_mb(self.proc.pid)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


# --- child processes: validation and the report --------------------------------------------------


def child_validate(dataset: Path) -> dict[str, Any]:
    from lexpilot_batch.data import load_dataset

    start = time.perf_counter()
    ds = load_dataset(dataset)
    return {"cases": len(ds), "seconds": round(time.perf_counter() - start, 3), "peak_rss_mb": own_peak_rss_mb()}


def bench_models(k: int) -> list[str]:
    """The evaluated models the bench prepares: bench-eval, then bench-eval-2 ... bench-eval-k."""
    return ["bench-eval", *(f"bench-eval-{i}" for i in range(2, k + 1))]


def child_report(root: Path, profile: str | None = None, html: bool = False) -> dict[str, Any]:
    """Build and render the report of a finished workspace exactly as `lexpilot-batch report` does.

    Calls the CLI's own report function (output captured), with its three parts timed. With `html`,
    then renders `--format html` the same way into `<root>/report.html` (`child_html`).
    """
    import contextlib
    import io

    from lexpilot_batch.cli.reading import print_report
    from lexpilot_batch.report import produce, results

    meter = Meter()
    built: list[dict] = []

    def keep(fn: Callable) -> Callable:
        def kept(*args: Any, **kwargs: Any) -> Any:
            built.append(fn(*args, **kwargs))
            return built[-1]

        return kept

    results.load_run_results = meter.wrap(results.load_run_results, "load_run_results")
    # `report/produce.py` is what `report` runs: its own names are the ones to time.
    produce.build_report = meter.wrap(keep(produce.build_report), "build_report")
    produce.render = meter.wrap(produce.render, "render")
    out = io.StringIO()
    profiler = _start_profiler(profile)
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        print_report(root, produce.ReportOptions(format="table"))
    total = time.perf_counter() - start
    _stop_profiler(profiler, profile)
    return {
        "seconds": round(total, 4),
        "parts": {k: round(v, 4) for k, v in meter.seconds.items()},
        "chars": len(out.getvalue()),
        # Same digest = same metrics and usage: a patched engine must agree with the unpatched one
        # on every number (the code hash shown in the report's settings may differ).
        "digest": _metrics_digest(built[-1]) if built else None,
        # Metrics only: also equal between a run with --speculate and one without.
        "metrics_digest": _metrics_digest(built[-1], usage=False) if built else None,
        "peak_rss_mb": own_peak_rss_mb(),
        "html": child_html(root) if html else None,
    }


def child_html(root: Path) -> dict[str, Any]:
    """`lexpilot-batch report --format html` of the workspace into `<root>/report.html`: seconds, size,
    and, where a Chromium is found, the milliseconds from navigation to the first case on screen
    (the page's `data-ready-ms`), median of three loads."""
    import contextlib
    import io
    import re

    from lexpilot_batch.cli.reading import print_report
    from lexpilot_batch.report.produce import ReportOptions

    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        print_report(root, ReportOptions(format="html"))
    seconds = time.perf_counter() - start
    page = root / "report.html"
    page.write_text(out.getvalue(), encoding="utf-8")
    result: dict[str, Any] = {"seconds": round(seconds, 3), "mb": round(page.stat().st_size / MB, 2), "ready_ms": None}
    browser = next(
        (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None
    )
    if browser is not None:
        times = []
        for _ in range(3):
            with tempfile.TemporaryDirectory() as profile_dir:
                done = subprocess.run(
                    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     f"--user-data-dir={profile_dir}", "--dump-dom", page.as_uri()],
                    capture_output=True, text=True, encoding="utf-8", timeout=300,
                )  # fmt: skip
            found = re.search(r'data-ready-ms="(\d+)"', done.stdout)
            if found:
                times.append(int(found.group(1)))
        result["ready_ms"] = sorted(times)[len(times) // 2] if times else None
    return result


def _metrics_digest(built: dict, usage: bool = True) -> str:
    numbers = [
        {"runs": g["runs"], "tasks": g["tasks"], **({"usage": g["usage"]} if usage else {})} for g in built["groups"]
    ]
    blob = json.dumps(numbers, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class _Child:
    """This script in a child process (`--child-...`); `result()` waits for its JSON line."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def result(self) -> dict[str, Any]:
        if not hasattr(self, "_result"):
            out, err = self.proc.communicate()
            if self.proc.returncode != 0:
                raise RuntimeError(f"child {' '.join(self.args)} failed:\n{err[-4000:]}")
            self._result = json.loads(out.strip().splitlines()[-1])
        return self._result


def _run_child(args: list[str]) -> dict[str, Any]:
    return _Child(args).result()


# --- profiling -----------------------------------------------------------------------------------


def _start_profiler(path: str | None):
    if not path:
        return None
    from pyinstrument import Profiler  # pip install pyinstrument (a bench-only tool)

    # 1 ms samples; a long (20x) run is sampled every 10 ms to keep the profile itself small.
    profiler = Profiler(interval=float(os.environ.get("BENCH_PROFILE_INTERVAL", "0.001")))
    profiler.start()
    return profiler


def _stop_profiler(profiler, path: str | None) -> None:
    if profiler is None or not path:
        return
    profiler.stop()
    target = Path(path)
    if target.suffix == ".html":
        target.write_text(profiler.output_html(), encoding="utf-8")
    else:
        target.write_text(profiler.output_text(unicode=True, color=False, show_all=False), encoding="utf-8")


# --- the benchmark -------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _clean_provider_env() -> None:
    for key in list(os.environ):
        if key.startswith("LEXPILOT_") and key.endswith(("_BASE_URL", "_API_KEY", "_BACKEND", "_PROFILE")):
            del os.environ[key]
    os.environ.pop("LEXPILOT_SIM_FAULTS", None)


def run(args: argparse.Namespace) -> dict[str, Any]:
    created_root = args.root is None
    root = Path(args.root or tempfile.mkdtemp(prefix="lexpilot-bench-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    ws_root, sim_dir = root / "workspace", root / "simulator"
    if ws_root.exists() and any(ws_root.iterdir()):
        raise SystemExit(f"{ws_root} is not empty; pass another --root (the bench needs a fresh workspace)")
    n_cases = args.scale * BENCHMARK_CASES
    dataset = Path(args.dataset).resolve() if args.dataset else root / f"dataset-x{args.scale}-s{args.seed}.json"
    made = []
    validation: _Child | None = None
    try:
        if not dataset.exists():
            start = time.perf_counter()
            generate_dataset(dataset, n_cases, args.seed)
            made.append(dataset)
            log(
                f"generated {n_cases} cases, {dataset.stat().st_size / MB:.1f} MB, in "
                f"{time.perf_counter() - start:.1f} s: {dataset}"
            )
        # Validated with load_dataset in a child process, alongside the run (prepare validates the
        # same file again and stops on the same errors), so that it costs neither memory in the
        # measured process nor time on the 1x run's one-minute budget.
        validation = _Child(["--child-validate", str(dataset)])
        if args.compare:
            return _compare(args, dataset, root, validation, made)
        made.append(ws_root)
        if args.simulator == "process":
            made.append(sim_dir)
        result = _bench(args, dataset, ws_root, sim_dir, root, validation)
        if result["cases"] != n_cases and not args.dataset:
            raise SystemExit(f"{dataset} has {result['cases']} cases, expected {n_cases}")
        result["dataset_mb"] = round(dataset.stat().st_size / MB, 1)
        return result
    finally:
        if validation is not None and validation.proc.poll() is None:
            validation.proc.kill()
            validation.proc.communicate()
        if not args.keep:
            for path in made:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                elif path.exists() and not args.dataset:
                    path.unlink()
            for stray in root.glob("simulator*.log"):
                stray.unlink(missing_ok=True)
            if created_root:
                shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"kept {root}")


# The configurations of `--compare`: (name, options over the ones given; "tail_sync" None: the one given).
COMPARED: tuple[tuple[str, dict[str, Any]], ...] = (
    ("no speculation", {"speculate": False, "tail_sync": 0}),
    ("speculation", {"speculate": True, "tail_sync": 0}),
    ("speculation + tail-sync", {"speculate": True, "tail_sync": None}),
    ("speculation + auto", {"speculate": True, "tail_sync": 0, "tail": "auto", "max_premium": 0.0, "no_flex": False}),
    (
        "speculation + auto, no flex, premium 10",
        {"speculate": True, "tail_sync": 0, "tail": "auto", "max_premium": 10.0, "no_flex": True},
    ),
)


def _compare(
    args: argparse.Namespace, dataset: Path, root: Path, validation: _Child, made: list[Path]
) -> dict[str, Any]:
    """The same dataset run in each configuration of `COMPARED`, each in a workspace of its own."""
    results = []
    for name, given in COMPARED:
        if args.compare_only and name not in args.compare_only:
            continue
        chosen = {**given, "tail_sync": args.tail_sync if given["tail_sync"] is None else given["tail_sync"]}
        # The cached-input accounting once, on the first row: the others differ from it only by
        # speculation's extra User Model replies and by routes, which change no request line.
        once = {"no_cache_share": args.no_cache_share or bool(results)}
        config = argparse.Namespace(**{**vars(args), **chosen, **once})
        slug = name.replace(" + ", "-").replace(" ", "-")
        ws_root, sim_dir = root / f"workspace-{slug}", root / f"simulator-{slug}"
        if ws_root.exists() and any(ws_root.iterdir()):
            raise SystemExit(f"{ws_root} is not empty; pass another --root (the bench needs a fresh workspace)")
        made.extend([ws_root, sim_dir])
        log(f"--- {name} ({chosen}) ---")
        results.append((name, _bench(config, dataset, ws_root, sim_dir, root, validation)))
    rows = []
    for name, r in results:
        t = r["time_to_result"]
        rows.append(
            {
                "config": name,
                "tail_sync": r["tail_sync"],
                "waves": r["waves"],
                "batch_round_trips": t["batch_round_trips"],
                "sync_requests": t["sync_requests"],
                "flex_requests": t["flex_requests"],
                "requests": r["requests"],
                "simulated_seconds": t["simulated_seconds"],
                "provider_seconds": t["provider_seconds"],
                "cost_usd": t["cost_usd"],
                "premium_pct": t["premium_pct"],
                "local_us_per_request": r["local_us_per_request"],
                "peak_rss_mb": r["peak_rss_mb"],
                "workspace_mb": r["workspace_mb"],
                "metrics_digest": r["metrics_digest"],
            }
        )
    log(
        "config                                   waves  batch trips  sync req.  flex req.  time to result   cost USD  premium"
    )
    for row in rows:
        log(
            f"{row['config']:<40} {row['waves']:>5} {row['batch_round_trips']:>12} {row['sync_requests']:>10} "
            f"{row['flex_requests']:>10} "
            f"{row['simulated_seconds']:>12.0f} s {row['cost_usd']:>10.2f} {row['premium_pct']:>7}%"
        )
    return {
        "compare": rows,
        "same_metrics": len({row["metrics_digest"] for row in rows}) == 1,
        "cache": results[0][1]["cache"] if results else None,
        "runs": [r for _, r in results],
    }


def _bench(
    args: argparse.Namespace, dataset: Path, ws_root: Path, sim_dir: Path, root: Path, validation: _Child
) -> dict[str, Any]:
    from lexpilot_batch.benchmark.settings import Settings
    from lexpilot_batch.engine.budgets import parse_flags
    from lexpilot_batch.engine.budgets import usage_by_model as budget_usage
    from lexpilot_batch.engine.loop import poll_and_advance, prepare
    from lexpilot_batch.engine.session import ProviderOptions, Session
    from lexpilot_batch.state.workspace import Workspace
    from lexpilot_batch.study.runs import RunSpec

    budgets = parse_flags(args.max_enqueued_tokens)
    meter = Meter()
    instrument(meter)
    _clean_provider_env()
    simulator = None
    faults = simulator_faults(args)
    engine_options = {
        "retries": 3,
        "tail_sync": args.tail_sync,
        "concurrency": args.concurrency,
        "max_enqueued_tokens": budgets,
        # `--tail auto` is told the latency model's numbers, as a workspace that measured its batches
        # would know them (`bench/latency_model.py`). The bench's models are bare names at the
        # simulated provider, which speaks flex: `--flex '*=on'` says so (an OpenAI-compatible
        # endpoint's models are never assumed to, `providers.flex`); `--no-flex`: as if none did.
        "tail": args.tail,
        "max_premium": args.max_premium,
        "flex": {"*": not args.no_flex},
        "expect_latency": expected_latency(args),
    }
    if args.simulator == "process":
        simulator = SimulatorProcess(sim_dir, root / f"{sim_dir.name}.log", faults)
        os.environ["OPENAI_BASE_URL"] = simulator.base_url
        os.environ["OPENAI_API_KEY"] = "bench-not-a-secret"
        options = ProviderOptions(provider="env", **engine_options)
        log(f"simulated provider (own process, pid {simulator.proc.pid}) at {simulator.base_url}")
    else:
        options = ProviderOptions(provider="simulated", sim_faults=faults, **engine_options)
    run_ids = [f"bench{i + 1}" for i in range(args.runs)]
    profiler = _start_profiler(args.profile)
    wave_log: list[dict[str, Any]] = []
    alongside = FloorAlongside(ws_root)
    floor_seconds = 0.0  # timing the floor beside the waves: not the engine's

    def time_floor() -> None:
        nonlocal floor_seconds
        mark = time.perf_counter()
        alongside.sample()
        floor_seconds += time.perf_counter() - mark

    try:
        started = time.perf_counter()
        with Workspace(ws_root) as ws:
            session = Session(ws, options)
            try:
                mark = time.perf_counter()
                models = tuple(bench_models(args.models))
                spec = RunSpec(tuple(run_ids), models, "all", Settings(), dataset=dataset, speculate=args.speculate)
                prepared = prepare(ws, session, spec)
                log(
                    f"prepared {len(run_ids)} runs of {len(models)} model(s), {prepared.new_threads} threads; "
                    f"wave 1: {prepared.compiled.requests} requests in {len(prepared.compiled.files)} files "
                    f"({time.perf_counter() - mark:.1f} s, RSS {current_rss_mb()} MB, peak {peak_rss_mb()} MB)"
                )
                time_floor()
                for round_no in range(1, MAX_ROUNDS):
                    before = dict(meter.seconds)
                    mark = time.perf_counter()
                    left = poll_and_advance(
                        ws, session, do_submit=True, wait=False, poll_interval=0, compact=not args.no_compact
                    )
                    spent = {
                        k: round(v - before.get(k, 0.0), 2)
                        for k, v in meter.seconds.items()
                        if v - before.get(k, 0.0) > 0.005
                    }
                    time_floor()
                    wave = ws.store.conn.execute("SELECT MAX(n) FROM waves").fetchone()[0]
                    wave_log.append({"round": round_no, "wave": wave, "seconds": spent})
                    if spent or not sleeps_latency(args):
                        log(
                            f"round {round_no}: now at wave {wave}, {time.perf_counter() - mark:.1f} s {spent} "
                            f"RSS {current_rss_mb()} MB, peak {peak_rss_mb()} MB; left {left}"
                        )
                    if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                        break
                    if left["in_flight"]:
                        # Latency 0: batches are terminal at once, but be safe; when the simulated
                        # provider sleeps a latency, poll as `--poll-interval` says.
                        time.sleep(poll_pause(args))
                else:
                    raise RuntimeError(f"the workspace did not finish in {MAX_ROUNDS:,} rounds")
                engine_seconds = time.perf_counter() - started - floor_seconds
                db = ws.store.conn
                counts = {
                    "waves": db.execute("SELECT COUNT(*) FROM waves").fetchone()[0],
                    "requests": db.execute("SELECT COUNT(*) FROM requests").fetchone()[0],
                    "request_status": {
                        r[0]: r[1] for r in db.execute("SELECT status, COUNT(*) FROM requests GROUP BY status")
                    },
                    "thread_status": {
                        r[0]: r[1] for r in db.execute("SELECT status, COUNT(*) FROM threads GROUP BY status")
                    },
                    "files": db.execute("SELECT COUNT(*) FROM files").fetchone()[0],
                    "rounds": round_no,
                    "batches_aside": {
                        r[0]: r[1] for r in db.execute("SELECT why, COUNT(*) FROM other_batches GROUP BY why")
                    },
                    "token_budgets": {model: b["budget"] for model, b in budget_usage(db).items()},
                }
            finally:
                session.close()
    finally:
        _stop_profiler(profiler, args.profile)
        if simulator is not None:
            simulator.stop()
    engine_peak = peak_rss_mb()
    log(f"engine done in {engine_seconds:.1f} s: {counts}")
    checked = validation.result()
    log(
        f"the dataset validated with load_dataset in {checked['seconds']} s "
        f"(its own process, peak RSS {checked['peak_rss_mb']} MB)"
    )

    report_args = ["--child-report", str(ws_root)] + (["--html"] if args.html else [])
    if args.profile:
        stem = Path(args.profile)
        report_args += ["--profile", str(stem.with_name(stem.stem + "-report" + stem.suffix))]
    reported = _run_child(report_args)
    log(f"report in {reported['seconds']} s {reported['parts']} (peak RSS {reported['peak_rss_mb']} MB)")

    s = meter.seconds
    advance = s["advance"]
    seconds = {
        "compile": s["compile_wave"] - advance,
        "submit": s["submit.verify"] + s["submit.upload_create"],
        "ingest": s["ingest.download"] + s["ingest.apply"],
        "advance": advance,
        "compact": s["compact"],
        "report": reported["seconds"],
    }
    seconds["total"] = engine_seconds + reported["seconds"]
    c = meter.cpu
    cpu_seconds = {  # (the protocols' advance within compile: `Meter.wrap_fast` reads no CPU clock)
        "compile": c["compile_wave"],
        "ingest": c["ingest.download"] + c["ingest.apply"],
    }
    requests = counts["requests"]
    per = {k: round(v / requests * 1e6, 1) for k, v in seconds.items()}
    local = seconds["compile"] + seconds["ingest"] + seconds["advance"]
    breakdown = {
        "compile.request_lines": s["compile.request_lines"],
        "compile.insert_requests": s["compile.insert_requests"],
        "compile.other": s["compile_wave"] - advance - s["compile.request_lines"] - s["compile.insert_requests"],
        "submit.verify": s["submit.verify"],
        "submit.upload_create": s["submit.upload_create"],
        "ingest.download": s["ingest.download"],
        "ingest.apply": s["ingest.apply"],
        "poll.retrieve": s["poll_files"] - s["ingest.download"] - s["ingest.apply"],
        "prepare.load_dataset": s["prepare.load_dataset"],
        "prepare.register_run": s["prepare.register_run"],
        "prepare.add_threads": s["prepare.add_threads"],
        "compact": s["compact"],
        "compact_worker": s["compact_worker"],
        "provider.create": s["provider.create"],
        "provider.sync": s["provider.sync"],
        "other": seconds["total"]
        - sum(v for k, v in seconds.items() if k != "total")
        - (s["poll_files"] - s["ingest.download"] - s["ingest.apply"])
        - s["prepare.load_dataset"]
        - s["prepare.register_run"]
        - s["prepare.add_threads"],
    }
    if args.simulator == "process":
        ws_bytes = tree_size(ws_root)
    else:
        ws_bytes = tree_size(ws_root, exclude=ws_root / "state" / "simulated")
    ws_parts = {
        part: round(tree_size(ws_root / part, exclude=ws_root / "state" / "simulated") / MB, 1)
        for part in ("requests", "responses", "state", "runs")
    }
    timing = None
    provider_work = s["provider.create"] + s["provider.retrieve"] + s["provider.sync"]
    if args.batch_latency is not None:
        timing = time_to_result(ws_root, options, args, engine_seconds - provider_work)
        if args.real_time:
            # Here the engine's time includes the latencies slept: compare it with the model's
            # provider seconds plus the local seconds of a run at zero latency.
            timing["measured_seconds"] = round(engine_seconds, 1)
        log(
            f"time to result (latency model: batch {args.batch_latency} s, chat completion {args.sync_latency} s, "
            f"--concurrency {args.concurrency}): {timing['simulated_seconds']} s, {timing['batch_round_trips']} "
            f"batch round trips, cost {timing['cost_usd']} USD (premium {timing['premium_pct']}%)"
        )
    drawn = None
    if args.draws:
        drawn = time_to_result_draws(ws_root, options, args, engine_seconds - provider_work, DEFAULT_PRICE)
        log(f"time to result over {args.draws} draws of the calibrated latency model {drawn['model']}:")
        for entry in drawn["entries"]:
            log(
                f"  {entry['name']:<12} p50 {entry['p50_seconds']:>9.0f} s  p95 {entry['p95_seconds']:>9.0f} s  "
                f"batch round trips p50 {entry['batch_round_trips_p50']:>4}  cost {entry['cost_usd']:.2f} USD "
                f"(premium {entry['premium_pct']}%)"
            )
    floor = alongside.result()
    log(f"serialisation floor, timed beside the waves ({floor_seconds:.1f} s): {floor}")
    floor_after = serialisation_floor(ws_root)
    log(f"serialisation floor, timed after the run: {floor_after}")
    checked_export = check_export(ws_root, root / f"{ws_root.name}-check") if args.check_export else None
    if checked_export is not None:
        log(f"export check: {checked_export}")
    cache = None if args.no_cache_share else _cache_share(ws_root, Workspace)
    peaks = [p for p in (engine_peak, reported["peak_rss_mb"]) if p is not None]
    return {
        "scale": args.scale,
        "cases": checked["cases"],
        "runs": args.runs,
        "models": args.models,
        "requests": requests,
        "waves": counts["waves"],
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "us_per_request": per,
        "local_us_per_request": round(local / requests * 1e6, 1),
        # The same three parts in this process's CPU time: far less sensitive to other load.
        "local_cpu_us_per_request": round(sum(cpu_seconds.values()) / requests * 1e6, 1),
        "cpu_seconds": {k: round(v, 3) for k, v in cpu_seconds.items()},
        # What any engine must spend per request here (`floor`), and the local work as a multiple of it.
        "floor": floor,
        "floor_after_the_run": floor_after,
        "local_over_floor": round(local / requests * 1e6 / floor["us_per_request"], 2)
        if floor["us_per_request"]
        else None,
        "local_cpu_over_floor": round(sum(cpu_seconds.values()) / requests * 1e6 / floor["cpu_us_per_request"], 2)
        if floor["cpu_us_per_request"]
        else None,
        # ... and of the durable floor: the serialisation floor and the least SQLite work (`floor`).
        "local_over_durable_floor": round(local / requests * 1e6 / floor["durable_us_per_request"], 2)
        if floor["durable_us_per_request"]
        else None,
        "peak_rss_mb": max(peaks) if peaks else None,
        "workspace_mb": round(ws_bytes / MB, 1),
        "workspace_mb_by": ws_parts,
        "workspace_peak_mb": round(max(meter.workspace_peak, ws_bytes) / MB, 1),
        "speculate": args.speculate,
        "tail_sync": args.tail_sync,
        "tail": args.tail,
        "max_premium": args.max_premium,
        "no_flex": args.no_flex,
        "compact": not args.no_compact,
        "time_to_result": timing,
        "time_to_result_draws": drawn["entries"] if drawn else None,
        "time_to_result_draws_model": {k: v for k, v in drawn.items() if k != "entries"} if drawn else None,
        "check_export": checked_export,
        "cache": cache,
        "simulator": args.simulator,
        "peak_rss_mb_by_process": {
            "engine": engine_peak,
            "validate": checked["peak_rss_mb"],
            "report": reported["peak_rss_mb"],
            "simulator": simulator.peak_rss_mb if simulator is not None else None,
        },
        "peak_rss_raised_mb_by": {k: round(v, 1) for k, v in meter.peak_raised_by.items()},
        "breakdown_seconds": {k: round(v, 3) for k, v in breakdown.items()},
        "report_parts": reported["parts"],
        "html": reported.get("html"),
        "report_digest": reported["digest"],
        "metrics_digest": reported["metrics_digest"],
        "request_status": counts["request_status"],
        "thread_status": counts["thread_status"],
        "files": counts["files"],
        "rounds": counts["rounds"],
        "batches_aside": counts["batches_aside"],
        "token_budgets": counts["token_budgets"],
        "sim_faults": args.sim_faults,
        "engine_seconds": round(engine_seconds, 1),
        "profiled": bool(args.profile),
        "commit": _commit(),
        "package": str(Path(__import__("lexpilot_batch").__file__).resolve().parent),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }


def _cache_share(ws_root: Path, workspace: Any) -> dict[str, Any]:
    """What the simulated provider reported cached, and per provider what its documented rule would
    cache of the same requests and save (`cache_share`); printed, and returned for the JSON."""
    from cache_share import measure

    with workspace(ws_root) as ws:
        db = ws.store.conn
        prompt, cached = db.execute("SELECT SUM(prompt_tokens), SUM(cached_tokens) FROM requests").fetchone()
        out = {"reported": {"prompt_tokens": prompt or 0, "cached_tokens": cached or 0}, **measure(ws_root, db)}
    log(
        f"cached input: the simulated provider reported {(cached or 0) / (prompt or 1):.1%} of {prompt or 0:,} "
        f"prompt tokens cached; by each provider's rule ({out['seconds']} s):"
    )
    for name, row in out.items():
        if isinstance(row, dict) and "cached_share" in row:
            written = f", {row['cache_write_tokens']:,} written" if row["cache_write_tokens"] else ""
            log(
                f"  {name:<30} {row['cached_share']:>7.1%} of {row['prompt_tokens']:,} cached{written}; "
                f"saves {row['saved_usd']} of {row['input_cost_usd']} USD input"
            )
    return out


def _commit() -> str | None:
    """The checked-out commit of the package under test (read-only; None outside a git checkout)."""
    import lexpilot_batch

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(lexpilot_batch.__file__).resolve().parent,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/run_bench.py",
        description="Benchmark the wave engine on a synthetic dataset of N x 432 cases (see bench/README.md).",
        epilog="example: python bench/run_bench.py --scale 1 --runs 5",
    )
    parser.add_argument("--scale", type=int, default=1, help="dataset size in multiples of 432 cases (default 1)")
    parser.add_argument("--speculate", action="store_true", help="prepare the runs with --speculate")
    parser.add_argument("--runs", type=int, default=5, help="run ids to prepare (default 5)")
    parser.add_argument("--models", type=int, default=1, help="evaluated models to prepare (default 1)")
    parser.add_argument(
        "--html", action="store_true", help="also render the HTML report (seconds, size, load time in Chromium)"
    )
    parser.add_argument("--root", help="folder for the dataset, workspace and simulator state (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files instead of deleting them")
    parser.add_argument("--dataset", help="use this dataset file instead of generating one (kept)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic dataset (default 0)")
    parser.add_argument(
        "--simulator",
        choices=("process", "in-process"),
        default="process",
        help="run the simulated provider in its own process (default) or in this one",
    )
    parser.add_argument(
        "--profile",
        help="write a pyinstrument profile (.txt or .html) of the engine phase; "
        "the report's goes beside it (-report suffix). Timings of a profiled run are inflated",
    )
    parser.add_argument(
        "--sim-faults",
        default="none",
        help="faults of the simulated provider, e.g. 'token_limit=2000000,latency=0.5' (an enqueued-token quota "
        "per model; default none)",
    )
    parser.add_argument(
        "--max-enqueued-tokens",
        action="append",
        default=[],
        help="MODEL=N: tell the engine a model's quota (repeatable; default: it learns it from refusals)",
    )
    parser.add_argument(
        "--tail-sync",
        type=int,
        default=0,
        metavar="N",
        help="prepare the runs with --tail-sync N: a wave's groups of at most N requests through chat completions",
    )
    parser.add_argument(
        "--tail", choices=("off", "auto"), default="off", help="prepare the runs with --tail auto (engine/tail.py)"
    )
    parser.add_argument(
        "--max-premium", type=float, default=0.0, metavar="PCT", help="with --tail auto: --max-premium PCT (default 0)"
    )
    parser.add_argument(
        "--no-cache-share",
        action="store_true",
        help="skip the cached-input accounting (each provider's caching rule replayed over the requests)",
    )
    parser.add_argument("--no-flex", action="store_true", help="as if no model took the flex tier (--flex '*=off')")
    parser.add_argument(
        "--flex-latency",
        type=float,
        metavar="f",
        help="seconds a flex call takes in the latency model (default: twice --sync-latency)",
    )
    parser.add_argument(
        "--draws",
        type=int,
        default=0,
        metavar="N",
        help="also replay the run's waves under N seeded draws of the calibrated latency model (bench/draws.py): "
        "p50/p95 time to result per configuration",
    )
    parser.add_argument(
        "--batch-median", type=float, default=420.0, metavar="S", help="with --draws: median batch seconds (420)"
    )
    parser.add_argument(
        "--batch-p90",
        type=float,
        default=3600.0,
        metavar="S",
        help="with --draws: 90th-percentile batch seconds (3600)",
    )
    parser.add_argument(
        "--stuck", type=float, default=0.01, metavar="P", help="with --draws: probability a batch is stuck (0.01)"
    )
    parser.add_argument(
        "--flex-range",
        metavar="MIN:MAX",
        help="with --draws: flex calls uniform over MIN..MAX seconds (Gemini's 1 to 15 minutes: 60:900); default: "
        "--flex-latency, else the product's 60 s",
    )
    parser.add_argument(
        "--rate-limits",
        metavar="RPM:TPM",
        help="with --draws: requests and tokens a minute per model the adaptive client meets "
        "(simulated.ratelimits; default the mid-tier 5000:4000000, 0 for no such limit)",
    )
    parser.add_argument(
        "--compare-only",
        action="append",
        default=[],
        metavar="NAME",
        help="with --compare, only these configurations (repeatable; names as in the table)",
    )
    parser.add_argument(
        "--batch-latency",
        type=float,
        metavar="S",
        help="seconds a batch takes in the latency model: adds the time to result, batch round trips and cost",
    )
    parser.add_argument(
        "--sync-latency", type=float, default=1.0, metavar="s", help="seconds a chat completion takes (default 1)"
    )
    parser.add_argument(
        "--latency-spread",
        type=float,
        default=0.0,
        metavar="F",
        help="spread each latency uniformly over [L(1-F), L(1+F)] (default 0)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, help="parallel requests of the sync backend (default 8, as the product)"
    )
    parser.add_argument(
        "--prices",
        help="prices file as for `report --prices` (default: every role at 0.15 / 0.60 USD per 1M input / output tokens)",
    )
    parser.add_argument(
        "--real-time",
        action="store_true",
        help="let the simulated provider sleep the latency model, and measure (checks the computed time)",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        help="seconds between polls while batches are in flight (default 0.2 with --real-time, 0.1 with a latency "
        "in --sim-faults, else 0.01: batches end at once)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run no speculation, speculation, speculation with --tail-sync N, with --tail auto (flex), and with "
        "--tail auto --max-premium 10 without flex, each in its own workspace",
    )
    parser.add_argument("--no-compact", action="store_true", help="leave finished waves' files uncompressed")
    parser.add_argument(
        "--check-export",
        action="store_true",
        help="at the end, export the workspace and an uncompressed copy of it and compare them (doctor on both)",
    )
    parser.add_argument("--child-validate", help=argparse.SUPPRESS)
    parser.add_argument("--child-report", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_validate:
        print(json.dumps(child_validate(Path(args.child_validate))))
        return 0
    if args.child_report:
        print(json.dumps(child_report(Path(args.child_report), args.profile, args.html)))
        return 0
    if args.scale < 1 or args.runs < 1 or args.models < 1:
        parser.error("--scale, --runs and --models must be at least 1")
    problem = check_latency_args(args) or check_draws_args(args)
    if problem:
        parser.error(problem)
    print(json.dumps(run(args), ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
