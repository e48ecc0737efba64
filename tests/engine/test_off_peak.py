"""`--off-peak` (issue 47): the seed's default roles on DeepSeek (its User Model DeepSeek-V4.1-Flash,
served as `deepseek-flash`, and its judge DeepSeek-R1 as `deepseek-reasoner`) are sent only in
DeepSeek's off-peak window (https://api-docs.deepseek.com/quick_start/pricing, read 2026-12-06:
peak 01:00-04:00 and 06:00-10:00 UTC on weekdays, off-peak at half the peak rates).

The client's clock is a test's (`helpers.clocks.ClientClock`: waits taken in virtual time), and
the simulated provider's `created` is read on the same clock, as a provider whose clock agrees
with ours: its answers are priced at the minute it says it answered (`engine.answers.answered_at`).
"""

from __future__ import annotations

import itertools
import json
import types
from datetime import datetime, timezone

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine import off_peak
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.estimate.build import dry_run_prepare
from lexpilot_batch.estimate.render import render
from lexpilot_batch.providers.prices import bundled_prices
from lexpilot_batch.providers.schedules import bundled_schedules, is_peak
from lexpilot_batch.report.build import build_report
from lexpilot_batch.report.results import load_run_results
from lexpilot_batch.simulated import completions
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status.summary import render_summary, summarize
from lexpilot_batch.study.runs import RunSpec
from lexpilot_batch.util import clock
from tests.helpers.clocks import ClientClock
from tests.helpers.engine import open_session, prepare_runs, records

ROLES = Settings(user_model="deepseek/deepseek-flash", judge_model="deepseek/deepseek-reasoner")
DEEPSEEK = bundled_schedules()["deepseek"]
MONDAY_PEAK = datetime(2026, 12, 7, 7, 0, tzinfo=timezone.utc).timestamp()  # inside 06:00-10:00
OPENS = datetime(2026, 12, 7, 10, 0, tzinfo=timezone.utc).timestamp()


def at(monkeypatch: pytest.MonkeyPatch, when: float) -> ClientClock:
    """Our clock and the simulated provider's, both at `when` (and moving together)."""
    fake = ClientClock(monkeypatch)
    fake.ahead = when - clock.now()
    monkeypatch.setattr(completions, "time", types.SimpleNamespace(time=clock.now))
    return fake


def sent_at(ws: Workspace) -> list[float]:
    """When each answered DeepSeek request was answered, as stored."""
    return [
        r[0]
        for r in ws.store.conn.execute(
            "SELECT answered_at FROM requests WHERE model LIKE 'deepseek/%' AND status != 'pending'"
        )
    ]


def drive(ws: Workspace, session, rounds: int = 400) -> None:
    for _ in range(rounds):
        left = poll_and_advance(ws, session, do_submit=True, wait=True, poll_interval=0)
        if left["in_flight"] == 0 and left["unsubmitted"] == 0:
            return
    raise AssertionError("the study did not finish")


def study(tmp_path, name: str, **options):
    ws = Workspace(tmp_path / name).__enter__()
    session = open_session(ws, concurrency=2, **options)
    prepare_runs(ws, session, stage="all", limit=2, settings=ROLES)
    return ws, session


def test_off_peak_holds_deepseeks_requests_until_the_window_and_halves_their_cost(tmp_path, monkeypatch) -> None:
    fake = at(monkeypatch, MONDAY_PEAK)
    ws, session = study(tmp_path, "off", off_peak=True)
    try:
        # One round at peak: DeepSeek's first requests are compiled and submitted, none is sent.
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
        assert sent_at(ws) == []
        held = off_peak.waiting(ws.store.conn, ws.store.meta("tail_policy"))
        assert held and held[0]["until"] == OPENS, held
        shown = render_summary(summarize(ws), str(ws.root))
        assert "Off-peak:" in shown and "2026-12-07 10:00 UTC (Mon)" in shown, shown
        # `--wait` waits (on the clock) for the window, then sends everything in it.
        drive(ws, session)
        times = sent_at(ws)
        assert times and min(times) >= OPENS and not any(is_peak(DEEPSEEK, t) for t in times)
        assert fake.longest >= OPENS - MONDAY_PEAK - 60  # one wait for the window, not a busy loop
        usage = build_report(load_run_results(ws))["groups"][0]["usage"]["roles"]
        for role in ("user", "judge"):
            assert usage[role]["cost_usd"] <= 0.55 * usage[role]["peak_cost_usd"], usage[role]
            assert "untimed_requests" not in usage[role]
        answered = ws.store.conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT custom_id) FROM requests WHERE status = 'answered'"
        ).fetchone()
        assert answered[0] == answered[1]
    finally:
        session.close()
        ws.__exit__(None, None, None)


def test_without_off_peak_the_same_requests_go_at_once_at_the_peak_price(tmp_path, monkeypatch) -> None:
    at(monkeypatch, MONDAY_PEAK)
    ws, session = study(tmp_path, "peak")
    try:
        drive(ws, session)
        assert sent_at(ws) and all(is_peak(DEEPSEEK, t) for t in sent_at(ws))
        usage = build_report(load_run_results(ws))["groups"][0]["usage"]["roles"]
        assert usage["user"]["cost_usd"] == pytest.approx(usage["user"]["peak_cost_usd"])
        flash = bundled_prices()["deepseek/deepseek-flash"]
        assert flash["output"] == 1.2  # the page's peak output rate, per 1M tokens
    finally:
        session.close()
        ws.__exit__(None, None, None)


