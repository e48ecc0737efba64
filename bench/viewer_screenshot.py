"""Take `docs/report-viewer.png`: the HTML report's per-case viewer on a case whose judge answered
malformed JSON and was asked again, its judges' words open.

    python bench/viewer_screenshot.py --out docs/report-viewer.png

runs a small study against the simulated provider (its judges answer malformed JSON a third of the
time), writes its HTML report, finds a DCG case whose judge was rejected and then answered, and
has headless Chromium (`--chromium`, else `chromium`/`google-chrome` on PATH) draw the viewer on
it (`#case=...&words`). `tests/bench/test_viewer_screenshot.py` runs it. Everything but the PNG
goes to a temporary folder (`--keep DIR` keeps it).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

MODEL, RUN = "sim-eval", "demo"
SIZE = (1200, 860)


def _lexpilot(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lexpilot_batch", *args], capture_output=True, text=True, encoding="utf-8"
    )
    if done.returncode != 0:
        raise SystemExit(f"lexpilot-batch {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _retried_case(root: Path) -> str:
    """The case number of the first DCG case whose judge was rejected as malformed, then answered."""
    db = sqlite3.connect(f"file:{(root / 'state' / 'lexpilot.sqlite3').as_posix()}?mode=ro", uri=True)
    try:
        row = db.execute(
            "SELECT c.case_number FROM requests q JOIN runs r ON r.pk = q.run_pk"
            " JOIN cases c ON c.dataset = r.dataset AND c.idx = q.case_idx"
            " JOIN threads t ON t.run_pk = q.run_pk AND t.case_idx = q.case_idx AND t.task = 'dcg'"
            " WHERE q.step IN ('dcg.q1j', 'dcg.q2j') AND q.status = 'failed' AND q.error LIKE 'malformed:%' AND t.status = 'done'"
            " ORDER BY q.case_idx LIMIT 1"
        ).fetchone()
    finally:
        db.close()
    if row is None:
        raise SystemExit("no DCG case had a malformed judge answer: raise the malformed_judge rate")
    return str(row[0])


def take(out: Path, work: Path, browser: str) -> str:
    """Run the study in `work`, draw the viewer into `out`; returns the link drawn."""
    root = work / "study"
    sim = ("--provider", "simulated", "--sim-faults", "malformed_judge=0.3,latency=0", "--root", str(root))
    _lexpilot("prepare", "--stage", "dcg", "--run-id", RUN, "--model", MODEL, "--limit", "8", *sim)
    _lexpilot("poll-and-advance", "--submit", "--wait", *sim)  # (a case whose judge failed 3 times is left failed)
    page = work / "report.html"
    page.write_text(_lexpilot("report", "--format", "html", "--partial", "--root", str(root)), encoding="utf-8")
    link = "/".join(urllib.parse.quote(part, safe="") for part in (MODEL, RUN, "dcg", _retried_case(root)))
    url = f"{page.resolve().as_uri()}#case={link}&words"
    out.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={work / 'profile'}", f"--window-size={SIZE[0]},{SIZE[1]}",
            "--virtual-time-budget=5000", f"--screenshot={out.resolve()}", url,
        ],
        capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=180,
    )  # fmt: skip
    if done.returncode != 0 or not out.is_file():
        raise SystemExit(f"Chromium drew nothing:\n{done.stderr[-2000:]}")
    return url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/report-viewer.png"))
    parser.add_argument("--chromium", help="the browser to run (default: chromium or google-chrome on PATH)")
    parser.add_argument("--keep", type=Path, help="keep the study and the page in this folder")
    args = parser.parse_args(argv)
    browser = args.chromium or shutil.which("chromium") or shutil.which("google-chrome")
    if browser is None:
        raise SystemExit("no Chromium found: install it (Debian: apt install chromium) or pass --chromium PATH")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        url = take(args.out, args.keep, browser)
    else:
        with tempfile.TemporaryDirectory() as work:
            url = take(args.out, Path(work), browser)
    print(f"Wrote {args.out} ({SIZE[0]}x{SIZE[1]}) of {url.split('#', 1)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
