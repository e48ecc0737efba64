"""Claude and Gemini through their native batch APIs, offline: the real `anthropic` and `google-genai`
SDKs against the simulated provider (one port, OpenAI's, Anthropic's and Gemini's routes), in the
same waves as an `openai/` model, with the records of the same study rehearsed in-process
(`--provider simulated`, which sends each of them through its own API's routes too)."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.engine import finish, open_session
from tests.helpers.native import (  # noqa: F401 - the autouse `quick` is a fixture
    CLAUDE,
    GEMINI,
    GPT,
    LIMIT,
    MODELS,
    clean_native,
    point_at,
    quick,
    run_native,
)
from tests.helpers.native import (
    outcome as workspace_outcome,
)

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine import poll, submit
from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.errors import ConfigError, ProviderError  # noqa: E402
from lexpilot_batch.providers.sync import runner as sync_module
from lexpilot_batch.simulated import SimulatedServer, parse_faults  # noqa: E402
from lexpilot_batch.simulated.apis import ROUTE_NAMES  # noqa: E402
from lexpilot_batch.state.compaction import read_saved
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict:
    return clean_native(tmp_path_factory)


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory) -> dict:
    """The same study rehearsed in-process (`--provider simulated`): each model on its own API's
    routes of the simulated provider (or its platform's path), as the variables send it above."""
    with Workspace(tmp_path_factory.mktemp("rehearsed") / "ws") as ws:
        session = open_session(ws)
        try:
            prepare(ws, session, RunSpec(("r1",), MODELS, "all", Settings(), limit=LIMIT))
            finish(ws, session)
        finally:
            session.close()
        return workspace_outcome(ws)


def test_claude_and_gemini_in_the_same_waves_give_the_records_of_the_in_process_rehearsal(
    tmp_path, monkeypatch, rehearsed
):
    native = run_native(tmp_path / "ws", monkeypatch)
    assert native["threads"] == rehearsed["threads"] and set(native["threads"]) == {"done"}
    assert native["records"] == rehearsed["records"]
    # Request for request: the same waves, steps, answers and token counts (usage mapped back).
    assert native["requests"] == rehearsed["requests"]
    assert native["anomalies"] == 0
    # Every wave sent each evaluated model's requests through its own API: the same waves.
    by_wave: dict[int, set[str]] = {}
    for f in native["files"]:
        by_wave.setdefault(f["wave"], set()).add(f["model"])
    assert sum(1 for models in by_wave.values() if set(MODELS) <= models) >= 3
    shapes = {}
    for f in native["files"]:
        # Finished waves' files are kept compressed (`compaction`), the native ones too: read through it.
        saved = json.loads(read_saved(native["root"] / f["output_path"]).decode("utf-8").splitlines()[0])
        sent = json.loads(read_saved(native["root"] / f["path"]).decode("utf-8").splitlines()[0])
        shapes[f["model"]] = (sorted(sent), sorted(saved))
        if f["model"] == CLAUDE:
            assert f["batch_id"].startswith("msgbatch_") and f["provider_file_id"].startswith("inline:")
        if f["model"] == GEMINI:
            assert f["batch_id"].startswith("batches/") and f["provider_file_id"].startswith("files/")
    # Lines in each API's own shape, results saved as the provider sent them.
    assert shapes[CLAUDE] == (["custom_id", "params"], ["custom_id", "result"])
    assert shapes[GEMINI] == (["key", "request"], ["key", "response"])
    assert shapes[GPT] == (["body", "custom_id", "method", "url"], ["custom_id", "error", "id", "response"])
    # The keys (`point_at`) reached the providers and no file of the workspace.
    assert not [p for p in native["root"].rglob("*") if p.is_file() and b"sk-simulated" in p.read_bytes()]


def test_a_rehearsal_sends_claude_and_gemini_through_their_own_apis(rehearsed):
    """`--provider simulated` rehearses each model as its real run sends it: Claude's waves as
    Message Batches, Gemini's through the File API and Batch Mode, each file naming its API's routes
    (`simulated/<api>`), its lines and saved results in that API's shape; the OpenAI model on the
    OpenAI routes."""
    for f in rehearsed["files"]:
        sent = json.loads(read_saved(rehearsed["root"] / f["path"]).decode("utf-8").splitlines()[0])
        saved = json.loads(read_saved(rehearsed["root"] / f["output_path"]).decode("utf-8").splitlines()[0])
        if f["model"] == CLAUDE:
            assert f["endpoint"] == "simulated/anthropic" and f["batch_id"].startswith("msgbatch_")
            assert (sorted(sent), sorted(saved)) == (["custom_id", "params"], ["custom_id", "result"])
        elif f["model"] == GEMINI:
            assert f["endpoint"] == "simulated/google" and f["batch_id"].startswith("batches/")
            assert (sorted(sent), sorted(saved)) == (["key", "request"], ["key", "response"])
        else:
            assert f["endpoint"] == "simulated" and f["batch_id"].startswith("batch_")
            assert sorted(sent) == ["body", "custom_id", "method", "url"]


@pytest.mark.parametrize("old_rounds", [0, 1, 2], ids=["compiled", "submitted", "two-rounds"])
def test_a_rehearsal_begun_on_the_openai_routes_goes_on_after_the_upgrade(tmp_path, monkeypatch, rehearsed, old_rounds):
    """A workspace whose rehearsal an earlier version began, which sent Claude and Gemini through
    the OpenAI routes (their files naming `simulated`): those files are sent, polled and read there,
    with the OpenAI routes' backend and limits, while the waves compiled after go to the native
    routes; the records are the rehearsal's. (Once, an old file got the native backend at the OpenAI
    URL, and every poll failed with 404 on /v1/v1/messages/batches.)"""
    from lexpilot_batch.engine.loop import poll_and_advance
    from lexpilot_batch.providers.registry import api_spec
    from lexpilot_batch.providers.routing import routes

    with Workspace(tmp_path / "ws") as ws:
        with monkeypatch.context() as earlier:
            # every model on the OpenAI routes, as before the native APIs had routes of their own
            earlier.setattr(routes, "api_spec", lambda api: replace(api_spec(api), simulated_native=False))
            session = open_session(ws)
            try:
                prepare(ws, session, RunSpec(("r1",), MODELS, "all", Settings(), limit=LIMIT))
                for _ in range(old_rounds):
                    poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            finally:
                session.close()
        old = {r["pk"] for r in ws.store.conn.execute("SELECT pk FROM files")}
        session = open_session(ws)
        try:
            for row in ws.store.conn.execute("SELECT * FROM files WHERE model = ?", (CLAUDE,)):
                route = session.file_route(row)
                assert (route.api, route.endpoint.base_url) == ("openai", "simulated")
                assert type(session.batch_backend(row)).__name__ == "OpenAIBatchBackend"
            finish(ws, session)
        finally:
            session.close()
        outcome = workspace_outcome(ws)
    assert outcome["records"] == rehearsed["records"] and outcome["anomalies"] == 0
    endpoints = {(f["model"], f["pk"] in old, f["endpoint"]) for f in outcome["files"] if f["model"] != GPT}
    assert {(CLAUDE, True, "simulated"), (CLAUDE, False, "simulated/anthropic")} <= endpoints
    assert {(GEMINI, True, "simulated"), (GEMINI, False, "simulated/google")} <= endpoints
    assert all(f["batch_status"] == "completed" for f in outcome["files"])


# Per-request faults drawn on the workspace's own custom_ids, batch faults on the batch's content,
# and HTTP 429, 500 and 529 on every route of both native APIs (uploads, creates, polls, listings,
# results, downloads and cancels), sometimes beyond the SDKs' retries. Unusable answers (truncated,
# malformed, refused) share a budget of three attempts: kept rare here (their mapping is
# `providers/anthropic/test_lines.py`'s and `providers/google/test_lines.py`'s), so that no thread
# runs out of them.
NATIVE_ROUTES = [r for r in ROUTE_NAMES if r.startswith(("anthropic_", "gemini_"))]
FAULTS = (
    "line_error=0.1,truncate=0.02,malformed_judge=0.03,refusal=0.02,expire_batch=0.15,"
    f"http_429=0.08,http_500=0.08,http_529=0.08,http_routes={'+'.join(NATIVE_ROUTES)},latency=0.05,seed=5"
)


@pytest.mark.slow  # a fault campaign over both native APIs
def test_faults_on_every_native_route_change_no_record(tmp_path, monkeypatch, clean):
    faulty = run_native(tmp_path / "faulty", monkeypatch, FAULTS, models=(CLAUDE, GEMINI), retries=8)
    assert set(faulty["threads"]) == {"done"}
    assert faulty["records"] == clean["records"]
    retried = [v for v in faulty["requests"].values() if v[2] > 1]
    kinds = Counter(v[4] for v in faulty["requests"].values() if v[3] == "failed")
    assert len(retried) >= 10 and {"transport", "invalid", "unexecuted", "refusal"} <= set(kinds), kinds
    assert faulty["anomalies"] == 0
    stats = faulty["server"]
    # Drawn per call, so which calls they strike depends on timing: many did, on both APIs (each
    # route's outage is the next test's).
    assert all(stats[fault] >= 5 for fault in ("http_429", "http_500", "http_529")), stats
    assert {r.split("_")[0] for r in NATIVE_ROUTES if stats[f"http_500:{r}"] + stats[f"http_529:{r}"]} == {
        "anthropic",
        "gemini",
    }
    # Creating is not idempotent: no SDK retried a create blindly; the engine looked first.
    assert stats["retried:anthropic_create"] == 0


OUTAGES = [
    ("anthropic_create", "creating a Message Batch"),
    ("anthropic_retrieve", "polling Message Batch"),
    ("anthropic_results", "downloading the results of Message Batch"),
    ("gemini_upload_start", "uploading"),
    ("gemini_create", "creating a Gemini batch"),
    ("gemini_get", "polling Gemini batch"),
    ("gemini_download", "downloading file files/"),
]


def test_an_outage_of_each_native_route_stops_the_command_and_loses_nothing(tmp_path, monkeypatch, clean):
    """HTTP 500 on every call of one route at a time, beyond the SDKs' retries: each command stops,
    saying nothing was lost; with the provider back, the next one finishes with the fault-free records."""
    stopped: list[str] = []
    with Workspace(tmp_path / "ws") as ws:
        for route, _ in [*OUTAGES, (None, "")]:
            faults = f"http_500=1,retry_after=0.001,http_routes={route}" if route else ""
            with SimulatedServer(tmp_path / "sim", parse_faults(faults)) as server:
                point_at(monkeypatch, server)
                session = Session(ws, ProviderOptions(create_grace=0.0))
                try:
                    if not ws.store.conn.execute("SELECT 1 FROM runs").fetchone():
                        prepare(ws, session, RunSpec(("r1",), (CLAUDE, GEMINI), "all", Settings(), limit=LIMIT))
                    if route is None:
                        finish(ws, session)
                    else:
                        with pytest.raises(ProviderError) as err:
                            finish(ws, session)
                        stopped.append(str(err.value))
                finally:
                    session.close()
        outcome = workspace_outcome(ws)
    for (route, what), message in zip(OUTAGES, stopped, strict=True):
        assert message.startswith(what) and "HTTP 500" in message and "nothing was lost" in message, (route, message)
    assert outcome["records"] == clean["records"] and outcome["anomalies"] == 0


def test_native_downloads_that_break_off_are_fetched_again(tmp_path, monkeypatch, clean):
    """Anthropic's results stream and Gemini's responses file broken off half-way (`cut_download`):
    nothing partial is saved; each is fetched again whole, with the fault-free records."""
    faulty = run_native(tmp_path / "ws", monkeypatch, "cut_download=0.5,seed=3", models=(CLAUDE, GEMINI))
    assert faulty["records"] == clean["records"] and faulty["anomalies"] == 0
    stats = faulty["server"]
    assert stats["cut_download:anthropic_results"] >= 1 and stats["cut_download:gemini_download"] >= 1, stats
    # Anthropic's fetched again by the engine (`save_streamed`), each a new call: its SDK retried none
    # (Gemini's by its backend's `_again`; google-genai sends no retry count to tell).
    assert stats["retried:anthropic_results"] == 0, stats


def run_gemini_on_flex(tmp_path, monkeypatch, faults: str) -> dict:
    """A Gemini model alone, `--tail auto` sending every wave it can through flex (forced on: the
    simulator's `gemini-sim` is in no flex table), with no wait between refusals."""
    monkeypatch.setattr(sync_module, "FLEX_WAIT", 0.0)
    return run_native(
        tmp_path / "ws",
        monkeypatch,
        faults,
        models=(GEMINI,),
        tail="auto",
        expect_latency={"batch": 1e6, "flex": 1.0},
        flex={GEMINI: True},
    )


def test_gemini_groups_on_the_flex_tier_speak_gemini_and_give_the_same_records(tmp_path, monkeypatch, clean):
    """`--tail auto` sending a Gemini model's groups through generateContent on the flex tier
    (`serviceTier`, its REST name), refused half the time (backed off, no attempt used): the
    fault-free records. (Once, such a flex file was read as OpenAI lines and refused as damaged,
    and the tier went as `service_tier`, which the generateContent contract refuses.)"""
    flexed = run_gemini_on_flex(tmp_path, monkeypatch, "flex_429=0.5,seed=3")
    assert flexed["records"] == {k: v for k, v in clean["records"].items() if k[1] == GEMINI}
    assert flexed["anomalies"] == 0
    # Flex where it spares the wave a batch: where the User Model's or the judge's batch is due
    # anyway (`DeepSeek-*`, batched at the server's OpenAI routes), Gemini's group waits with it.
    travelled = {(f["backend"], f["batch_status"]) for f in flexed["files"] if f["model"] == GEMINI}
    assert ("flex", "completed") in travelled and travelled <= {("flex", "completed"), ("batch", "completed")}
    stats = flexed["server"]
    assert stats["flex_answers:gemini_generate"] > 0 and stats["flex_429:gemini_generate"] > 0, stats
    assert all(v[2] == 1 for v in flexed["requests"].values())  # no request asked twice: refusals used no attempt


@pytest.mark.slow  # every flex call refused, FLEX_ROUNDS times per request, through the SDK's own retries
def test_gemini_groups_flex_keeps_refusing_fall_back_to_gemini_batches(tmp_path, monkeypatch, clean):
    """Flex refusing every call (`flex_429=1`) on generateContent: the first flex file falls back
    (cancelled, its requests asked again as Gemini batches, no attempt used up), and the model
    travels by Batch Mode from then on; the fault-free records."""
    refused = run_gemini_on_flex(tmp_path, monkeypatch, "flex_429=1")
    assert refused["records"] == {k: v for k, v in clean["records"].items() if k[1] == GEMINI}
    assert refused["anomalies"] == 0 and refused["server"]["flex_answers:gemini_generate"] == 0
    files = [f for f in refused["files"] if f["model"] == GEMINI]
    flexed = [f for f in files if f["backend"] == "flex"]
    assert len(flexed) == 1 and flexed[0]["batch_status"] == "cancelled"
    later = [f for f in files if f["wave"] > flexed[0]["wave"]]
    assert later and all(f["backend"] == "batch" and f["batch_id"].startswith("batches/") for f in later)
    never_ran = [v for v in refused["requests"].values() if v[0] == flexed[0]["wave"] and v[3] == "failed"]
    assert never_ran and {v[4] for v in never_ran} == {"unexecuted"}


@pytest.mark.slow  # a stalled batch waited out on both native APIs (the wave age itself: engine/test_poll.py)
def test_a_stalled_batch_is_cancelled_and_keeps_what_it_finished(tmp_path, monkeypatch, clean):
    """`--max-wave-age` cancels batches that stopped part-way: Anthropic's end with `canceled`
    requests, Gemini's with a responses file of what ran; the rest is sent again, using up nothing."""
    stalled = run_native(
        tmp_path / "stalled", monkeypatch, "stall_batch=0.3,seed=3", models=(CLAUDE, GEMINI), max_wave_age=0.0
    )
    assert stalled["records"] == clean["records"]
    cancelled = [f for f in stalled["files"] if f["batch_status"] == "cancelled"]
    assert {f["model"] for f in cancelled} >= {CLAUDE, GEMINI}
    never_run = [v for v in stalled["requests"].values() if v[3] == "failed" and v[4] == "unexecuted"]
    assert never_run


def test_a_missing_sdk_names_its_extra(monkeypatch):
    import sys

    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.google.batch import GoogleBatchBackend
    from lexpilot_batch.providers.registry import PROFILES
    from lexpilot_batch.providers.routing.endpoints import Endpoint

    for module in ("anthropic", "google.genai"):
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    endpoint = Endpoint("eval", "http://127.0.0.1:9", "KEY", "sk-x")
    with pytest.raises(ConfigError, match=r'pip install "lexpilot-batch\[anthropic\]"'):
        AnthropicBatchBackend(endpoint, PROFILES["anthropic"])
    with pytest.raises(ConfigError, match=r'pip install "lexpilot-batch\[google\]"'):
        GoogleBatchBackend(endpoint, PROFILES["google"])


@pytest.mark.parametrize("why", ["missing", "too old"])
@pytest.mark.parametrize(
    ("model", "module", "extra"), [(CLAUDE, "anthropic", "anthropic"), (GEMINI, "google.genai", "google")]
)
def test_a_missing_sdk_is_named_before_anything_is_compiled_a_rehearsal_too(
    tmp_path, monkeypatch, model, module, extra, why
):
    """`prepare` of a Claude or Gemini model without its SDK, or with one older than its extra
    asks, rehearsed or sent for real: refused before any run is registered, naming the extra (it
    used to stop at the first submit). An estimate (`prepare --dry-run`) sends nothing and needs
    none."""
    import importlib.metadata
    import sys

    from lexpilot_batch.estimate import dry_run_prepare

    if why == "missing":
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    else:
        sdk = {"anthropic": "anthropic", "google": "google-genai"}[extra]
        real = importlib.metadata.version
        monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.1.0" if name == sdk else real(name))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-x")
    monkeypatch.setenv("GOOGLE_API_KEY", "sk-x")
    spec = RunSpec(("r1",), (model,), "all", Settings(), limit=LIMIT)
    with Workspace(tmp_path / "ws") as ws:
        for rehearsal in (True, False):
            session = open_session(ws) if rehearsal else Session(ws, ProviderOptions())
            try:
                said = (
                    rf'{sdk} 0\.1\.0 is installed: python -m pip install "{sdk}>='
                    if why == "too old"
                    else rf"lexpilot-batch\[{extra}\]"
                )
                with pytest.raises(ConfigError, match=rf"{model} \(eval role\): .*{said}.*Nothing was"):
                    prepare(ws, session, spec)
                assert dry_run_prepare(ws, session, spec).runs  # the projection is made
            finally:
                session.close()
        assert ws.store.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
        assert ws.store.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0] == 0
        # The other model's SDK is there: it is prepared.
        session = open_session(ws)
        try:
            prepare(
                ws,
                session,
                RunSpec(("r1",), ({CLAUDE: GEMINI, GEMINI: CLAUDE}[model],), "all", Settings(), limit=LIMIT),
            )
        finally:
            session.close()
        assert ws.store.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_an_untagged_create_whose_answer_was_lost_among_strangers_is_told_by_its_results(tmp_path, monkeypatch, clean):
    """Message Batches carry no tag: when another client created a batch of the same size while the
    answer to ours was lost, neither is adopted nor is ours created again until they end; their
    results (our ids carry the workspace's tag) then tell which is ours."""
    from lexpilot_batch.engine.loop import submit
    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.batch import CreateUncertain

    real = AnthropicBatchBackend.create
    strangers: list[str] = []

    def create_lost_among_strangers(self, input_file_id, metadata, endpoint=None, source=None):
        ours = real(self, input_file_id, metadata, endpoint, source)
        if not strangers:  # the first create: a stranger's batch of the same size appears beside it
            lines = [json.loads(raw) for raw in source.path.read_text("utf-8").splitlines()]
            requests = [{**line, "custom_id": "ffffffff" + line["custom_id"][8:]} for line in lines]
            strangers.append(self.client.messages.batches.create(requests=requests).id)
            raise CreateUncertain("the answer was lost")
        return ours

    monkeypatch.setattr(AnthropicBatchBackend, "create", create_lost_among_strangers)
    with Workspace(tmp_path / "ws") as ws:
        with SimulatedServer(tmp_path / "sim", parse_faults("latency=0.3")) as server:  # batches in flight a while
            point_at(monkeypatch, server)
            session = Session(ws, ProviderOptions(create_grace=0.0))
            try:
                prepare(ws, session, RunSpec(("r1",), (CLAUDE,), "all", Settings(), limit=LIMIT))
                first = submit(ws, session)
                assert len(first.unresolved) == 1 and "told by its results once they end" in first.unresolved[0]
                time.sleep(0.4)  # both batches end
                again = submit(ws, session)
                assert not again.unresolved and len(again.adopted) == 1
            finally:
                session.close()
        with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:  # the same provider, quicker
            point_at(monkeypatch, server)
            session = Session(ws, ProviderOptions(create_grace=0.0))
            try:
                finish(ws, session)
            finally:
                session.close()
            outcome = workspace_outcome(ws)
            import anthropic

            listed = {b.id for b in anthropic.Anthropic(base_url=server.root_url, api_key="k").messages.batches.list()}
    recorded = {f["batch_id"] for f in outcome["files"] if f["model"] == CLAUDE}
    assert listed == recorded | set(strangers)  # ours adopted, the stranger's left alone, none created twice
    assert outcome["records"] == {k: v for k, v in clean["records"].items() if k[1] == CLAUDE}


