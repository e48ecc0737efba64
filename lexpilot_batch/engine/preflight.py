"""`lexpilot-batch preflight`: the providers of a study asked, before anything costly, whether they
serve its models and take its requests as the study will send them.

For every (role, model) of the study, after every check `prepare` makes (`study.lineup.plan_runs`,
so a refused name or body stops it first), on its route (`--provider`, `--*-backend`, the
variables, as `prepare` resolves it):

1. its endpoint's live model listing, read once per endpoint (`sync.call.ChatCall.models`: OpenAI's
   `GET /models` and every OpenAI-compatible server's, Anthropic's `GET /v1/models`, Gemini's
   `models.list`): whether the model is in it. A model missing from a listing is said, not
   refused: providers serve aliases they do not list (Anthropic's `claude-sonnet-4-5`);
2. one synchronous request with the exact body the study sends in that role (its fields, its
   line's shape, its API's call), a one-line question for a prompt, read as ingest reads an
   answer (`engine.answers.judge_line`);
3. with `batch`, one single-request batch per endpoint, walked through upload, create, poll and
   results, or cancelled when it has not ended within `batch_wait` seconds.

Nothing is written: no workspace, no key (a rehearsal's simulated provider keeps its state in a
temporary folder). What it spent is priced at list price from the bundled table or `--prices`.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lexpilot_batch.engine.answers import judge_line
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.providers.backends import SYNC
from lexpilot_batch.providers.batch import BatchInfo, BatchSource, BatchStatus
from lexpilot_batch.providers.ids import custom_id, id_tag, request_check
from lexpilot_batch.providers.lines import request_line
from lexpilot_batch.providers.prices import Prices, cost_usd, price_for
from lexpilot_batch.providers.registry import api_spec, batch_backend, chat_call
from lexpilot_batch.providers.routing.endpoints import Endpoint, endpoint_identity, simulated_target
from lexpilot_batch.providers.routing.routes import Route
from lexpilot_batch.study.lineup import plan_runs
from lexpilot_batch.util import clock

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session
    from lexpilot_batch.study.runs import RunSpec

# What each preflight request asks: one short question, whatever the role's template would say.
PROMPT = "请用一句话回答：合同纠纷可以向哪个法院起诉？"
TAG = id_tag("lexpilot-batch preflight")
POLL_SECONDS = 5.0
LISTED, NOT_LISTED = "listed", "NOT LISTED"
BATCH_OK = BatchStatus.COMPLETED  # a batch that ended with its one answer usable


@dataclass
class Check:
    """One (role, model)'s preflight: what each step found."""

    roles: list[str]
    model: str  # as registered
    endpoint: str  # its identity (no key, no query)
    catalogue: str = "-"  # LISTED, NOT_LISTED, or why the listing could not be read
    call: str = "-"  # "ok", or what went wrong
    batch: str = "-"
    cost_usd: float | None = None
    ok: bool = True
    suggestion: str = ""


@dataclass
class Preflight:
    checks: list[Check] = field(default_factory=list)
    requests: int = 0  # sent

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def cost_usd(self) -> float:
        """What the priced requests cost (`unpriced` counts the others)."""
        return sum(c.cost_usd for c in self.checks if c.cost_usd is not None)

    @property
    def unpriced(self) -> int:
        return sum(1 for c in self.checks if c.cost_usd is None and c.call != "-")


@dataclass(frozen=True)
class Target:
    """A (role, model) to check: its route and the request its role sends."""

    role: str
    model: str  # as registered
    route: Route
    fields: str  # the body's other fields, as the study sends them (`bodies.request.RoleRequest.fields`)
    sent: str  # the model as sent


def _line(target: Target, n: int) -> bytes:
    """The request line the study would compile for this role and model, with `PROMPT` for its prompt."""
    route = target.route
    body = request_line("x", target.sent, PROMPT, target.fields, route.limits.endpoint, api=route.api, tag=TAG)
    cid = custom_id("preflight", n, target.role, 1, request_check(TAG, body))
    return request_line(cid, target.sent, PROMPT, target.fields, route.limits.endpoint, api=route.api, tag=TAG)


def _judged(api: str, line: dict[str, Any]) -> tuple[bool, str, tuple]:
    """A result line as ingest reads it: (usable, why not, usage)."""
    reader = api_spec(api).read_results(TAG)
    ok, _, _, error, _, usage = judge_line(reader(line) if reader is not None else line, "text", 0)
    return ok, error or "", usage


def _cost(usage: tuple, prices: Prices | None, role: str, model: str, backend: str) -> float | None:
    prompt, completion, cached = (usage[0] or 0), (usage[1] or 0), (usage[2] or 0)
    return cost_usd(prompt, completion, price_for(prices, role, model), backend, cached_tokens=cached)


def _listing(call: Any) -> tuple[frozenset[str] | None, str]:
    try:
        names = call.models()
    except Exception as exc:  # a listing refused or absent says so in its cell: the call still runs
        failure = call.failure(exc)
        return None, f"no listing ({failure.message if failure else type(exc).__name__})"[:80]
    return (None, "no listing (its API has none)") if names is None else (frozenset(names), "")


