"""The options of how a wave's groups travel (`engine.tail`): `--tail-sync`, `--tail`,
`--max-premium`, `--flex`, `--expect-latency`, the `--prices` the premium is weighed at and
`--off-peak` (`engine.off_peak`); each remembered by the workspace, and none of them changes a record; and `--hedge` (`engine.hedge`), which
cancels a wave's stragglers so that their rest travels again, not remembered (give it to each command)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

TailSyncOpt = Annotated[
    int | None,
    typer.Option(
        "--tail-sync",
        help="In each wave, send a group of at most N requests for one model (what would be one batch) "
        "through the provider's synchronous call (the sync backend, at list price: chat completions, Claude's "
        "Messages, Gemini's generateContent) instead of a batch, where the provider has one: the last waves "
        "then take no batch round trip. 0 turns it off. Remembered by the workspace (prepare); records are "
        "the same either way.",
        min=0,
    ),
]
TailOpt = Annotated[
    str | None,
    typer.Option(
        "--tail",
        help="auto: per wave, send every group of the wave at once when that is quicker than a batch round "
        "trip: on the flex tier (OpenAI's and Gemini's service_tier flex, at batch price) for models that take "
        "it, else through the sync backend within --max-premium; off: batches only (--tail-sync N still "
        "applies). Remembered by the workspace; records are the same either way.",
    ),
]
MaxPremiumOpt = Annotated[
    float | None,
    typer.Option(
        "--max-premium",
        help="With --tail auto: the most, in percent of the study's batch-priced cost sent before a wave, that "
        "groups sent at list price through the sync backend may add over the whole study, at --prices, each "
        "group weighed at the largest sizes measured for its role and model (docs/providers.md; default 0: "
        "flex only).",
        min=0,
    ),
]
FlexOpt = Annotated[
    list[str],
    typer.Option(
        "--flex",
        help="MODEL=on|off: whether MODEL's requests may travel on its provider's flex tier, over the "
        "built-in table (docs/performance.md); repeatable.",
    ),
]
ExpectLatencyOpt = Annotated[
    list[str],
    typer.Option(
        "--expect-latency",
        help="KIND=SECONDS, KIND batch, sync or flex: what --tail auto expects a batch round trip, a sync "
        "call or a flex call to take (default: the workspace's measured batches, else 3600 / 2 / 60); repeatable.",
    ),
]

PremiumPricesOpt = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        help='JSON {"openai/gpt-4o-mini": {"input": USD/1M tokens, "cached_input": ..., "output": ...}, ...} by '
        "model, over the bundled table (docs/report.md): what prepare --dry-run projects costs at, and what "
        "--tail auto weighs --max-premium at (remembered by the workspace).",
        dir_okay=False,
    ),
]

HedgeOpt = Annotated[
    bool,
    typer.Option(
        "--hedge",
        help="Also cancel a batch still running past the 90th percentile of this workspace's own completed "
        "batch durations (once 3 have; --max-wave-age still applies); its finished requests are kept and the "
        "rest retried in the next wave, by the route --tail gives it. Records are the same either way.",
    ),
]

OffPeakOpt = Annotated[
    bool | None,
    typer.Option(
        "--off-peak/--any-hour",
        help="Send the requests of a model whose provider prices by time of day (DeepSeek: data/prices.json's "
        "$schedules, or your --prices FILE's) only in its off-peak window: a call is not started once the window "
        "closes, and the rest wait, across commands, for the next one (`status` says until when, UTC); batch-priced "
        "models are unaffected. Remembered by the workspace (--any-hour turns it off); records are the same either way.",
    ),
]

TAIL_OPTIONS: list[tuple[str, object, object]] = [  # (name, type, default) as `options.Option`
    ("tail", TailOpt, None),
    ("max_premium", MaxPremiumOpt, None),
    ("flex", FlexOpt, []),
    ("expect_latency", ExpectLatencyOpt, []),
    ("prices", PremiumPricesOpt, None),
    ("hedge", HedgeOpt, False),
    ("off_peak", OffPeakOpt, None),
]