def test_doctor_reads_saved_native_results_in_their_own_shape(tmp_path, monkeypatch):
    """Results downloaded and not yet ingested are checked as their API's lines: whole ones pass,
    a line cut in half is found."""
    from lexpilot_batch import doctor
    from lexpilot_batch.engine.ingest import IngestStats

    monkeypatch.setattr(poll, "ingest_file", lambda ws, row: IngestStats())  # saved, never applied
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        point_at(monkeypatch, server)
        with Workspace(tmp_path / "ws") as ws:
            session = Session(ws, ProviderOptions())
            try:
                prepare(ws, session, RunSpec(("r1",), (CLAUDE, GEMINI), "lca", Settings(), limit=2))
                for _ in range(50):
                    submit.submit_files(ws, session)
                    poll.poll_files(ws, session)
                    rows = ws.store.conn.execute("SELECT status, output_path FROM files").fetchall()
                    if {r["status"] for r in rows} == {"downloaded"}:
                        break
                    time.sleep(0.02)
            finally:
                session.close()
            assert len(rows) == 2 and doctor.diagnose(ws) == []
            saved = ws.path(rows[0]["output_path"])
            saved.write_bytes(saved.read_bytes()[:-40])
            assert [f.kind for f in doctor.diagnose(ws)] == ["result_file_damaged"]