CLOSES = datetime(2026, 12, 7, 6, 0, tzinfo=timezone.utc).timestamp()


def answers_per_request(ws: Workspace) -> dict[str, int]:
    """How many answer lines each request has across the workspace's sync output files."""
    counts: dict[str, int] = {}
    for path in (ws.root / "responses").rglob("*.output.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            custom_id = json.loads(line)["custom_id"]
            counts[custom_id] = counts.get(custom_id, 0) + 1
    return counts


def test_the_window_closing_mid_group_holds_the_rest_and_ends_as_an_uninterrupted_run(tmp_path, monkeypatch) -> None:
    with monkeypatch.context() as mp:
        at(mp, OPENS)
        ws, session = study(tmp_path, "reference", off_peak=True)
        try:
            drive(ws, session)
            expected = records(ws)
        finally:
            session.close()
            ws.__exit__(None, None, None)
    fake = at(monkeypatch, CLOSES - 3600)  # Monday 05:00: off-peak for another hour
    gate = off_peak.may_start
    started = itertools.count()

    def closing(schedule):
        may = gate(schedule)
        if may is None:
            return None

        def ask() -> bool:
            if next(started) == 3:  # the fourth DeepSeek call: the window closes first
                fake.ahead += CLOSES - clock.now()
            return may()

        return ask

    monkeypatch.setattr(off_peak, "may_start", closing)
    ws, session = study(tmp_path, "closing", off_peak=True)
    try:
        drive(ws, session)
        times = sent_at(ws)
        before = [t for t in times if t < CLOSES]
        during = [t for t in times if CLOSES <= t < OPENS]
        # The three calls started before the window closed, answered before it or (in flight, at
        # most --concurrency 2 of each DeepSeek model, whose files a pass sends at once) as it
        # closed; none started after it.
        models = ws.store.conn.execute(
            "SELECT COUNT(DISTINCT model) FROM requests WHERE model LIKE 'deepseek/%'"
        ).fetchone()[0]
        assert len(before) + len(during) == 3 and len(during) <= 2 * models, (before, during)
        assert len(before) + len(during) < len(times) and min(t for t in times if t >= CLOSES + 600) >= OPENS
        assert records(ws) == expected
        counts = answers_per_request(ws)
        assert counts and set(counts.values()) == {1}
        answered = ws.store.conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT custom_id) FROM requests WHERE status = 'answered'"
        ).fetchone()
        assert answered[0] == answered[1]
    finally:
        session.close()
        ws.__exit__(None, None, None)


@pytest.mark.parametrize("chosen", [True, False])
def test_the_projection_shows_cost_and_wait_both_ways_and_takes_the_off_peak_price_with_off_peak(
    monkeypatch, chosen: bool
) -> None:
    at(monkeypatch, MONDAY_PEAK)
    session = Session(None, ProviderOptions(provider="simulated", off_peak=chosen))
    try:
        estimate = dry_run_prepare(None, session, RunSpec(("r1",), ("sim-eval",), "all", ROLES, limit=2))
    finally:
        session.close()
    rows = {r.role: r for r in estimate.off_peak}
    assert set(rows) == {"user", "judge"}  # the evaluated model travels by batch: not priced by the hour
    for role, r in rows.items():
        assert r.now_is_peak and r.now_usd == r.peak_usd
        assert r.wait_s == pytest.approx(OPENS - MONDAY_PEAK, abs=60) and r.opens == "2026-12-07 10:00 UTC (Mon)"
        assert r.off_peak_usd.expected <= 0.55 * r.peak_usd.expected
        projected = estimate.projection_cost_by_model[ROLES.model_for(role, "sim-eval")]
        assert projected == (r.off_peak_usd if chosen else r.peak_usd)
    shown = render(estimate)
    assert "sent off-peak (--off-peak)" in shown and "wait 3.0 h, until 2026-12-07 10:00 UTC (Mon)" in shown


def test_run_with_off_peak_at_peak_says_what_waits_and_status_until_when(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from lexpilot_batch.cli import app

    at(monkeypatch, MONDAY_PEAK)
    root = tmp_path / "cli"
    roles = ("--user-model", "deepseek/deepseek-flash", "--judge-model", "deepseek/deepseek-reasoner")
    common = ("--provider", "simulated", "--root", str(root))
    prepared = CliRunner().invoke(
        app, ["prepare", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", "--limit", "2", *roles, *common]
    )
    assert prepared.exit_code == 0, prepared.output
    # The evaluated model's batch, then the judge's DeepSeek requests: held (remembered by the second).
    first = CliRunner().invoke(app, ["poll-and-advance", "--submit", "--off-peak", *common])
    assert first.exit_code == 0 and "Off-peak:" not in first.output, first.output
    second = CliRunner().invoke(app, ["poll-and-advance", "--submit", *common])
    assert "Off-peak:" in second.output and "from 2026-12-07 10:00 UTC (Mon)" in second.output, second.output
    shown = CliRunner().invoke(app, ["status", "--root", str(root)])
    assert "Off-peak:" in shown.output and "2026-12-07 10:00 UTC (Mon)" in shown.output, shown.output
