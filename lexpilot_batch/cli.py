"""The command line: parses options and calls one library function per command.

No SQL, HTTP or metric arithmetic lives here. `LexpilotError`s become one clean message and a
non-zero exit; Ctrl-C exits 130 (state stays consistent because every write is transactional).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from lexpilot_batch import __version__
from lexpilot_batch.errors import LexpilotError, NotAvailable

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
    Optional[Path],
    typer.Option("--dataset", help="Dataset JSON file (default: the bundled sample).", dir_okay=False),
]
CategoriesOpt = Annotated[
    Optional[Path],
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


def _not_yet(command: str) -> None:
    raise NotAvailable(f"`lexpilot-batch {command}` is not available in this version yet.")


RootOpt = Annotated[
    Optional[Path],
    typer.Option("--root", "--output-root", help="Workspace folder (default: the current directory).", file_okay=False),
]
ProviderOpt = Annotated[
    Optional[str],
    typer.Option(
        "--provider",
        help="'env' (endpoints and keys from OPENAI_*/LEXPILOT_* variables) or 'simulated' (offline loopback "
        "provider). Default: what this workspace used last, else 'env'.",
    ),
]
SimFaultsOpt = Annotated[
    Optional[str],
    typer.Option(
        "--sim-faults",
        envvar="LEXPILOT_SIM_FAULTS",
        help="Simulated provider faults, e.g. 'line_error=0.05,truncate=0.02,malformed_judge=0.1,"
        "expire_batch=0.1,fail_batch=0.05,http_429=0.05,http_500=0.05,latency=2,seed=7'.",
    ),
]
SimSeedOpt = Annotated[int, typer.Option("--sim-seed", help="Seed of the simulated models.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds per provider HTTP call.", min=1)]
RetriesOpt = Annotated[
    int, typer.Option("--retries", help="Attempts per request for provider failures (malformed output: 3).", min=1)
]
MaxRequestsOpt = Annotated[
    Optional[int], typer.Option("--max-requests-per-file", help="Shard limit (default 50,000).", min=1)
]
MaxBytesOpt = Annotated[
    Optional[int], typer.Option("--max-bytes-per-file", help="Shard limit in bytes (default 200 MB).", min=1024)
]
StageOpt = Annotated[
    str,
    typer.Option("--stage", help="lca, dcg, ljp-direct, ljp-gold, ljp-interaction or all."),
]
RunIdOpt = Annotated[
    list[str], typer.Option("--run-id", help="Run id; repeat for several independent runs (run1 ... run5).")
]
ModelOpt = Annotated[Optional[str], typer.Option("--model", envvar="LEXPILOT_MODEL", help="The evaluated model.")]
UserModelOpt = Annotated[
    str, typer.Option("--user-model", envvar="LEXPILOT_USER_MODEL", help="The User Model simulating the client.")
]
JudgeModelOpt = Annotated[str, typer.Option("--judge-model", envvar="LEXPILOT_JUDGE_MODEL", help="The judge model.")]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", help="Use only the first N cases (smoke runs).", min=1)]
TemperatureOpt = Annotated[float, typer.Option("--temperature", help="Evaluated and User Model temperature.")]
JudgeTemperatureOpt = Annotated[float, typer.Option("--judge-temperature", help="Judge temperature.")]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", help="max_tokens of every request.", min=1)]
PromptsOpt = Annotated[
    Optional[Path],
    typer.Option("--prompts", help="JSON object replacing prompt templates by name (see README).", dir_okay=False),
]
SpeculateOpt = Annotated[
    bool,
    typer.Option(
        "--speculate/--no-speculate",
        help="Request User Model replies alongside the classification they depend on (8 waves instead of 11).",
    ),
]
SubmitFlag = Annotated[bool, typer.Option("--submit", help="Also submit what is compiled.")]
WaitFlag = Annotated[bool, typer.Option("--wait", help="Keep polling until nothing is in flight or due.")]
PollIntervalOpt = Annotated[float, typer.Option("--poll-interval", help="Seconds between polls.", min=0)]
FormatOpt = Annotated[str, typer.Option("--format", help="table or json.")]


def _session(ws, provider, sim_faults, sim_seed, timeout, retries, max_requests, max_bytes):
    from lexpilot_batch.engine import ProviderOptions, Session

    return Session(
        ws,
        ProviderOptions(
            provider=provider,
            sim_faults=sim_faults,
            sim_seed=sim_seed,
            timeout=timeout,
            retries=retries,
            max_requests=max_requests,
            max_bytes=max_bytes,
        ),
    )


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


def _do_prepare(root, provider, sim_faults, sim_seed, timeout, retries, max_requests, max_bytes, stage, run_id,
                model, user_model, judge_model, dataset, categories, limit, temperature, judge_temperature,
                max_tokens, prompts_file, speculate):
    from lexpilot_batch.config import Settings
    from lexpilot_batch.engine import prepare as do_prepare
    from lexpilot_batch.workspace import Workspace

    settings = Settings(user_model, judge_model, temperature, judge_temperature, max_tokens)
    with Workspace(root) as ws:
        session = _session(ws, provider, sim_faults, sim_seed, timeout, retries, max_requests, max_bytes)
        try:
            result = do_prepare(
                ws, session, stage=stage, run_ids=run_id or ["run1"], model=model, settings=settings,
                dataset_path=dataset, categories_path=categories, limit=limit, prompts_path=prompts_file,
                speculate=speculate,
            )
        finally:
            session.close()
    _say_prepared(result)


@app.command()
def prepare(
    stage: StageOpt = "all",
    run_id: RunIdOpt = [],  # noqa: B006 - typer reads the default, it is never mutated
    model: ModelOpt = None,
    user_model: UserModelOpt = "DeepSeek-V4.1-Flash",
    judge_model: JudgeModelOpt = "DeepSeek-R1",
    dataset: DatasetOpt = None,
    categories: CategoriesOpt = None,
    limit: LimitOpt = None,
    temperature: TemperatureOpt = 0.7,
    judge_temperature: JudgeTemperatureOpt = 0.1,
    max_tokens: MaxTokensOpt = 8192,
    prompts_file: PromptsOpt = None,
    speculate: SpeculateOpt = False,
    root: RootOpt = None,
    provider: ProviderOpt = None,
    sim_faults: SimFaultsOpt = None,
    sim_seed: SimSeedOpt = 0,
    timeout: TimeoutOpt = 120.0,
    retries: RetriesOpt = 3,
    max_requests_per_file: MaxRequestsOpt = None,
    max_bytes_per_file: MaxBytesOpt = None,
) -> None:
    """Register a run and compile the requests now due into the open wave's batch files.

    Running it again with the same settings compiles nothing new; different settings for the same
    run id are refused.

    Example: lexpilot-batch prepare --stage lca --run-id run1 --model gpt-4o-mini
    """
    _do_prepare(root, provider, sim_faults, sim_seed, timeout, retries, max_requests_per_file, max_bytes_per_file,
                stage, run_id, model, user_model, judge_model, dataset, categories, limit, temperature,
                judge_temperature, max_tokens, prompts_file, speculate)


@app.command()
def submit(
    root: RootOpt = None,
    provider: ProviderOpt = None,
    sim_faults: SimFaultsOpt = None,
    sim_seed: SimSeedOpt = 0,
    timeout: TimeoutOpt = 120.0,
    retries: RetriesOpt = 3,
) -> None:
    """Upload every compiled, unsubmitted request file and create its batch.

    Example: lexpilot-batch submit
    """
    from lexpilot_batch.engine import submit as do_submit
    from lexpilot_batch.workspace import Workspace

    with Workspace(root) as ws:
        session = _session(ws, provider, sim_faults, sim_seed, timeout, retries, None, None)
        try:
            result = do_submit(ws, session, on_file=lambda p: typer.echo(f"  submitted {p}"))
        finally:
            session.close()
    if not result.submitted:
        typer.echo("Nothing to submit.")
    else:
        typer.echo(f"Submitted {len(result.submitted)} batch(es)"
                   + (f", {len(result.adopted)} adopted from an interrupted submit." if result.adopted else "."))


def _progress_printer():
    """One tqdm bar per wave over its requests' provider counts, and a summary line per step."""
    from tqdm import tqdm

    state: dict = {"bar": None, "wave": None}

    def close_bar() -> None:
        if state["bar"] is not None:
            state["bar"].close()
            state["bar"] = None

    def on_round(outcome, left) -> None:
        poll = outcome.poll
        if poll.batches:
            wave = poll.batches[0]["wave"]
            total = sum((b["counts"] or {}).get("total") or b["requests"] for b in poll.batches)
            done = sum((b["counts"] or {}).get("completed", 0) + (b["counts"] or {}).get("failed", 0)
                       for b in poll.batches)
            if state["wave"] != wave:
                close_bar()
                state["bar"] = tqdm(total=total, desc=f"wave {wave}", unit="req", dynamic_ncols=True)
                state["wave"] = wave
            bar = state["bar"]
            bar.total = total
            bar.n = done
            statuses = ", ".join(f"{b['path'].rsplit('/', 1)[-1].split('__')[0]}:{b['status']}"
                                 for b in poll.batches)
            bar.set_postfix_str(f"{statuses} ({max(b['elapsed'] for b in poll.batches):.0f}s)")
            bar.refresh()
        stats = poll.stats
        say = tqdm.write
        if poll.finished:
            close_bar()
            say(
                f"Ingested {len(poll.finished)} batch(es): {stats.answered} answered, {stats.failed} failed"
                + (f", {stats.missing} missing" if stats.missing else "")
                + (f", {len(stats.anomalies)} anomalies" if stats.anomalies else "")
            )
            for a in stats.anomalies[:5]:
                say(f"    {a}")
        compiled = outcome.compiled
        if compiled is not None and compiled.compiled:
            say(f"Wave {compiled.wave}: {compiled.requests} requests compiled in {len(compiled.files)} file(s); "
                f"{compiled.done} threads finished, {compiled.failed} failed.")
        elif compiled is not None and (compiled.done or compiled.failed):
            say(f"{compiled.done} threads finished, {compiled.failed} failed.")
        if left["in_flight"] == 0:
            close_bar()

    return on_round


