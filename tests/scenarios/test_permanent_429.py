"""A provider answering 429 for good (issue 44, item 5): `poll-and-advance` sat 277 s in silence,
whatever `--outage-wait` said. The time went to the waits inside a round, which the outage budget
did not cover: a refused create's file was left `creating`, so the next round looked for its batch
for the whole `--create-grace` (60 s), and each create or upload refused was tried again after the
provider's retry-after, six times. Those waits are now kept within `--outage-wait`, counted from
the first refusal, and each says so on a line: the command stops within the budget and one pause.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app

runner = CliRunner()
SIM = ["--provider", "simulated"]
OUTAGE = 3.0
# One pause of the outage loop (it is cut to what is left of the budget) and the last round, which
# fails at its first refusal; a margin for a shared machine.
SLACK = 3.0


def _prepared(tmp_path: Path) -> str:
    root = str(tmp_path / "ws")
    prepared = runner.invoke(
        app,
        ["prepare", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", *SIM, "--limit", "1", "--root", root],
    )
    assert prepared.exit_code == 0, prepared.output
    return root


@pytest.mark.parametrize(
    "faults",
    [
        "http_429=1",  # every route
        "http_429=1,http_routes=create_batch",  # the create only: its file was looked for 60 s
        "http_429=1,http_routes=create_batch,retry_after=2",  # and the provider asks for 2 s each time
        "http_429=1,http_routes=upload_file",
        "http_429=1,http_routes=retrieve_batch",
    ],
)
def test_a_provider_refusing_for_good_stops_the_command_within_the_outage_wait(tmp_path, faults):
    root = _prepared(tmp_path)
    if "retrieve_batch" in faults:  # the batch sent first, then its polls refused
        sent = runner.invoke(app, ["submit", *SIM, "--root", root])
        assert sent.exit_code == 0, sent.output
    command = ["poll-and-advance", "--submit", "--wait", *SIM, "--sim-faults", faults]
    started = time.monotonic()
    stopped = runner.invoke(app, [*command, "--outage-wait", str(OUTAGE), "--root", root])
    took = time.monotonic() - started
    assert stopped.exit_code == 1, stopped.output
    assert took < OUTAGE + SLACK, f"{took:.1f} s for --outage-wait {OUTAGE}:\n{stopped.output}"
    error = str(stopped.exception)  # printed by `main` as one `Error:` line
    assert "HTTP 429" in error and "--outage-wait" in error and "nothing was lost" in error, error
    assert "Traceback" not in stopped.output


def test_a_long_wait_for_the_provider_is_said_on_a_line(tmp_path):
    """A refused create's batch looked for, or a retry-after of seconds: a line before the wait."""
    root = _prepared(tmp_path)
    faults = "http_429=1,http_routes=create_batch,retry_after=1"
    command = ["poll-and-advance", "--submit", "--wait", *SIM, "--sim-faults", faults, "--outage-wait", "2.5"]
    stopped = runner.invoke(app, [*command, "--root", root])
    assert stopped.exit_code == 1, stopped.output
    waiting = [line for line in stopped.output.splitlines() if line.startswith("Waiting for the provider: ")]
    assert waiting and "HTTP 429" in waiting[0] and "of --outage-wait left after that" in waiting[0], stopped.output
