"""What the sync and flex client costs with many calls in flight: `python bench/in_flight.py
--requests 3000 --concurrency 1000 --call-seconds 2` sends a request file through the product's
`SyncRunner` (`providers.sync.runner`: its adaptive window, `--concurrency` the ceiling) to a
simulated provider in a process of its own (`serve-simulated`, each call held `--call-seconds`),
and prints one JSON line: wall seconds, the most calls in flight, the most threads of this process
and its peak RSS (sampled every 50 ms; `ru_maxrss` where the platform has it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def rss_mb() -> float:
    """This process's resident set now, from /proc (Linux), else 0."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/in_flight.py", description=__doc__)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--call-seconds", type=float, default=2.0)
    parser.add_argument("--rate-limits", default="", metavar="RPM:TPM", help="the provider's limits (none by default)")
    args = parser.parse_args(argv)

    from lexpilot_batch.providers.routing.endpoints import Endpoint
    from lexpilot_batch.providers.sync.runner import SyncRunner

    faults = f"sync_latency={args.call_seconds:g}"
    if args.rate_limits:
        rpm, _, tpm = args.rate_limits.partition(":")
        faults += f",rpm={int(rpm)},tpm={int(tpm or 0)}"
    with tempfile.TemporaryDirectory(prefix="lexpilot-inflight-") as tmp:
        root = Path(tmp)
        server = subprocess.Popen(
            [sys.executable, "-m", "lexpilot_batch", "serve-simulated", "--port", "0", "--state-dir", str(root / "sim"),
             "--sim-faults", faults],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            base_url = line.split(" at ", 1)[1].split(" ", 1)[0]
            requests = root / "req.jsonl"
            with open(requests, "w", encoding="utf-8") as out:
                for i in range(args.requests):
                    body = {
                        "model": "sim-eval",
                        "messages": [{"role": "user", "content": f"问题 {i}"}],
                        "max_tokens": 64,
                    }
                    out.write(json.dumps({"custom_id": f"r-{i}", "method": "POST", "url": "/v1/chat/completions",
                                          "body": body}, ensure_ascii=False) + "\n")  # fmt: skip
            endpoint = Endpoint("eval", base_url, "LEXPILOT_EVAL_API_KEY", "bench-not-a-secret", backend="sync")
            runner = SyncRunner(endpoint, concurrency=args.concurrency, timeout=600.0)
            peak = {"threads": 0, "rss_mb": 0.0}
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak["threads"] = max(peak["threads"], threading.active_count())
                    peak["rss_mb"] = max(peak["rss_mb"], rss_mb())
                    done.wait(0.05)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            start = time.monotonic()
            stats = runner.run(requests, root / "out.jsonl")
            seconds = time.monotonic() - start
            done.set()
            sampler.join()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(
        json.dumps(
            {
                "requests": args.requests,
                "ok": stats.ok,
                "concurrency": args.concurrency,
                "call_seconds": args.call_seconds,
                "wall_seconds": round(seconds, 1),
                "peak_in_flight": stats.peak_in_flight,
                "window_cuts": stats.window_cuts,
                "rate_limited": stats.rate_limited,
                "peak_threads": peak["threads"],
                "peak_rss_mb": round(peak["rss_mb"], 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
