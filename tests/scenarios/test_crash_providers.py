"""One workspace, one model on every native batch API the simulated provider serves, killed with
SIGKILL at random instants: run again until it finishes, it holds the records of an uninterrupted
run, and the provider holds one batch per workspace file.

The provider runs in each command's process (`--provider simulated`), so every kill takes it down
too: what it persisted (`simulated/store.py`) is all the next command finds, as after a provider
restart. Its answers and faults depend only on (seed, custom_id, prompt) and the batches' contents,
so the killed workspace and the reference must agree request for request. `MODELS` names one model
per API; a native API added to the registry without one here fails the first test.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import native_simulated
from lexpilot_batch.simulated.store import Store as ProviderStore
from tests.helpers.crash import (
    ONE_REQUEST_BATCHES_ENV,
    Client,
    KillLog,
    base_env,
    check_nothing_in_flight,
    check_same_as_reference,
    final_state,
    open_db,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL semantics; proc.kill() is TerminateProcess")

SEED = 13
FAULTS = "line_error=0.05,truncate=0.02,malformed_judge=0.05,expire_batch=0.15,latency=0.05,seed=7"
MODELS = (
    "anthropic/claude-sim",
    "google/gemini-sim",
    "mistral/mistral-sim",
    "together/llama-sim",
    "openrouter/x/sim",
    "fireworks/accounts/fireworks/models/glm-5p3",
    "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0",
    "vertex/gemini-sim",
    "vertex-anthropic/claude-haiku-4-5@20251001",
    "xai/xai-sim",
)
PREPARE = ("prepare", "--stage", "all", "--run-id", "r1", *(a for m in MODELS for a in ("--model", m)), "--limit", "3")
ADVANCE = ("poll-and-advance", "--submit", "--wait", "--poll-interval", "0.05", "--create-grace", "0.5")
IN_PROCESS = ["--provider", "simulated", "--sim-seed", str(SEED), "--sim-faults", FAULTS]
# A one-request batch everywhere: below AWS Bedrock's 100 records a group goes through its call.
ENV = base_env(**{ONE_REQUEST_BATCHES_ENV: "1"})


def _api(model: str) -> str:
    provider = parse_model(model).provider
    assert provider is not None, model
    return provider.api


def test_every_native_batch_api_has_a_model_in_the_study() -> None:
    apis = {_api(m) for m in MODELS}
    assert apis == set(native_simulated()), f"native APIs without a model here: {set(native_simulated()) - apis}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[dict, float]:
    """The uninterrupted run's records, and the seconds its `poll-and-advance` took on this machine
    now (the kills' delays are drawn as shares of it: the same study takes 10 s alone and three
    times that beside the rest of the slow suite)."""
    base = tmp_path_factory.mktemp("providers-reference")
    client = Client(base / "ws", ENV, extra=IN_PROCESS, log_path=base / "ws.log")
    client.run(*PREPARE)
    start = time.monotonic()
    client.run(*ADVANCE, timeout=300.0)
    seconds = time.monotonic() - start
    state = final_state(base / "ws")
    assert Counter(s for s, _, _ in state["threads"].values()) == Counter(done=len(MODELS) * 3 * 6)
    assert any(attempt > 1 for _, _, attempt, *_ in state["requests"].values())  # the faults forced retries
    return state, seconds


def check_one_batch_per_file(root: Path) -> None:
    """At the provider, no custom_id was sent in two batches, and there are as many batches (less
    those refused for a quota, which ran nothing) as the workspace has batch files."""
    db = open_db(root)
    assert db is not None
    try:
        batch_files = db.execute("SELECT COUNT(*) FROM files WHERE backend = 'simulated'").fetchone()[0]
        refused = db.execute("SELECT COUNT(*) FROM other_batches WHERE why = 'token_limit'").fetchone()[0]
    finally:
        db.close()
    store = ProviderStore(root / "state" / "simulated")
    owner: dict[str, str] = {}
    batches = store.batches_newest_first()
    for record in batches:
        batch_id = record["batch"]["id"]
        for raw in store.file_bytes(record["batch"]["input_file_id"]).decode("utf-8").splitlines():
            cid = json.loads(raw)["custom_id"]
            assert cid not in owner, f"{cid} was sent in batch {owner[cid]} and again in {batch_id}"
            owner[cid] = batch_id
    apis = Counter(record["sim"].get("native", {}).get("api") for record in batches)
    assert len(set(apis) - {None}) == len(MODELS), f"batches of each native API expected: {apis}"  # None: OpenAI's
    assert len(batches) - refused == batch_files, f"{len(batches)} batches at the provider for {batch_files} files"


@pytest.mark.slow  # an uninterrupted study and a killed one over every native API: a few minutes
def test_sigkill_at_random_instants_across_every_native_api(reference, tmp_path):
    records, seconds = reference
    rng = random.Random(SEED)
    # The delays are shares of the reference's time on this machine; when the load falls between the
    # two (other suites sharing its two cores end), the study outruns them and few kills land. Each
    # campaign is checked; one at half the time scale follows until one lands at least 4 kills.
    for attempt, scale in enumerate((1.0, 0.5, 0.25)):
        root = tmp_path / f"ws{attempt}"
        landed, log = _kill_campaign(
            Client(root, ENV, extra=IN_PROCESS, log_path=tmp_path / f"ws{attempt}.log"), rng, seconds * scale
        )
        check_same_as_reference(root, records)
        check_one_batch_per_file(root)
        if landed >= 4:
            break
    assert landed >= 4, log.summary("too few kills landed before the study finished, at every time scale")


def _kill_campaign(client: Client, rng: random.Random, seconds: float) -> tuple[int, KillLog]:
    """Up to 20 `poll-and-advance` commands killed at 10-40% of `seconds`, then one left to finish."""
    log = KillLog(client.root, client.root / "state" / "simulated")
    client.run(*PREPARE)
    landed = 0
    for _ in range(20):
        # A share of an uninterrupted run: each command first starts its provider, then sends and polls.
        delay = rng.uniform(0.1, 0.4) * seconds
        log.before()
        if not client.kill_after(delay, *ADVANCE):
            break
        landed += 1
        log.landed(f"random {delay:.2f}s")
    client.run(*ADVANCE, timeout=300.0)
    print(log.summary(f"every native API, random instants, {landed} kills"))
    check_nothing_in_flight(client)
    return landed, log