def _do_poll(ws, session, do_submit, wait, poll_interval):
    from lexpilot_batch.engine import poll_and_advance as do_poll

    left = do_poll(ws, session, do_submit=do_submit, wait=wait, poll_interval=poll_interval,
                   on_round=_progress_printer())
    if left["in_flight"]:
        typer.echo(f"{left['in_flight']} batch(es) still in flight; run poll-and-advance again later.")
    elif left["unsubmitted"]:
        typer.echo(f"{left['unsubmitted']} file(s) compiled and waiting: run `lexpilot-batch submit`.")
    elif left["active_threads"] == 0:
        typer.echo("Every thread is finished or failed: run `lexpilot-batch report`.")
    return left


@app.command("poll-and-advance")
def poll_and_advance(
    submit_: SubmitFlag = False,
    wait: WaitFlag = False,
    poll_interval: PollIntervalOpt = 30.0,
    root: RootOpt = None,
    provider: ProviderOpt = None,
    sim_faults: SimFaultsOpt = None,
    sim_seed: SimSeedOpt = 0,
    timeout: TimeoutOpt = 120.0,
    retries: RetriesOpt = 3,
    max_requests_per_file: MaxRequestsOpt = None,
    max_bytes_per_file: MaxBytesOpt = None,
) -> None:
    """Poll in-flight batches; save, ingest and advance finished ones; compile the next wave.

    Example: lexpilot-batch poll-and-advance --submit --wait
    """
    from lexpilot_batch.workspace import Workspace

    with Workspace(root) as ws:
        session = _session(ws, provider, sim_faults, sim_seed, timeout, retries, max_requests_per_file,
                           max_bytes_per_file)
        try:
            _do_poll(ws, session, submit_, wait, poll_interval)
        finally:
            session.close()