NATIVE_FILES = "SELECT f.*, w.closed_at FROM files f JOIN waves w ON w.n = f.wave WHERE f.model IN (?, ?)"


def test_native_waves_are_compacted_and_read_back_as_they_were(tmp_path, monkeypatch):
    """Compaction and the native backends: once a wave's batches are ingested, its request files
    (Claude's sent inline, Gemini's uploaded) and the results saved in each API's own shape are
    kept compressed, while the open wave's stay plain for the creates that read them; doctor, both
    exports, the report and every saved file read the same as uncompressed."""
    from lexpilot_batch.engine.loop import poll_and_advance
    from lexpilot_batch.state import compaction
    from tests.helpers.read_back import read_back

    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        point_at(monkeypatch, server)
        with Workspace(tmp_path / "ws") as ws:
            db = ws.store.conn
            session = Session(ws, ProviderOptions(create_grace=0.3))
            try:
                prepare(ws, session, RunSpec(("r1",), (CLAUDE, GEMINI), "all", Settings(), limit=3))
                for _ in range(100):  # until a wave of theirs is closed and a later one's batches run
                    poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
                    native = [dict(r) for r in db.execute(NATIVE_FILES, (CLAUDE, GEMINI))]
                    closed = [f for f in native if f["closed_at"] is not None]
                    running = [f for f in native if f["closed_at"] is None and f["status"] == "submitted"]
                    if closed and running:
                        break
                    time.sleep(0.02)
                assert {f["model"] for f in closed} == {f["model"] for f in running} == {CLAUDE, GEMINI}
                for f in closed:
                    for rel in (f["path"], f["output_path"]):
                        assert not ws.path(rel).exists() and compaction.stored(ws.path(rel)).exists(), rel
                for f in running:  # still plain: Claude's is read into each create, Gemini's uploaded
                    assert ws.path(f["path"]).exists() and not compaction.stored(ws.path(f["path"])).exists()
                for _ in range(200):  # the rest left uncompressed
                    left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0, compact=False)
                    if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                        break
                    time.sleep(0.02)
            finally:
                session.close()
            assert {r[0] for r in db.execute("SELECT status FROM threads")} == {"done"}
            plain = read_back(ws, tmp_path / "plain")
            stats = compaction.compact_finished_waves(ws)
            assert stats.files > 0 and stats.skipped == []
            assert list(ws.root.rglob("*.jsonl")) == []  # every wave is finished: everything compacted
            packed = read_back(ws, tmp_path / "packed")
            assert compaction.verify(ws) == [] and packed["findings"] == plain["findings"] == []
            assert packed == plain  # exports byte for byte, the report, every saved file's bytes


