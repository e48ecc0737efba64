"""A simulated batch, in three jobs: its input checked (`validation`), its requests answered at once
when it is created (`answers`: one request's result line; `run`: the batch's), and what a client
sees of it over time, up to its output files and a cancel (`lifecycle`).

What a client sees is a pure function of the stored record and the wall clock, so a batch created
before a restart finishes after it (`lifecycle` has the state diagram).
"""

from __future__ import annotations

from lexpilot_batch.simulated.batches.answers import draw_digest, draw_key, dumps, is_success, run_request, sample_key
from lexpilot_batch.simulated.batches.lifecycle import (
    CANCEL_SECONDS,
    COMPLETION_WINDOW,
    TERMINAL,
    WINDOW_SECONDS,
    cancel,
    current,
    enqueued_tokens,
    view,
)
from lexpilot_batch.simulated.batches.run import create
from lexpilot_batch.simulated.batches.validation import (
    ENDPOINT,
    ENDPOINTS,
    MAX_REQUESTS,
    check_metadata,
    validate_input,
)

__all__ = [
    "CANCEL_SECONDS",
    "COMPLETION_WINDOW",
    "ENDPOINT",
    "ENDPOINTS",
    "MAX_REQUESTS",
    "TERMINAL",
    "WINDOW_SECONDS",
    "cancel",
    "check_metadata",
    "create",
    "current",
    "draw_digest",
    "draw_key",
    "dumps",
    "enqueued_tokens",
    "is_success",
    "run_request",
    "sample_key",
    "validate_input",
    "view",
]