@app.command()
def status(format_: FormatOpt = "table", root: RootOpt = None) -> None:
    """Show threads done / in flight / failed per run and task, the wave, requests and tokens.

    Example: lexpilot-batch status --format json
    """
    import json

    from lexpilot_batch import status as status_mod
    from lexpilot_batch.workspace import Workspace

    if format_ not in ("table", "json"):
        raise LexpilotError("--format must be table or json")
    with Workspace(root, writable=False) as ws:
        data = status_mod.collect(ws)
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2) if format_ == "json" else status_mod.render(data))


def _load_prices(path: Path | None) -> dict | None:
    import json

    if path is None:
        return None
    try:
        prices = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LexpilotError(f"{path}: cannot read prices ({exc}); expected JSON "
                            '{"eval": {"input": 2.5, "output": 10}, ...} in USD per 1M tokens') from None
    if not isinstance(prices, dict):
        raise LexpilotError(f"{path}: prices must be a JSON object keyed by role (eval, user, judge)")
    return prices


def _print_report(root, run_id, model, format_, partial, prices=None, batch_discount=0.5) -> None:
    from lexpilot_batch import report as report_mod
    from lexpilot_batch import results
    from lexpilot_batch.workspace import Workspace

    if format_ not in report_mod.FORMATS:
        raise LexpilotError(f"--format must be one of {', '.join(report_mod.FORMATS)}")
    with Workspace(root, writable=False) as ws:
        runs = results.load_run_results(ws, run_id, model)
    problems = results.incomplete(runs)
    if problems and not partial:
        raise LexpilotError(
            "some tasks are not complete:\n" + "\n".join(f"  - {p}" for p in problems)
            + "\nFinish them (poll-and-advance --submit --wait), or pass --partial to report what is scored."
        )
    built = report_mod.build_report(runs, prices, batch_discount=batch_discount)
    typer.echo(report_mod.render(built, format_))


