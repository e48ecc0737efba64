"""The options commands share: single ones, and the groups that become one `Target` or `RunSpec`.

A group is added to a command by `with_options` and reaches it as one object, so that the
provider options (`PROVIDER_OPTIONS` → `Target`) and the experiment's own (`run_options.RUN_OPTIONS` →
`RunSpec`) are spelled once for every command that takes them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer

from lexpilot_batch.benchmark.protocols import STAGES
from lexpilot_batch.cli.tail_options import TAIL_OPTIONS, TailSyncOpt
from lexpilot_batch.errors import LexpilotError

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import ProviderOptions

# (parameter name, annotated type, default) of one option in a group.
Option = tuple[str, object, object]

DatasetOpt = Annotated[
    str | None,  # not a Path, which would fold the `//` of a hf:// URL (`data.dataset_source` reads it)
    typer.Option("--dataset", help="Dataset JSON file or hf://datasets/OWNER/NAME[@REV] (default: bundled sample)."),
]
CategoriesOpt = Annotated[
    Path | None,
    typer.Option(
        "--categories",
        help="JSON object {class name: [cause of action, ...]} (default: the bundled mapping).",
        dir_okay=False,
    ),
]
RootOpt = Annotated[
    Path | None,
    typer.Option("--root", "--output-root", help="Workspace folder (default: the current directory).", file_okay=False),
]
SimFaultsOpt = Annotated[
    str | None,
    typer.Option(
        "--sim-faults",
        envvar="LEXPILOT_SIM_FAULTS",
        help="Simulated provider faults, e.g. 'line_error=0.05,truncate=0.02,malformed_judge=0.1,"
        "expire_batch=0.1,fail_batch=0.05,http_429=0.05,http_500=0.05,latency=2,seed=7'.",
    ),
]
SimSeedOpt = Annotated[int, typer.Option("--sim-seed", help="Seed of the simulated models.")]
FormatOpt = Annotated[str, typer.Option("--format", help="table or json.")]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also say what housekeeping did (compacting finished waves).")
]
OutFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Write to this file (UTF-8, replaced atomically) instead of standard output: safe in any "
        "console code page, and in PowerShell 5.1, whose `>` re-encodes to UTF-16.",
        dir_okay=False,
    ),
]
PricesOpt = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        help='JSON {"openai/gpt-4o-mini": {"input": USD/1M tokens, "cached_input": ..., "output": ...}, ...} by model, over the bundled table (docs/report.md).',
        dir_okay=False,
    ),
]
PollIntervalOpt = Annotated[float, typer.Option("--poll-interval", help="Seconds between polls.", min=0)]
# Which threads a command that acts on threads (`cancel`, `retry`) takes: each repeatable, none = no filter.
RunIdFilterOpt = Annotated[list[str], typer.Option("--run-id", help="Only threads of this run id; repeatable.")]
ModelFilterOpt = Annotated[list[str], typer.Option("--model", help="Only threads of this evaluated model; repeatable.")]
TaskFilterOpt = Annotated[
    list[str],
    typer.Option("--task", help=f"Only this task or stage ({', '.join(s for s in STAGES if s != 'all')})."),
]
CompactOpt = Annotated[
    bool,
    typer.Option(
        "--compact/--no-compact",
        help="Compress the request and result files of finished waves (gzip, NAME.gz); --no-compact leaves "
        "them plain until a later command compacts them.",
    ),
]


def _backend_opt(role: str) -> object:
    return Annotated[
        str | None,
        typer.Option(
            f"--{role}-backend",
            help=f"How {role}-role requests are sent: batch, sync, manual or simulated "
            f"(env LEXPILOT_{role.upper()}_BACKEND; default: what this workspace used last, else batch).",
        ),
    ]


# Options every command that talks to providers takes, gathered into one ProviderOptions.
PROVIDER_OPTIONS: list[Option] = [
    ("root", RootOpt, None),
    (
        "provider",
        Annotated[
            str | None,
            typer.Option(
                "--provider",
                help="'simulated' puts every model on the offline loopback provider (each keeps its request "
                "body); 'env' forgets the backends this workspace remembers, so that every model goes where its "
                "name and the environment variables say.",
            ),
        ],
        None,
    ),
    ("eval_backend", _backend_opt("eval"), None),
    ("user_backend", _backend_opt("user"), None),
    ("judge_backend", _backend_opt("judge"), None),
    (
        "profile",
        Annotated[
            list[str],
            typer.Option(
                "--profile",
                help="Provider profile of bare model names: openai, azure, dashscope or generic, for all roles "
                "(NAME) or one (ROLE=NAME); repeatable. Default: guessed from each role's base URL (a "
                "provider-qualified name takes its provider's).",
            ),
        ],
        [],
    ),
    ("sim_faults", SimFaultsOpt, None),
    ("sim_seed", SimSeedOpt, 0),
    ("timeout", Annotated[float, typer.Option("--timeout", help="Seconds per provider HTTP call.", min=1)], 120.0),
    (
        "retries",
        Annotated[
            int,
            typer.Option(
                "--retries", help="Attempts per request for provider failures (malformed output always gets 3).", min=1
            ),
        ],
        3,
    ),
    (
        "concurrency",
        Annotated[
            int,
            typer.Option(
                "--concurrency",
                help="Most parallel requests of the sync backend and the flex tier to one model (a ceiling: fewer while the provider's rate limits say so; the files of different models run at once, each model its own ceiling).",
                min=1,
            ),
        ],
        8,
    ),
    ("tail_sync", TailSyncOpt, None),
    *TAIL_OPTIONS,
    (
        "max_requests_per_file",
        Annotated[
            int | None,
            typer.Option("--max-requests-per-file", help="Override the profile's requests per batch file.", min=1),
        ],
        None,
    ),
    (
        "max_bytes_per_file",
        Annotated[
            int | None,
            typer.Option("--max-bytes-per-file", help="Override the profile's bytes per batch file.", min=1024),
        ],
        None,
    ),
    (
        "completion_window",
        Annotated[
            str | None,
            typer.Option("--completion-window", help="Override the profile's completion window (e.g. 24h)."),
        ],
        None,
    ),
    (
        "max_wave_age",
        Annotated[
            float | None,
            typer.Option(
                "--max-wave-age",
                help="Hours after which a batch still running "
                "is cancelled; its finished requests are kept and the rest "
                "retried in the next wave.",
                min=0,
            ),
        ],
        None,
    ),
    (
        "create_grace",
        Annotated[
            float,
            typer.Option(
                "--create-grace",
                help="Seconds to look for a batch whose create answer was lost (a timeout, a crash) before "
                "creating it again: a provider may commit a create a moment after it fails to answer.",
                min=0,
            ),
        ],
        60.0,
    ),
    (
        "keep_provider_files",
        Annotated[
            bool,
            typer.Option(
                "--keep-provider-files",
                help="Keep at the provider the input and output files of batches whose results are saved and "
                "ingested, which the azure profile deletes (a resource holds at most 500 files without an "
                "expiration). Only files this workspace created are ever deleted.",
            ),
        ],
        False,
    ),
    (
        "outage_wait",
        Annotated[
            float,
            typer.Option(
                "--outage-wait",
                help="With --wait (and in run): seconds to keep trying while the provider is unreachable or "
                "answers 5xx/429 even after retries, before stopping (nothing is lost either way).",
                min=0,
            ),
        ],
        1800.0,
    ),
    (
        "max_enqueued_tokens",
        Annotated[
            list[str],
            typer.Option(
                "--max-enqueued-tokens",
                help="MODEL=N: the provider's enqueued-token quota for MODEL's batches (OpenAI and Azure queue "
                "limits); a wave's files are cut to fit and sent as earlier batches finish. Remembered by the "
                "workspace; lowered by itself after a token_limit_exceeded refusal. Repeatable.",
            ),
        ],
        [],
    ),
    (
        "batch_endpoint",
        Annotated[
            str | None,
            typer.Option(
                "--batch-endpoint",
                help="Override the profile's endpoint path in request lines (e.g. /chat/completions).",
            ),
        ],
        None,
    ),
]

# Options of the experiment itself: they go into the run manifest.


def with_options(
    options: list[Option], into: str, build: Callable[[dict[str, Any]], object]
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add a group of options to a command, handed to it as one object named `into`."""
    import inspect

    def decorator(func: Callable[..., None]) -> Callable[..., None]:
        # Annotations are strings here (postponed evaluation): typer needs the kept ones evaluated,
        # and the one replaced by `into` is left as it is, so its type is imported only to check.
        signature = inspect.signature(func)
        kept = [
            p.replace(annotation=eval(p.annotation, func.__globals__)) if isinstance(p.annotation, str) else p
            for p in signature.parameters.values()
            if p.name != into
        ]
        added = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a) for n, a, d in options]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            kwargs[into] = build({n: kwargs.pop(n) for n, _, _ in options})
            return func(*args, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in [*kept, *added]}
        return wrapper

    return decorator


