"""The terminal rendering of an estimate (`--format json` is `Estimate.to_json()`)."""

from __future__ import annotations

from typing import Any

from lexpilot_batch.benchmark.settings import ROLES
from lexpilot_batch.estimate.assumptions import Assumptions, AutoProjection, Estimate, Span
from lexpilot_batch.estimate.off_peak import lines as off_peak_lines
from lexpilot_batch.providers.prices import bundled_as_of
from lexpilot_batch.state.states import FileState
from lexpilot_batch.util.columns import aligned


def _n(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.4f}"


def _three(span: Span, fmt: Any = _n) -> str:
    return f"{fmt(span.min)} / {fmt(span.expected)} / {fmt(span.max)}"


def render(estimate: Estimate) -> str:
    """A terminal table: next wave, projection, waves left, cost, and the assumptions made."""
    e, a = estimate, estimate.assumptions
    lines = ["Dry run: nothing was written." if e.mode == "dry_run" else "Estimate for this workspace."]
    if e.runs:
        lines.append("Runs with work left (requests min / expected / max):")
        for r in e.runs:
            lines.append(
                f"  {r.run_id}  {r.model}{'  (new)' if r.new else ''}  {r.active_threads} active threads, "
                f"{_three(r.requests)} requests"
            )
    if e.in_flight_wave is not None:
        n = sum(e.in_flight_requests.values())
        lines.append(
            f"Wave {e.in_flight_wave} is under way ({n} requests in flight); new work joins the next wave. "
            "The projection counts its requests in flight, not yet paid for, as it counts compiled ones."
        )

    if e.next_wave:
        what = (
            "compiled, not yet submitted"
            if e.next_wave_source == FileState.COMPILED
            else "what compiling would produce"
        )
        lines.append(f"\nNext wave {e.wave} ({what}):")
        rows = [["role", "backend", "requests", "prompt chars", "~prompt tok", "~compl. tok", "~cost USD", "model(s)"]]
        for role, w in e.next_wave.items():
            rows.append(
                [
                    role,
                    w.backend,
                    f"{w.requests:,}",
                    f"{w.prompt_chars:,}",
                    f"{w.prompt_tokens:,}",
                    f"{w.completion_tokens:,}",
                    _usd(w.cost_usd) if e.prices_given else "-",
                    ", ".join(w.models),
                ]
            )
        lines += aligned(rows, "llrrrrrl")
    elif e.next_wave_source != "in_flight":
        lines.append("\nNothing is due: every thread is finished." if not e.projection else "\nNothing is due now.")

    if e.projection:
        since = ", the requests in flight included," if e.in_flight_requests else ""
        lines.append(f"\nProjection to the end of every run{since} (min / expected / max):")
        rows = [["role", "requests", "~prompt tokens", "~completion tokens"]]
        if e.prices_given:
            rows[0].append("~cost USD")
        for role, p in e.projection.items():
            rows.append([role, _three(p.requests), _three(p.prompt_tokens), _three(p.completion_tokens)])
            if e.prices_given:
                rows[-1].append(_three(p.cost_usd, _usd) if p.cost_usd else "n/a")
        rows.append(["total", _three(e.projection_requests), "", ""])
        if e.prices_given:
            rows[-1].append(_three(e.projection_cost_usd, _usd) if e.projection_cost_usd else "n/a")
        lines += aligned(rows, "lrrrr"[: len(rows[0])])
        if e.projection_cost_by_model:
            lines.append("Projected cost per model, over the roles it serves (USD, min / expected / max):")
            rows = [["model", "~cost USD"]]
            rows += [[m, _three(c, _usd) if c else "n/a (no price)"] for m, c in e.projection_cost_by_model.items()]
            rows.append(["total", _three(e.projection_cost_usd, _usd) if e.projection_cost_usd else "n/a"])
            lines += aligned(rows, "lr")
        after = " after the one in flight" if e.in_flight_wave is not None else ""
        lines.append(f"Waves remaining{after}: {e.waves_remaining.min} to {e.waves_remaining.max}")
        lines.append(_tail_sync_text(e))
        if e.tail_auto is not None and e.tail_auto.waves:
            lines.extend(_auto_lines(e.tail_auto))
        lines.extend(off_peak_lines(e.off_peak, _usd, _three))
    if e.prices_given:
        lines.append(
            f"Cost: list price per 1M tokens x (1 - {a.batch_discount:g}) on batch/simulated backends, "
            "full price on sync, n/a on manual or where a model has no price; prices from --prices FILE, else "
            f"the bundled table of {bundled_as_of()} (check your provider's page)."
        )
    else:
        lines.append("Cost: no price for these models (pass --prices FILE, by model, to project it).")
    lines.append("Assumptions: " + _assumption_text(a))
    return "\n".join(lines)