@app.command()
def report(
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="Only this run id.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Only this evaluated model.")] = None,
    format_: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
    partial: Annotated[bool, typer.Option("--partial", help="Report unfinished tasks, marked as partial.")] = False,
    prices: Annotated[
        Optional[Path],
        typer.Option("--prices", help='JSON {"eval": {"input": USD/1M, "output": USD/1M}, ...} for cost.',
                     dir_okay=False),
    ] = None,
    batch_discount: Annotated[
        float, typer.Option("--batch-discount", help="Discount of batch over list prices.", min=0, max=1)
    ] = 0.5,
    root: RootOpt = None,
) -> None:
    """Print the benchmark's metrics per run and cause class, with mean and SD over comparable runs.

    Reads only the workspace database: no API calls, so it works offline on finished runs.

    Example: lexpilot-batch report --format markdown
    """
    _print_report(root, run_id, model, format_, partial, _load_prices(prices), batch_discount)


@app.command()
def run(
    stage: StageOpt = "all",
    run_id: RunIdOpt = [],  # noqa: B006 - typer reads the default, it is never mutated
    model: ModelOpt = None,
    user_model: UserModelOpt = "DeepSeek-V4.1-Flash",
    judge_model: JudgeModelOpt = "DeepSeek-R1",
    dataset: DatasetOpt = None,
    categories: CategoriesOpt = None,
    limit: LimitOpt = None,
    temperature: TemperatureOpt = 0.7,
    judge_temperature: JudgeTemperatureOpt = 0.1,
    max_tokens: MaxTokensOpt = 8192,
    prompts_file: PromptsOpt = None,
    speculate: SpeculateOpt = False,
    poll_interval: PollIntervalOpt = 30.0,
    report_format: Annotated[str, typer.Option("--report-format", help="Format of the closing report.")] = "table",
    root: RootOpt = None,
    provider: ProviderOpt = None,
    sim_faults: SimFaultsOpt = None,
    sim_seed: SimSeedOpt = 0,
    timeout: TimeoutOpt = 120.0,
    retries: RetriesOpt = 3,
    max_requests_per_file: MaxRequestsOpt = None,
    max_bytes_per_file: MaxBytesOpt = None,
) -> None:
    """Prepare, submit and poll until every thread is finished, then print the report.

    Interrupt it at any moment and run it again: it resumes where it stopped.

    Example: lexpilot-batch run --stage all --provider simulated --run-id demo --model sim-eval
    """
    from lexpilot_batch.workspace import Workspace

    _do_prepare(root, provider, sim_faults, sim_seed, timeout, retries, max_requests_per_file, max_bytes_per_file,
                stage, run_id, model, user_model, judge_model, dataset, categories, limit, temperature,
                judge_temperature, max_tokens, prompts_file, speculate)
    with Workspace(root) as ws:
        session = _session(ws, provider, sim_faults, sim_seed, timeout, retries, max_requests_per_file,
                           max_bytes_per_file)
        try:
            left = _do_poll(ws, session, True, True, poll_interval if session.provider != "simulated" else
                            min(poll_interval, 0.2))
        finally:
            session.close()
    if left["active_threads"] == 0:
        _print_report(root, None, None, report_format, partial=False)


@app.command()
def export(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the result files into.", file_okay=False)],
    layout: Annotated[str, typer.Option("--layout", help="Only 'seed': the original code's file layout.")] = "seed",
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="Only this run id.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Only this evaluated model.")] = None,
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
def ingest() -> None:
    """Ingest a batch output file produced elsewhere (OpenAI or vLLM run-batch shape).

    Example: lexpilot-batch ingest vllm_output.jsonl --wave 3
    """
    _not_yet("ingest")


@app.command("serve-simulated")
def serve_simulated(
    host: Annotated[str, typer.Option("--host", help="Loopback address to bind (nothing else is allowed).")] = "127.0.0.1",
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