class Target(NamedTuple):
    """Where a command works and how it reaches providers: what `PROVIDER_OPTIONS` build."""

    root: Path | None
    options: ProviderOptions


def provider_options(values: dict[str, Any]) -> Target:
    from lexpilot_batch.benchmark.settings import ROLES
    from lexpilot_batch.engine.budgets import parse_flags
    from lexpilot_batch.engine.session import ProviderOptions
    from lexpilot_batch.engine.tail import parse_expected
    from lexpilot_batch.providers.prices import load_prices
    from lexpilot_batch.providers.routing.flex import parse_flex_flags

    profiles: dict[str, str | None] = {}
    for item in values["profile"]:
        role, sep, name = item.partition("=")
        if not sep:
            profiles.update({r: item for r in ROLES})
        elif role in ROLES:
            profiles[role] = name
        else:
            raise LexpilotError(f"--profile {item!r}: the role must be one of {', '.join(ROLES)}")
    return Target(
        values["root"],
        ProviderOptions(
            provider=values["provider"],
            backends={"eval": values["eval_backend"], "user": values["user_backend"], "judge": values["judge_backend"]},
            profiles=profiles,
            sim_faults=values["sim_faults"],
            sim_seed=values["sim_seed"],
            timeout=values["timeout"],
            retries=values["retries"],
            concurrency=values["concurrency"],
            max_requests=values["max_requests_per_file"],
            max_bytes=values["max_bytes_per_file"],
            completion_window=values["completion_window"],
            batch_endpoint=values["batch_endpoint"],
            max_enqueued_tokens=parse_flags(values["max_enqueued_tokens"]),
            create_grace=values["create_grace"],
            outage_wait=values["outage_wait"],
            max_wave_age=values["max_wave_age"] * 3600 if values["max_wave_age"] is not None else None,
            hedge=values["hedge"],
            off_peak=values["off_peak"],
            tail_sync=values["tail_sync"],
            tail=values["tail"],
            max_premium=values["max_premium"],
            flex=parse_flex_flags(values["flex"]),
            expect_latency=parse_expected(values["expect_latency"]),
            prices=load_prices(values["prices"]),
            keep_provider_files=values["keep_provider_files"],
        ),
    )
