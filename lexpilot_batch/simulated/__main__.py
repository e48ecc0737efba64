"""`python -m lexpilot_batch.simulated --state-dir DIR [--port 0]`: the server in its own process.

The first line on stdout is the base URL, flushed at once, so that a parent process (a test, a
script) can read it and connect.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.simulated.faults import parse_faults
from lexpilot_batch.simulated.server import serve_forever
from lexpilot_batch.util.text import utf8_streams


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lexpilot_batch.simulated",
        description="Run the simulated batch provider (OpenAI, Anthropic Message Batches, Gemini Batch Mode) on a loopback port.",
        epilog="example: python -m lexpilot_batch.simulated --state-dir sim-state --port 0 "
        '--faults "line_error=0.05,latency=2"',
    )
    parser.add_argument("--state-dir", type=Path, required=True, help="folder holding the server's files and batches")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    parser.add_argument(
        "--faults",
        default=None,
        help="fault spec, e.g. 'line_error=0.05,latency=2' (default: $LEXPILOT_SIM_FAULTS, else none)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated models (default 0)")
    parser.add_argument(
        "--forget-batches", action="store_true", help="start as a provider whose restart lost every batch"
    )
    utf8_streams()  # (a state folder or a fault message with Chinese in it, under cp1252 or GBK)
    args = parser.parse_args(argv)
    # A terminated process shuts down like an interrupted one.
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        faults = parse_faults(args.faults)
        serve_forever(
            args.state_dir, args.host, args.port, faults, args.seed, url_line=True, forget_batches=args.forget_batches
        )
    except LexpilotError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