def test_another_workspaces_results_are_never_applied(tmp_path, monkeypatch, clean):
    """Claude's Message Batches results and Gemini's responses files, each read as OpenAI lines first
    (`providers.shapes`): another workspace's (the same run id over the same cases in another order)
    in front of ours. A Gemini line's key is the custom_id itself; a Claude id carries the tag twice."""
    from tests.helpers.faults import name_of, reversed_sample, saved_output_lines

    models = (CLAUDE, GEMINI)
    other = tmp_path / "other"
    with SimulatedServer(tmp_path / "other-sim") as server, pytest.MonkeyPatch.context() as env:
        point_at(env, server)
        with Workspace(other) as ws:
            session = Session(ws, ProviderOptions(create_grace=0.3))
            spec = RunSpec(("r1",), models, "all", Settings(), limit=LIMIT, dataset=reversed_sample(tmp_path))
            prepare(ws, session, spec)
            finish(ws, session)
            session.close()
    theirs = saved_output_lines(other)
    put: Counter = Counter()

    def prepending(real):
        def download(self, file_id: str, dest: Path) -> None:
            real(self, file_id, dest)
            name = name_of(dest)
            if name in theirs and not put[name]:
                put[name] = len(theirs[name])
                dest.write_bytes(b"".join(theirs[name]) + dest.read_bytes())

        return download

    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.google.batch import GoogleBatchBackend

    monkeypatch.setattr(AnthropicBatchBackend, "download", prepending(AnthropicBatchBackend.download))
    monkeypatch.setattr(GoogleBatchBackend, "download", prepending(GoogleBatchBackend.download))
    outcome = run_native(tmp_path / "ws", monkeypatch, models=models)
    assert outcome["records"] == clean["records"] and outcome["requests"] == clean["requests"]
    assert {name.split("__")[1].split("-")[0] for name in put} == {"anthropic", "google"}  # both APIs
    assert outcome["anomalies"] == sum(put.values())
    with Workspace(outcome["root"], writable=False) as ws:
        kinds = Counter(r[0] for r in ws.store.conn.execute("SELECT kind FROM anomalies"))
    assert kinds == {"foreign": sum(put.values())}
