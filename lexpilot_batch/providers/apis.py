"""The names the product gives API shapes and backends, each spelled once.

An API shape (`registry.Provider.api`) is the wire format of a provider's batch lines, results and
synchronous call: `openai` (OpenAI's Files + Batches and Chat Completions, and every provider that
copies them), `anthropic` (Message Batches and Messages), `google` (Gemini Batch Mode and
generateContent), `mistral` (Mistral's Batch API: files and batch jobs, and chat completions),
`together` (Together AI's Batch API: signed-URL file uploads and batch jobs, and chat completions). A
backend is how a role's requests travel: `batch` (the provider's batch API), `sync` (its synchronous call, one request at a time), `manual` (the user runs a compiled file
elsewhere and ingests the output), `simulated` (the offline simulated provider).
"""

from __future__ import annotations

from typing import Final, Literal

from lexpilot_batch.errors import ConfigError

# The types, for mypy to check a value where it is stored or compared; the constants, for the code.
Api = Literal["openai", "anthropic", "google", "mistral", "together"]
Backend = Literal["batch", "sync", "manual", "simulated"]

OPENAI: Final = "openai"
ANTHROPIC: Final = "anthropic"
GOOGLE: Final = "google"
MISTRAL: Final = "mistral"
TOGETHER: Final = "together"
APIS: Final[tuple[Api, ...]] = (OPENAI, ANTHROPIC, GOOGLE, MISTRAL, TOGETHER)

# The APIs other than OpenAI's that the simulated provider speaks on their own routes: under
# `--provider simulated` a model of theirs is rehearsed through them, its own backend and SDK, as its
# real run sends it (`routes`).
SIMULATED_NATIVE: Final = frozenset({ANTHROPIC, GOOGLE, MISTRAL, TOGETHER})

BATCH: Final = "batch"
SYNC: Final = "sync"
MANUAL: Final = "manual"
SIMULATED: Final = "simulated"
BACKENDS: Final[tuple[Backend, ...]] = (BATCH, SYNC, MANUAL, SIMULATED)
# The backends whose files become batches at a provider: what is billed at batch prices, what
# enqueued-token budgets count, what `--tail-sync` may move to `sync`.
BATCH_LIKE = frozenset({BATCH, SIMULATED})
# A wave's group of a batched route may also travel on its provider's flex tier (`providers.flex`):
# the sync runner with its API's tier field (`flex.tier_fields`), billed at batch prices. Never a role's own backend.
FLEX: Final = "flex"
# The backends whose files the sync runner sends here, one request at a time (`providers.sync`).
RUN_HERE = frozenset({SYNC, FLEX})
# What is billed at batch prices (`prices`), and the providers' batch discount: half the
# list price at OpenAI, Anthropic and Gemini alike, their flex tiers too.
BATCH_PRICED = BATCH_LIKE | {FLEX}
BATCH_DISCOUNT = 0.5


def check_backend(value: str, role: str) -> Backend:
    """`value` if it names a backend; a `ConfigError` naming the role's option otherwise."""
    if value not in BACKENDS:
        raise ConfigError(
            f"backend {value!r} for the {role} role is unknown; choose one of {', '.join(BACKENDS)} "
            f"(--{role}-backend or LEXPILOT_{role.upper()}_BACKEND)"
        )
    return value