def run(
    targets: list[Target],
    endpoint_of: Callable[[Route], Endpoint],
    *,
    prices: Prices | None = None,
    timeout: float = 120.0,
    batch: bool = False,
    batch_wait: float = 600.0,
    say: Callable[[str], None] = lambda _: None,
) -> Preflight:
    """Check each target (module docstring); `endpoint_of` gives a route's live endpoint."""
    result = Preflight()
    listings: dict[tuple[str, str], tuple[frozenset[str] | None, str]] = {}
    batched: set[tuple[str, str, str]] = set()
    for n, target in enumerate(targets):
        route = target.route
        endpoint = endpoint_of(route)
        # a rehearsal's endpoint as its files name it (`simulated/anthropic`), any other's identity
        rehearsed = simulated_target(route.endpoint.base_url) is not None
        shown = route.endpoint.base_url if rehearsed else endpoint_identity(endpoint.base_url)
        check = Check([target.role], target.model, shown)
        result.checks.append(check)
        model = target.sent if api_spec(route.api).chat_names_model else ""
        call = chat_call(route.api, endpoint, timeout, 2, model)
        key = (route.api, endpoint.base_url)
        if key not in listings:
            listings[key] = _listing(call)
        names, why = listings[key]
        check.catalogue = why if names is None else LISTED if target.sent in names else NOT_LISTED
        raw = _line(target, n)
        line = json.loads(raw)
        say(f"  {target.role:<5}  {target.model}: one request to {check.endpoint}")
        sent = call.send(line[call.id_key], call.payload(line, f"the preflight request of {target.model}"))
        result.requests += 1
        if sent.line is None:
            error = call.error(sent, f"the preflight request of {target.model}")
            check.call, check.ok = f"failed: {error or sent.kind}"[:200], False
        else:
            usable, why_not, usage = _judged(route.api, sent.line)
            check.call = "ok" if usable else f"refused: {why_not}"[:200]
            check.ok = usable
            check.cost_usd = _cost(usage, prices, target.role, target.model, SYNC)
        if batch and route.backend == SYNC:
            check.batch = "no batch API"  # (DeepSeek's, Ark's: the study sends them one by one)
        elif batch and route.limits.min_requests > 1:  # (AWS Bedrock's jobs: 100 records at least)
            check.batch = f"not tried: one takes {route.limits.min_requests:,}+ requests"
        elif batch and (route.api, endpoint.base_url, endpoint.key_var) not in batched:
            batched.add((route.api, endpoint.base_url, endpoint.key_var))
            check.batch = _one_batch(target, route, endpoint, raw, timeout, batch_wait, say)
            check.ok = check.ok and check.batch == BATCH_OK
    return result


def _one_batch(
    target: Target, route: Route, endpoint: Endpoint, line: bytes, timeout: float, wait: float, say: Callable
) -> str:
    """One single-request batch: upload, create, poll, results; cancelled when not ended in `wait`."""
    backend = batch_backend(route.api, endpoint, route.limits, timeout)
    with tempfile.TemporaryDirectory(prefix="lexpilot-preflight-") as folder:
        path = Path(folder) / "preflight.jsonl"
        path.write_bytes(line)
        try:
            file_id = backend.upload(path, "lexpilot-preflight.jsonl")
            source = BatchSource(path, target.sent)
            info = backend.create(file_id, {"lexpilot": "preflight"}, route.limits.endpoint, source)
            say(f"  batch {info.id} of {target.model} created; polling for up to {wait:.0f} s")
            started = time.monotonic()
            while not info.terminal and time.monotonic() - started < wait:
                clock.pause(min(POLL_SECONDS, wait))
                info = backend.retrieve(info.id)
            if not info.terminal:
                backend.cancel_live(info.id)
                return f"cancelled: still {info.status} after {wait:.0f} s"
            return _batch_result(backend, info, route.api, Path(folder))
        except LexpilotError as exc:
            return f"failed: {exc}"[:200]


def _batch_result(backend: Any, info: BatchInfo, api: str, folder: Path) -> str:
    if info.status != BatchStatus.COMPLETED or not info.output_file_id:
        return f"ended {info.status}"
    dest = folder / "output.jsonl"
    backend.download(info.output_file_id, dest)
    lines = [json.loads(x) for x in dest.read_text(encoding="utf-8").splitlines() if x.strip()]
    if not lines:
        return f"{BatchStatus.COMPLETED}, no result line"
    usable, why_not, _ = _judged(api, lines[0])
    return BATCH_OK if usable else f"{BatchStatus.COMPLETED}, answer refused: {why_not}"[:200]


def table(found: Preflight) -> list[str]:
    """The rows as printed: role, model, endpoint, catalogue, call, batch, cost."""
    head = ("role", "model", "endpoint", "catalogue", "call", "batch", "cost")
    rows = [
        (
            "+".join(c.roles),
            c.model,
            c.endpoint,
            c.catalogue,
            c.call,
            c.batch,
            "-" if c.cost_usd is None else f"${c.cost_usd:.5f}",
        )
        for c in found.checks
    ]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows]]


def plan(session: Session, spec: RunSpec) -> list[Target]:
    """What `run` would check: every (role, model) of `spec`, after every check `prepare` makes
    (the SDKs included); a key missing for any of them is refused now, naming each variable, before
    anything is sent."""
    plans = plan_runs(spec, session)
    targets = targets_of(plans, session.route)
    missing: list[str] = []
    for target in targets:
        try:
            session.endpoint(target.route).require_key()
        except ConfigError as exc:
            if str(exc) not in missing:
                missing.append(str(exc))
    if missing:
        raise ConfigError("; ".join(missing) + ". Nothing was sent")
    return targets


def targets_of(plans: list[Any], route_of: Callable[[str, str, str | None], Route]) -> list[Target]:
    """Each (role, model as registered) of `plans` once, in the order they come."""
    seen: dict[tuple[str, str], Target] = {}
    for plan in plans:
        for role, request in plan.requests.items():
            model = plan.settings.model_for(role, plan.model)
            if (role, model) not in seen:
                route = route_of(role, model, request.provider)
                seen[(role, model)] = Target(role, model, route, request.fields, request.model)
    return list(seen.values())
