"""The command line: parses options and calls one library function per command.

No SQL, HTTP or metric arithmetic lives here. `LexpilotError`s become one clean message and a
non-zero exit; Ctrl-C exits 130 (state stays consistent because every write is transactional).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lexpilot_batch import __version__
from lexpilot_batch.costs import DEFAULT_BATCH_DISCOUNT, load_prices
from lexpilot_batch.errors import LexpilotError

if TYPE_CHECKING:
    from lexpilot_batch.runs import RunSpec


class _Typer(typer.Typer):
    """Commands here exit 130 on Ctrl-C, after saying how to resume."""

    def command(self, *args, **kwargs):  # type: ignore[override]
        register = super().command(*args, **kwargs)

        def decorator(func):
            @functools.wraps(func)
            def wrapper(*a, **kw):
                try:
                    return func(*a, **kw)
                except KeyboardInterrupt:
                    typer.echo("Interrupted; run the same command again to resume.", err=True)
                    raise typer.Exit(130) from None

            register(wrapper)
            return func

        return decorator


app = _Typer(
    name="lexpilot-batch",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

DatasetOpt = Annotated[
    Path | None,
    typer.Option("--dataset", help="Dataset JSON file (default: the bundled sample).", dir_okay=False),
]
CategoriesOpt = Annotated[
    Path | None,
    typer.Option(
        "--categories",
        help="JSON object {class name: [cause of action, ...]} (default: the bundled mapping).",
        dir_okay=False,
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lexpilot-batch {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Run the LexPilot legal-consultation benchmark through provider Batch APIs.

    Example: lexpilot-batch run --stage all --provider simulated --run-id demo --model sim-eval
    """


