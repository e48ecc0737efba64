"""Drivers for the scenarios of the APIs the simulated provider speaks on their own routes
(`ApiSpec.simulated_native`: Anthropic's, Gemini's, Mistral's, Together's) and of the platforms it
serves on their own paths: every provider's variables pointed at a `SimulatedServer`, a study run
through them (each command that gives up run again), what the workspace then holds, and the same
study rehearsed in-process (`--provider simulated`) for the records to compare with.

`SIMULATED_APIS` is read from the two declarations, the registry's (`providers.registry.APIS`) and
the simulated provider's (`simulated.apis`), so that a scenario parametrised over it covers a new
API as soon as its folder and its simulated routes declare it.
"""

from __future__ import annotations

import re
import time
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.bodies.model_names import model_problem
from lexpilot_batch.providers.ids import id_stem
from lexpilot_batch.providers.registry import APIS, BARE, PROVIDERS
from lexpilot_batch.providers.spec import ApiSpec, Provider
from lexpilot_batch.simulated import SimulatedServer, parse_faults, profiles
from lexpilot_batch.simulated import apis as simulated_apis
from lexpilot_batch.state.usage import usage_by_run
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status import detail
from lexpilot_batch.study.runs import RunSpec
from lexpilot_batch.util import clock as waits
from tests.helpers.crash import lower_minimums
from tests.helpers.engine import finish, open_session, records
from tests.helpers.faults import finish_despite
from tests.helpers.vertex import point_vertex_at

# The Claude and Gemini scenarios' study (`scenarios/test_native.py`, `test_native_chat.py`): in the
# same waves as an OpenAI model, every task over the sample's first LIMIT cases.
CLAUDE, GEMINI, GPT = "anthropic/claude-sim", "google/gemini-sim", "openai/gpt-sim"
MODELS = (CLAUDE, GEMINI, GPT)
LIMIT = 5


@dataclass(frozen=True)
class SimulatedApi:
    """One API the simulated provider speaks on its own routes, as a scenario needs it, read from
    the two declarations: the product's (`providers.registry.APIS`) and the simulated provider's
    (`simulated.apis`): a model of its provider that its routes serve, its routes' names (in the
    server's stats and `http_routes=`), the one that creates its batches, and the route of its
    synchronous call (OpenAI's chat completions where it declares none of its own: Mistral's)."""

    name: str
    model: str
    route_names: tuple[str, ...]
    create: str
    chat: str

    def __str__(self) -> str:  # the test id
        return self.name


def _served_model(api: ApiSpec, provider: Provider) -> str:
    """A simulator name (`<name>-sim`, `bodies.model_names`) its own routes serve: `<api>-sim`, or,
    where they serve their lab's models only (Claude, Gemini), its first family's word; a provider
    whose names are another API's (Vertex's, Gemini's) by that API's rules and families."""
    rules = APIS.get(provider.names, api)
    families = (*api.families, *rules.families)
    words = [api.name, *(m.group() for f in families if (m := re.match(r"[a-z]+", f.pattern)))]
    name = next(f"{word}-sim" for word in words if model_problem(rules.name, f"{word}-sim") is None)
    return f"{provider.prefix}/{name}"


def _simulated(api: ApiSpec) -> SimulatedApi:
    provider = next(p for p in PROVIDERS.values() if p.api == api.name and not p.generic)
    sim = simulated_apis.native(api.name)
    assert sim is not None, f"the simulated provider declares no API of its own for {api.name}"
    bare = next(a for a in simulated_apis.APIS if a.spec == BARE.name)
    # Its batches' routes are another API's where it says so (Claude's jobs on Vertex AI are Vertex's).
    routes = (*sim.routes, *(r for a in simulated_apis.APIS if a.name == sim.batches_at for r in a.routes))
    chat = next(r.name for r in (*routes, *bare.routes) if r.chat)
    create = next(r.name for r in routes if r.creates)
    return SimulatedApi(api.name, _served_model(api, provider), tuple(r.name for r in routes), create, chat)


SIMULATED_APIS = tuple(_simulated(a) for a in APIS.values() if a.simulated_native)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """(Autouse in each module that imports it.) Retry waits of ours and of the Gemini SDK are zero
    (its resumable upload sleeps by itself); no OpenAI variable or backend choice of the shell
    running the tests reaches a run."""
    monkeypatch.setattr(waits, "pause", lambda seconds: None)
    try:
        import google.genai._api_client as genai_client

        from lexpilot_batch.providers.google import client as google_client
    except ImportError:  # without google-genai, no Gemini scenario runs
        pass
    else:
        monkeypatch.setattr(google_client, "RETRY_DELAY", 0.0)
        clock = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
        clock.sleep = lambda seconds: None
        monkeypatch.setattr(genai_client, "time", clock)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LEXPILOT_EVAL_BACKEND", "LEXPILOT_USER_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    lower_minimums(monkeypatch)