def _tail_sync_text(e: Estimate) -> str:
    t = e.tail_sync
    head = f"Batch round trips, expected path: {t.batch_round_trips_without}"
    if not t.limit:
        return head + " (--tail-sync N sends a wave's groups of at most N requests at once, through the sync backend)"
    if not t.sync_waves:
        return head + f", also with --tail-sync {t.limit} (no projected group is that small)"
    if t.premium_usd is None:
        premium = " (pass --prices for the premium)"
    else:
        share = f", +{t.premium_share:.1%} of the projected cost" if t.premium_share is not None else ""
        premium = f": a premium of {_usd(t.premium_usd)} USD{share}"
    waves = ", ".join(str(w) for w in t.sync_waves)
    return (
        f"{head}; {t.batch_round_trips} with --tail-sync {t.limit}, which sends ~{_n(t.sync_requests)} requests of "
        f"projected waves {waves} through the sync backend at list price{premium}"
    )


def _auto_lines(t: AutoProjection) -> list[str]:
    """Wave by wave, batch-only against `--tail auto` at the chosen premium (`engine.tail`)."""
    premium = f"+{_usd(t.premium_usd)} USD" if t.premium_usd is not None else "n/a (pass --prices)"
    cost = f"{_usd(t.cost_usd)} USD" if t.cost_usd is not None else "n/a"
    lines = [
        f"Batch-only against --tail auto (--max-premium {t.max_premium:g}, --concurrency {t.concurrency}, "
        f"a batch expected to take {t.expected_batch_seconds:,.0f} s):",
        f"  batch-only: {t.batch_round_trips} round trips, ~{t.batch_seconds:,.0f} s, {cost}; "
        f"auto: {t.auto_round_trips} round trips, ~{t.auto_seconds:,.0f} s, premium {premium}",
        f"  {'wave':>4}{'requests':>10}{'batch-only s':>14}{'auto: batch':>13}{'flex':>8}{'sync':>8}{'auto s':>10}",
    ]
    for w in t.waves:
        lines.append(
            f"  {w.wave:>4}{_n(w.requests):>10}{w.batch_seconds:>14,.0f}{_n(w.batch):>13}{_n(w.flex):>8}"
            f"{_n(w.sync):>8}{w.seconds:>10,.0f}"
            + ("  in flight: sent as shown, not yet answered" if w.in_flight else "")
        )
    return lines


def _measured(n: int) -> str:
    return f"measured on {n}" if n else "default"


def _assumption_text(a: Assumptions) -> str:
    clarify = "given" if a.clarify_probability_given else _measured(a.clarify_probability_measured_on)
    return (
        "; ".join(
            [
                f"{a.chars_per_token:.2f} prompt chars/token ({_measured(a.chars_per_token_measured_on)})",
                f"clarification probability {a.clarify_probability:.2f} ({clarify})",
                "response chars "
                + ", ".join(
                    f"{r} {a.response_chars[r]} ({_measured(a.response_chars_measured_on[r])})"
                    for r in ("eval", "user")
                ),
                "completion tokens/request "
                + ", ".join(
                    f"{r} {a.completion_tokens[r]} ({_measured(a.completion_tokens_measured_on[r])})" for r in ROLES
                ),
                "cached prompt tokens "
                + ", ".join(f"{r} {a.cached_share[r]:.0%} ({_measured(a.cached_share_measured_on[r])})" for r in ROLES),
                "no failures or retries",
            ]
        )
        + "."
    )