@app.command("validate-data")
def validate_data(dataset: DatasetOpt = None, categories: CategoriesOpt = None) -> None:
    """Check a dataset file against the LexPilot schema and print a summary.

    Exits 0 when valid, 1 with every problem (case and field named) when not.

    Example: lexpilot-batch validate-data --dataset LexPilot_release_multiturn.json
    """
    from lexpilot_batch import data

    summary = data.validate_file(dataset, categories)
    typer.echo(summary.render())


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
PricesOpt = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        help='JSON {"eval": {"input": USD/1M tokens, "output": USD/1M tokens}, ...} for cost estimates.',
        dir_okay=False,
    ),
]
PollIntervalOpt = Annotated[float, typer.Option("--poll-interval", help="Seconds between polls.", min=0)]


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
_PROVIDER_OPTIONS: list[tuple[str, object, object]] = [
    ("root", RootOpt, None),
    (
        "provider",
        Annotated[
            str | None,
            typer.Option(
                "--provider",
                help="'simulated' puts every role on the offline loopback provider; 'env' uses the "
                "OPENAI_*/LEXPILOT_* variables for every role.",
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
                help="Provider profile: openai, azure, dashscope or generic, for all roles (NAME) or one "
                "(ROLE=NAME); repeatable. Default: guessed from each role's base URL.",
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
        Annotated[int, typer.Option("--concurrency", help="Parallel requests of the sync backend.", min=1)],
        8,
    ),
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
_RUN_OPTIONS: list[tuple[str, object, object]] = [
    (
        "stage",
        Annotated[str, typer.Option("--stage", help="lca, dcg, ljp-direct, ljp-gold, ljp-interaction or all.")],
        "all",
    ),
    (
        "run_id",
        Annotated[
            list[str],
            typer.Option(
                "--run-id", help="Run id; repeat for several independent runs (run1 ... run5). Default: run1."
            ),
        ],
        [],
    ),
    (
        "model",
        Annotated[
            str | None, typer.Option("--model", envvar="LEXPILOT_MODEL", help="The evaluated model (no default).")
        ],
        None,
    ),
    (
        "user_model",
        Annotated[
            str,
            typer.Option("--user-model", envvar="LEXPILOT_USER_MODEL", help="The User Model simulating the client."),
        ],
        "DeepSeek-V4.1-Flash",
    ),
    (
        "judge_model",
        Annotated[str, typer.Option("--judge-model", envvar="LEXPILOT_JUDGE_MODEL", help="The judge model.")],
        "DeepSeek-R1",
    ),
    ("dataset", DatasetOpt, None),
    ("categories", CategoriesOpt, None),
    (
        "limit",
        Annotated[int | None, typer.Option("--limit", help="Use only the first N cases (smoke runs).", min=1)],
        None,
    ),
    ("temperature", Annotated[float, typer.Option("--temperature", help="Evaluated and User Model temperature.")], 0.7),
    ("judge_temperature", Annotated[float, typer.Option("--judge-temperature", help="Judge temperature.")], 0.1),
    ("max_tokens", Annotated[int, typer.Option("--max-tokens", help="max_tokens of every request.", min=1)], 8192),
    (
        "prompts_file",
        Annotated[
            Path | None,
            typer.Option(
                "--prompts", help="JSON object replacing prompt templates by name (see README).", dir_okay=False
            ),
        ],
        None,
    ),
    (
        "speculate",
        Annotated[
            bool,
            typer.Option(
                "--speculate/--no-speculate",
                help="Request User Model replies alongside the classification they depend on (8 waves instead of 11).",
            ),
        ],
        False,
    ),
]


def _with(options: list[tuple[str, object, object]], into: str, build):
    """Add a group of options to a command, handed to it as one object named `into`."""
    import inspect

    def decorator(func):
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
        def wrapper(*args, **kwargs):
            kwargs[into] = build({n: kwargs.pop(n) for n, _, _ in options})
            return func(*args, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=[*kept, *added])
        wrapper.__annotations__ = {p.name: p.annotation for p in [*kept, *added]}
        return wrapper

    return decorator


def _provider_options(values: dict):
    from lexpilot_batch.config import ROLES
    from lexpilot_batch.providers.session import ProviderOptions

    profiles: dict[str, str | None] = {}
    for item in values["profile"]:
        role, sep, name = item.partition("=")
        if not sep:
            profiles.update({r: item for r in ROLES})
        elif role in ROLES:
            profiles[role] = name
        else:
            raise LexpilotError(f"--profile {item!r}: the role must be one of {', '.join(ROLES)}")
    return values["root"], ProviderOptions(
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
        max_wave_age=values["max_wave_age"] * 3600 if values["max_wave_age"] is not None else None,
    )


def _run_spec(values: dict):
    from lexpilot_batch.config import Settings
    from lexpilot_batch.runs import RunSpec

    return RunSpec(
        stage=values["stage"],
        run_ids=tuple(values["run_id"] or ["run1"]),
        model=values["model"],
        settings=Settings(
            values["user_model"],
            values["judge_model"],
            values["temperature"],
            values["judge_temperature"],
            values["max_tokens"],
        ),
        dataset=values["dataset"],
        categories=values["categories"],
        limit=values["limit"],
        prompts=values["prompts_file"],
        speculate=values["speculate"],
    )


@contextlib.contextmanager
def _session(target):
    """The writable workspace and a provider session for it, both closed on the way out."""
    from lexpilot_batch.providers.session import Session
    from lexpilot_batch.workspace import Workspace

    root, options = target
    with Workspace(root) as ws:
        session = Session(ws, options)
        try:
            yield ws, session
        finally:
            session.close()


def _say_prepared(result) -> None:
    compiled = result.compiled
    typer.echo(f"Runs: {', '.join(result.runs)}; new threads: {result.new_threads}.")
    if compiled.in_flight:
        typer.echo("A wave is under way; new work joins the next wave (run poll-and-advance).")
    elif compiled.compiled:
        typer.echo(f"Wave {compiled.wave}: {compiled.requests} requests in {len(compiled.files)} file(s):")
        for path in compiled.files:
            typer.echo(f"  {path}")
    else:
        typer.echo("Nothing is due: every thread of these runs is finished.")
    _say_manual(result.compiled.manual_files)


def _say_manual(paths: list[str]) -> None:
    """Tell the user exactly how to run files left to them (the `manual` backend)."""
    if not paths:
        return
    typer.echo("\nThese files are yours to run (manual backend), e.g. with vLLM on a local model:")
    for path in paths:
        out = path.replace("requests/", "responses/", 1).replace(".jsonl", ".output.jsonl")
        typer.echo(f"  python -m vllm.entrypoints.openai.run_batch -i {path} -o {out} --model MODEL")
        typer.echo(f"  lexpilot-batch ingest {out}")
    typer.echo("(or upload them in your provider's console and ingest the output and error files it gives you)")


@app.command()
@_with(_PROVIDER_OPTIONS, "target", _provider_options)
@_with(_RUN_OPTIONS, "spec", _run_spec)
def prepare(
    spec: RunSpec,
    target: tuple,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Show what would be compiled and a projection for the whole run; write nothing."
        ),
    ] = False,
    prices: PricesOpt = None,
    format_: Annotated[str, typer.Option("--format", help="Dry-run output: table or json.")] = "table",
) -> None:
    """Register runs and compile the requests now due into the open wave's batch files.

    Running it again with the same settings compiles nothing new; different settings for the same
    run id are refused, naming every difference.

    Example: lexpilot-batch prepare --stage lca --run-id run1 --model gpt-4o-mini
    """
    from lexpilot_batch.engine import prepare as do_prepare

    if dry_run:
        _dry_run(spec, target, load_prices(prices), format_)
        return
    with _session(target) as (ws, session):
        result = do_prepare(ws, session, spec)
    _say_prepared(result)


def _dry_run(spec: RunSpec, target: tuple, prices: dict | None, format_: str) -> None:
    """Nothing is written, not even a new workspace's database."""
    import json

    from lexpilot_batch.estimate import dry_run_prepare, open_readonly, render

    root, options = target
    with open_readonly(root, options) as (ws, session):
        estimate = dry_run_prepare(ws, session, spec, prices=prices)
    typer.echo(json.dumps(estimate.to_json(), ensure_ascii=False, indent=2) if format_ == "json" else render(estimate))


@app.command()
@_with(_PROVIDER_OPTIONS, "target", _provider_options)
def submit(target: tuple) -> None:
    """Upload every compiled, unsubmitted request file and create its batch.

    Example: lexpilot-batch submit
    """
    from lexpilot_batch.engine import submit as do_submit

    with _session(target) as (ws, session):
        result = do_submit(ws, session, on_file=lambda p: typer.echo(f"  submitted {p}"))
    if not result.submitted and not result.manual:
        typer.echo("Nothing to submit.")
    elif result.submitted:
        typer.echo(
            f"Submitted {len(result.submitted)} file(s)"
            + (f", {len(result.adopted)} adopted from an interrupted submit." if result.adopted else ".")
        )
    _say_manual(result.manual)


def _progress_printer():
    """One tqdm bar per wave over its requests' provider counts, and a summary line per step."""
    from tqdm import tqdm

    state: dict = {"bar": None, "wave": None, "manual": set()}

    def close_bar() -> None:
        if state["bar"] is not None:
            state["bar"].close()
            state["bar"] = None
            state["wave"] = None  # a later round of the same wave opens a fresh bar

    def on_round(outcome, left) -> None:
        poll = outcome.poll
        if poll.batches:
            wave = poll.batches[0]["wave"]
            total = sum((b["counts"] or {}).get("total") or b["requests"] for b in poll.batches)
            done = sum(
                (b["counts"] or {}).get("completed", 0) + (b["counts"] or {}).get("failed", 0) for b in poll.batches
            )
            if state["wave"] != wave:
                close_bar()
                state["bar"] = tqdm(total=total, desc=f"wave {wave}", unit="req", dynamic_ncols=True)
                state["wave"] = wave
            bar = state["bar"]
            bar.total = total
            bar.n = done
            statuses = ", ".join(f"{b['path'].rsplit('/', 1)[-1].split('__')[0]}:{b['status']}" for b in poll.batches)
            bar.set_postfix_str(f"{statuses} ({max(b['elapsed'] for b in poll.batches):.0f}s)")
            bar.refresh()
        stats = poll.stats
        say = tqdm.write
        if poll.finished:
            close_bar()
            say(
                f"Ingested {len(poll.finished)} file(s): {stats.answered} answered, {stats.failed} failed"
                + (f", {stats.missing} missing" if stats.missing else "")
                + (f", {len(stats.anomalies)} anomalies" if stats.anomalies else "")
            )
            for a in stats.anomalies[:5]:
                say(f"    {a}")
        compiled = outcome.compiled
        if compiled is not None and compiled.compiled:
            say(
                f"Wave {compiled.wave}: {compiled.requests} requests compiled in {len(compiled.files)} file(s); "
                f"{compiled.done} threads finished, {compiled.failed} failed."
            )
        elif compiled is not None and (compiled.done or compiled.failed):
            say(f"{compiled.done} threads finished, {compiled.failed} failed.")
        for path in poll.cancelled:
            say(f"Cancelled {path}: older than --max-wave-age; its unfinished requests go to the next wave.")
        new_manual = [p for p in poll.manual if p not in state["manual"]]
        if new_manual:
            state["manual"].update(new_manual)
            close_bar()
            _say_manual(new_manual)
        if left["in_flight"] == 0:
            close_bar()

    return on_round


def _advance(ws, session, do_submit: bool, wait: bool, poll_interval: float) -> dict:
    from lexpilot_batch.engine import poll_and_advance as do_poll

    left = do_poll(
        ws, session, do_submit=do_submit, wait=wait, poll_interval=poll_interval, on_round=_progress_printer()
    )
    if left["waiting_manual"]:
        typer.echo(
            f"{left['waiting_manual']} file(s) wait for you to run them and `lexpilot-batch ingest` their output."
        )
    elif left["in_flight"]:
        typer.echo(f"{left['in_flight']} batch(es) still in flight; run poll-and-advance again later.")
    elif left["unsubmitted"]:
        typer.echo(f"{left['unsubmitted']} file(s) compiled and waiting: run `lexpilot-batch submit`.")
    elif left["active_threads"] == 0:
        typer.echo("Every thread is finished or failed: run `lexpilot-batch report`.")
    return left


@app.command("poll-and-advance")
@_with(_PROVIDER_OPTIONS, "target", _provider_options)
def poll_and_advance(
    target: tuple,
    submit_: Annotated[bool, typer.Option("--submit", help="Also submit what is compiled.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Keep polling until nothing is in flight or due.")] = False,
    poll_interval: PollIntervalOpt = 30.0,
) -> None:
    """Poll in-flight batches; save, ingest and advance finished ones; compile the next wave.

    Example: lexpilot-batch poll-and-advance --submit --wait
    """
    with _session(target) as (ws, session):
        _advance(ws, session, submit_, wait, poll_interval)


@app.command()
def status(
    format_: FormatOpt = "table",
    estimate: Annotated[
        bool, typer.Option("--estimate", help="Also project the remaining requests, tokens, waves and cost.")
    ] = False,
    prices: PricesOpt = None,
    root: RootOpt = None,
) -> None:
    """Show threads done / in flight / failed per run and task, the wave, requests and tokens.

    Example: lexpilot-batch status --format json
    """
    import json

    from lexpilot_batch import status as status_mod
    from lexpilot_batch.workspace import Workspace

    if format_ not in ("table", "json"):
        raise LexpilotError("--format must be table or json")
    price_table = load_prices(prices)
    with Workspace(root, writable=False) as ws:
        data = status_mod.collect(ws)
        projection = _estimate_workspace(ws, price_table) if estimate else None
    if format_ == "json":
        if projection is not None:
            data["estimate"] = projection.to_json()
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    typer.echo(status_mod.render(data))
    if projection is not None:
        from lexpilot_batch.estimate import render

        typer.echo("\n" + render(projection))


def _estimate_workspace(ws, prices):
    from lexpilot_batch.estimate import estimate_workspace
    from lexpilot_batch.providers.session import ProviderOptions, Session

    session = Session(ws, ProviderOptions())
    try:
        return estimate_workspace(ws, session, prices)
    finally:
        session.close()


def _print_report(root, run_id, model, format_, partial, prices=None, batch_discount=DEFAULT_BATCH_DISCOUNT) -> None:
    from lexpilot_batch import report as report_mod
    from lexpilot_batch import results
    from lexpilot_batch.workspace import Workspace

    if format_ not in report_mod.FORMATS:
        raise LexpilotError(f"--format must be one of {', '.join(report_mod.FORMATS)}")
    with Workspace(root, writable=False) as ws:
        runs = results.load_run_results(ws, run_id, model, texts=False)
    problems = results.incomplete(runs)
    if problems and not partial:
        raise LexpilotError(
            "some tasks are not complete:\n"
            + "\n".join(f"  - {p}" for p in problems)
            + "\nFinish them (poll-and-advance --submit --wait), or pass --partial to report what is scored."
        )
    built = report_mod.build_report(runs, prices, batch_discount=batch_discount)
    typer.echo(report_mod.render(built, format_))


@app.command()
def report(
    run_id: Annotated[str | None, typer.Option("--run-id", help="Only this run id.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this evaluated model.")] = None,
    format_: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
    partial: Annotated[bool, typer.Option("--partial", help="Report unfinished tasks, marked as partial.")] = False,
    prices: PricesOpt = None,
    batch_discount: Annotated[
        float, typer.Option("--batch-discount", help="Discount of batch over list prices.", min=0, max=1)
    ] = DEFAULT_BATCH_DISCOUNT,
    root: RootOpt = None,
) -> None:
    """Print the benchmark's metrics per run and cause class, with mean and SD over comparable runs.

    Reads only the workspace database: no API calls, so it works offline on finished runs.

    Example: lexpilot-batch report --format markdown
    """
    _print_report(root, run_id, model, format_, partial, load_prices(prices), batch_discount)


@app.command()
@_with(_PROVIDER_OPTIONS, "target", _provider_options)
@_with(_RUN_OPTIONS, "spec", _run_spec)
def run(
    spec: RunSpec,
    target: tuple,
    poll_interval: PollIntervalOpt = 30.0,
    report_format: Annotated[str, typer.Option("--report-format", help="Format of the closing report.")] = "table",
) -> None:
    """Prepare, submit and poll until every thread is finished, then print the report.

    Interrupt it at any moment and run it again: it resumes where it stopped.

    Example: lexpilot-batch run --stage all --provider simulated --run-id demo --model sim-eval
    """
    from lexpilot_batch.engine import prepare as do_prepare

    with _session(target) as (ws, session):
        _say_prepared(do_prepare(ws, session, spec))
        interval = min(poll_interval, 0.2) if session.provider == "simulated" else poll_interval
        left = _advance(ws, session, True, True, interval)
    if left["active_threads"] == 0:
        _print_report(target[0], None, None, report_format, partial=False)


@app.command()
def export(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the result files into.", file_okay=False)],
    layout: Annotated[str, typer.Option("--layout", help="Only 'seed': the original code's file layout.")] = "seed",
    run_id: Annotated[str | None, typer.Option("--run-id", help="Only this run id.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this evaluated model.")] = None,
    root: RootOpt = None,
) -> None:
    """Write finished records in the original benchmark code's result-file layout.

    Writes runs/, AwN_gen/, Force_ask_gen/, Force_judge_gen/ and eval_results/ under --out.

    Example: lexpilot-batch export --layout seed --out results/
    """
    from lexpilot_batch.export import export_seed
    from lexpilot_batch.workspace import Workspace

    if layout != "seed":
        raise LexpilotError("--layout must be 'seed' (the original benchmark code's result files)")
    with Workspace(root, writable=False) as ws:
        written = export_seed(ws, out, run_id, model)
    typer.echo(f"Wrote {len(written)} file(s) under {out}.")


@app.command()
def ingest(
    file: Annotated[
        Path, typer.Argument(help="A batch output or error file, or vLLM run-batch's output.", dir_okay=False)
    ],
    wave: Annotated[int | None, typer.Option("--wave", help="Only apply it to this wave's files.", min=1)] = None,
    root: RootOpt = None,
) -> None:
    """Ingest a batch output file produced elsewhere (OpenAI output/error shape or vLLM run-batch).

    The file is saved under responses/ first; ingesting it again changes nothing. Run
    poll-and-advance afterwards to compile the next wave.

    Example: lexpilot-batch ingest responses/w0003/eval__llama-3-8b-1a2b3c4d__000.output.jsonl --wave 3
    """
    from lexpilot_batch.ingest import ingest_external
    from lexpilot_batch.workspace import Workspace

    with Workspace(root) as ws:
        stats, done = ingest_external(ws, file, wave)
    typer.echo(
        f"{file}: {stats.answered} answered, {stats.failed} failed"
        + (f", {stats.duplicates} already ingested" if stats.duplicates else "")
        + (f", {stats.unknown} unknown custom_ids" if stats.unknown else "")
        + (f", {stats.bad_lines} unreadable lines" if stats.bad_lines else "")
        + "."
    )
    for path in done:
        typer.echo(f"  complete: {path}")
    typer.echo("Next: lexpilot-batch poll-and-advance --submit")


@app.command()
@_with(_PROVIDER_OPTIONS, "target", _provider_options)
def doctor(
    target: tuple,
    repair: Annotated[bool, typer.Option("--repair", help="Fix what is safe to fix.")] = False,
) -> None:
    """Check the workspace: schema, changed or missing files, interrupted submits, stuck threads.

    Each finding says how to repair it; --repair does what is safe (recompiling an unsent wave,
    downloading results again, re-queuing what a damaged ingest left behind).

    Example: lexpilot-batch doctor --repair
    """
    from lexpilot_batch.doctor import check, render_report

    root, options = target
    report = check(root, repair, options)
    typer.echo(render_report(report))
    raise typer.Exit(report.exit_code)


@app.command("serve-simulated")
def serve_simulated(
    host: Annotated[
        str, typer.Option("--host", help="Loopback address to bind (nothing else is allowed).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port; 0 picks a free one.", min=0, max=65535)] = 0,
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Folder keeping its files and batches across restarts.", file_okay=False)
    ] = Path("state/simulated"),
    sim_faults: SimFaultsOpt = None,
    sim_seed: SimSeedOpt = 0,
) -> None:
    """Serve the simulated OpenAI-compatible Batch API on loopback until stopped.

    Point any OpenAI client at the printed base URL with any API key.

    Example: lexpilot-batch serve-simulated --port 8765 --state-dir sim-state
    """
    from lexpilot_batch.simulated import parse_faults, serve_forever

    serve_forever(state_dir, host, port, parse_faults(sim_faults), sim_seed)


def main() -> None:
    try:
        app()
    except LexpilotError as exc:
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
