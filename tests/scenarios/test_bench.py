"""The benchmark script (`bench/run_bench.py`) still runs against the package it measures: a
small run over the bundled sample through the in-process simulated provider, ending in its JSON
summary with the report timed through `report/produce.py` and both digests computed. (Issue 29
changed `print_report`'s signature and nothing noticed that the bench had stopped running.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a whole (small) benchmark in a child process
def test_the_bench_runs_on_the_bundled_sample(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run_bench.py"),
            "--dataset",
            str(ROOT / "data" / "sample_cases.json"),
            "--runs",
            "1",
            "--simulator",
            "in-process",
            "--speculate",
            "--root",
            str(tmp_path / "bench"),
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["thread_status"] and set(summary["thread_status"]) == {"done"}
    assert summary["metrics_digest"] and summary["report_digest"]
    assert summary["report_parts"]["build_report"] > 0 and summary["report_parts"]["render"] > 0
