"""The backends a role's requests travel on, each spelled once.

`batch` (the provider's batch API), `sync` (its synchronous call, one request at a time), `manual`
(the user runs a compiled file elsewhere and ingests the output), `simulated` (the offline simulated
provider), and `flex` (a wave's group of a batched route sent through the synchronous call on the
provider's flex tier, `routing.flex`). Which API shape a request speaks is its provider's
declaration (`spec.ApiSpec`, `registry`), not a backend.
"""

from __future__ import annotations

from typing import Final, Literal

from lexpilot_batch.errors import ConfigError

# The type, for mypy to check a value where it is stored or compared; the constants, for the code.
Backend = Literal["batch", "sync", "manual", "simulated"]

BATCH: Final = "batch"
SYNC: Final = "sync"
MANUAL: Final = "manual"
SIMULATED: Final = "simulated"
BACKENDS: Final[tuple[Backend, ...]] = (BATCH, SYNC, MANUAL, SIMULATED)
# The backends whose files become batches at a provider: what is billed at batch prices, what
# enqueued-token budgets count, what `--tail-sync` may move to `sync`.
BATCH_LIKE = frozenset({BATCH, SIMULATED})
# A wave's group of a batched route may also travel on its provider's flex tier (`routing.flex`):
# the sync runner with its API's tier field (`routing.flex.tier_fields`), billed at batch prices. Never a role's own backend.
FLEX: Final = "flex"
# The backends whose files the sync runner sends here, one request at a time (`sync.runner`).
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
