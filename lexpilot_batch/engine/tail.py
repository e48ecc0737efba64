"""Tail waves at once (`--tail-sync N`): the backend each group of a wave travels on.

A wave's requests go into one file per (backend, endpoint, model) group (`request_files`), one
batch each. In the last waves of Interaction LJP only the consultations still asking are left, and
a batch round trip of minutes to hours carries a few hundred requests. With `--tail-sync N`, a
group of at most N requests of a wave is sent through its provider's synchronous call (the `sync`
backend: chat completions, or for `anthropic/` and `google/` models their own Messages and
generateContent) instead of a batch, when the provider has one there; a wave all of whose groups
are that small then takes no batch round trip at all. Those requests cost the list price instead of
the batch price (`costs`). They are the same request lines either way (the sync backend runs batch
request files of every API shape, answers in that API's batch output shape: `providers.chat`), so
records are identical and the manifest does not change: it is an operational choice, like
`--concurrency`.

Decided here only, for the groups of a wave as the compiler writes them (`request_files.WaveWriter`)
and for the waves an estimate projects (`estimate.build`).
"""

from __future__ import annotations

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.apis import BATCH_LIKE, SIMULATED, SYNC
from lexpilot_batch.providers.registry import provider_of
from lexpilot_batch.providers.routes import Route


def check_tail_sync(limit: int) -> int:
    if limit < 0:
        raise ConfigError(f"--tail-sync must be 0 (off) or a number of requests, not {limit}")
    return limit


def has_chat(route: Route) -> bool:
    """Whether a synchronous call can be sent where the route's batches go: chat completions at any
    OpenAI-compatible endpoint but an Azure Global Batch deployment (`registry.Provider.chat_api`),
    Anthropic's Messages and Gemini's generateContent (`providers.anthropic.chat`, `providers.google.chat`)."""
    if route.backend == SIMULATED or route.provider is None:
        return True
    return provider_of(route.provider)[0].chat_api


def wave_backend(route: Route, requests: float, limit: int) -> str:
    """The backend a wave's group of `requests` requests of this route travels on: `sync` for a
    batched group of at most `limit` requests (0: never) whose provider has a synchronous call, the
    route's own backend otherwise. (An estimate passes the group's expected number of requests.)"""
    if limit and requests <= limit and route.backend in BATCH_LIKE and has_chat(route):
        return SYNC
    return route.backend


def is_round_trip(backend: str) -> bool:
    """Whether a group on this backend waits for a batch: `batch` and `simulated`, and `manual`
    (a file someone runs elsewhere); not `sync`."""
    return backend != SYNC