def point_at(monkeypatch: pytest.MonkeyPatch, server: SimulatedServer) -> None:
    """Every provider's variables at the simulated server, as a user would set them for
    `serve-simulated`: OpenAI's at its routes, each native API's provider at that API's routes
    (`SimulatedServer.native_url`), each OpenAI-compatible platform the server serves at its own
    path, which ends as its real base URL does (`SimulatedServer.profile_url`: Ark's in
    /api/v3/batch, its batch chat route), so that each is answered with its platform's
    differences (`simulated.profiles`)."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-simulated")
    for provider in PROVIDERS.values():
        if APIS[provider.api].simulated_native:
            url = server.native_url(provider.api)
        elif provider.prefix in profiles.PROFILES:
            url = server.profile_url(provider.prefix)
        else:
            continue
        monkeypatch.setenv(provider.url_var, url)
        monkeypatch.setenv(provider.key_var, "sk-simulated")
    # AWS Bedrock's boto3 finds credentials and a Region in its own chain (`bedrock.aws`), and its
    # jobs' files go where BEDROCK_S3_URI says, run as BEDROCK_ROLE_ARN: a user's set-up, pointed here.
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "simulated"),
        ("AWS_SECRET_ACCESS_KEY", "sk-simulated"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_CONFIG_FILE", str(server.state_dir / "no-aws-config")),
        ("AWS_SHARED_CREDENTIALS_FILE", str(server.state_dir / "no-aws-credentials")),
        ("BEDROCK_S3_URI", "s3://lexpilot-study/batches"),
        ("BEDROCK_ROLE_ARN", "arn:aws:iam::123456789012:role/lexpilot-batch"),
    ):
        monkeypatch.setenv(name, value)
    # Vertex's credentials (Application Default Credentials) and bucket, at the same server.
    point_vertex_at(monkeypatch, server.state_dir, server.root_url)


def outcome(ws: Workspace) -> dict[str, Any]:
    """What a finished workspace holds: records, requests by stem (each API's lines, and their
    hashes, differ), files, thread statuses, the status page and the anomalies."""
    db = ws.store.conn
    return {
        "records": records(ws),
        "requests": {
            id_stem(r["custom_id"]): tuple(r)[1:]
            for r in db.execute(
                "SELECT custom_id, wave, step, attempt, status, error_kind, value, prompt_tokens, completion_tokens,"
                " reasoning_tokens, cached_tokens FROM requests"
            )
        },
        "files": [dict(r) for r in db.execute("SELECT * FROM files ORDER BY pk")],
        "threads": Counter(r[0] for r in db.execute("SELECT status FROM threads")),
        "status": detail.render(detail.collect(ws)),
        "anomalies": db.execute("SELECT COUNT(*) FROM anomalies").fetchone()[0],
        "root": ws.root,
    }


def run_on_routes(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    spec: RunSpec,
    faults: str = "",
    crash: type[BaseException] = ProviderError,
    **options: Any,
) -> dict[str, Any]:
    """`spec` through each provider's own routes of a simulated server started for it, each
    command that gives up (an outage longer than the SDK's retries, a `crash`) run again: the
    workspace's `outcome`, the server's call counts, how many commands stopped, the batches the
    server holds by platform, and the other batches the workspace set aside."""
    with SimulatedServer(root.parent / f"{root.name}-sim", parse_faults(faults)) as server:
        point_at(monkeypatch, server)
        with Workspace(root) as ws:
            options.setdefault("create_grace", 0.3)
            session = Session(ws, ProviderOptions(**options))
            try:
                prepare(ws, session, spec)
                stopped = finish_despite(ProviderError, crash)(ws, session)
            finally:
                session.close()
            assert server.store is not None
            held = Counter(r["sim"].get("profile") for r in server.store.batches_newest_first())
            others = [dict(r) for r in ws.store.conn.execute("SELECT * FROM other_batches")]
            return {
                **outcome(ws),
                "server": Counter(server.stats),
                "stopped": stopped,
                "held": held,
                "other_batches": others,
            }


def reported_costs(root: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> tuple[list[tuple], list[dict]]:
    """A small DCG study whose every role is the simulated API `name`'s model, on its routes: each
    answered request's (prompt tokens, completion tokens, cost kept) and the workspace's usage
    counts of each run, role and backend (`state.usage`), what the report prices."""
    [api] = [a for a in SIMULATED_APIS if a.name == name]
    spec = RunSpec(("r1",), (api.model,), "dcg", Settings(user_model=api.model, judge_model=api.model), limit=2)
    done = run_on_routes(root, monkeypatch, spec)
    with Workspace(root, writable=False) as ws:
        rows = ws.store.conn.execute(
            "SELECT prompt_tokens, completion_tokens, cost_usd FROM requests WHERE status = 'answered'"
        ).fetchall()
        usage = usage_by_run(ws.store.conn)
    assert rows and set(done["threads"]) == {"done"}
    return rows, [c for roles in usage.values() for backends in roles.values() for c in backends.values()]


def rehearse(root: Path, spec: RunSpec, **options: Any) -> dict[str, Any]:
    """`spec` rehearsed in-process (`--provider simulated`): each model on its own API's routes of
    the simulated provider (or its platform's path), as `point_at` sends it for real."""
    with Workspace(root) as ws:
        session = open_session(ws, **options)
        try:
            prepare(ws, session, spec)
            finish(ws, session)
        finally:
            session.close()
        return outcome(ws)


def run_native(root: Path, monkeypatch: pytest.MonkeyPatch, faults: str = "", models=MODELS, **options: Any) -> dict:
    """The Claude and Gemini study (`MODELS`, every task, LIMIT cases) through each provider's own
    routes (`run_on_routes`)."""
    spec = RunSpec(("r1",), tuple(models), "all", Settings(), limit=LIMIT)
    return run_on_routes(root, monkeypatch, spec, faults, **options)


def clean_native(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Claude and Gemini through their own routes, no fault (a module's `clean` fixture)."""
    with pytest.MonkeyPatch.context() as env:
        return run_native(tmp_path_factory.mktemp("clean") / "ws", env, models=(CLAUDE, GEMINI))
