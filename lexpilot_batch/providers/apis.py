"""The names the product gives API shapes and backends, each spelled once.

An API shape (`registry.Provider.api`) is the wire format of a provider's batch lines, results and
synchronous call: `openai` (OpenAI's Files + Batches and Chat Completions, and every provider that
copies them), `anthropic` (Message Batches and Messages), `google` (Gemini Batch Mode and
generateContent). A backend is how a role's requests travel: `batch` (the provider's batch API),
`sync` (its synchronous call, one request at a time), `manual` (the user runs a compiled file
elsewhere and ingests the output), `simulated` (the offline simulated provider).
"""

from __future__ import annotations

from lexpilot_batch.errors import ConfigError

OPENAI, ANTHROPIC, GOOGLE = "openai", "anthropic", "google"
APIS = (OPENAI, ANTHROPIC, GOOGLE)

BATCH, SYNC, MANUAL, SIMULATED = "batch", "sync", "manual", "simulated"
BACKENDS = (BATCH, SYNC, MANUAL, SIMULATED)
# The backends whose files become batches at a provider: what is billed at batch prices, what
# enqueued-token budgets count, what `--tail-sync` may move to `sync`.
BATCH_LIKE = frozenset({BATCH, SIMULATED})


def check_backend(value: str, role: str) -> str:
    """`value` if it names a backend; a `ConfigError` naming the role's option otherwise."""
    if value not in BACKENDS:
        raise ConfigError(
            f"backend {value!r} for the {role} role is unknown; choose one of {', '.join(BACKENDS)} "
            f"(--{role}-backend or LEXPILOT_{role.upper()}_BACKEND)"
        )
    return value
