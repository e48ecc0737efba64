"""The template's listings (`file_batch.FileBatchBackend.uploads`, `batches`) through the OpenAI backend and
the official SDK, against an HTTP transport that answers as a server would: `GET /files` with
`purpose=batch&order=desc` (https://platform.openai.com/docs/api-reference/files/list), the SDK
following the `after` cursor while `has_more` holds.

A listing the server refuses (404, 405: an OpenAI-compatible server without it; 400) or cannot give
(5xx, no connection) means "cannot look now": nothing is listed and the file is uploaded again,
after one retry of the listing at most.
"""

from __future__ import annotations

import json

import openai
import pytest

try:  # the HTTP client the installed SDK is built on (`providers/chat.py`)
    import httpx2 as httpx
except ImportError:  # pragma: no cover - an SDK on httpx
    import httpx  # type: ignore[no-redef]

from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
from lexpilot_batch.providers.registry import PROFILES
from lexpilot_batch.providers.routing.endpoints import Endpoint


def backend_answering(answer) -> tuple[OpenAIBatchBackend, list[httpx.Request]]:
    """The OpenAI backend whose HTTP calls `answer(request)` answers; the requests it made."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    backend = OpenAIBatchBackend(Endpoint("eval", "http://provider.test/v1", "KEY", "sk-x"), PROFILES["openai"])
    backend.client = openai.OpenAI(
        base_url="http://provider.test/v1",
        api_key="sk-x",
        max_retries=5,
        http_client=httpx.Client(transport=httpx.MockTransport(handle)),
    )
    return backend, seen


def stored(n: int, created_at: int) -> dict:
    return {
        "id": f"file-{n}",
        "object": "file",
        "bytes": 100 + n,
        "created_at": created_at,
        "filename": f"lexpilot-tag-{n}.jsonl",
        "purpose": "batch",
    }


@pytest.fixture(autouse=True)
def no_sdk_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai._base_client.SyncAPIClient, "_sleep_for_retry", lambda *a, **k: None, raising=False)
    monkeypatch.setattr("time.sleep", lambda seconds: None)


def test_the_listing_is_read_newest_first_across_pages_down_to_since():
    pages = {
        None: {"data": [stored(3, 300), stored(2, 200)], "has_more": True},
        "file-2": {"data": [stored(1, 100), stored(0, 50)], "has_more": False},
    }

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/files"
        assert request.url.params["purpose"] == "batch" and request.url.params["order"] == "desc"
        return httpx.Response(200, json={"object": "list", **pages[request.url.params.get("after")]})

    backend, seen = backend_answering(answer)
    found = list(backend.uploads(since=100))
    assert [(u.id, u.name, u.bytes) for u in found] == [
        ("file-3", "lexpilot-tag-3.jsonl", 103),
        ("file-2", "lexpilot-tag-2.jsonl", 102),
        ("file-1", "lexpilot-tag-1.jsonl", 101),
    ]
    assert len(seen) == 2


@pytest.mark.parametrize("status", [400, 404, 405])
def test_a_listing_the_server_refuses_lists_nothing_and_is_not_retried(status):
    backend, seen = backend_answering(
        lambda request: httpx.Response(
            status, json={"error": {"message": "Not found", "type": "invalid_request_error"}}
        )
    )
    assert list(backend.uploads()) == [] and len(seen) == 1


@pytest.mark.parametrize("status", [500, 501, 503])
def test_a_listing_that_keeps_failing_lists_nothing_after_one_retry(status):
    backend, seen = backend_answering(lambda request: httpx.Response(status, json={"error": {"message": "busy"}}))
    assert list(backend.uploads()) == [] and len(seen) == 2


def test_a_listing_whose_second_page_cannot_be_had_lists_nothing():
    """A part of a listing could hide the copy looked for: nothing is listed, not the first page."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("after"):
            raise httpx.ConnectError("connection reset")
        return httpx.Response(200, json={"object": "list", "data": [stored(1, 100)], "has_more": True})

    backend, seen = backend_answering(answer)
    assert list(backend.uploads()) == [] and len(seen) == 3


@pytest.mark.parametrize("body", [[], {"object": "list", "data": {"id": 7}}, "<html>busy</html>"])
def test_an_answer_that_is_not_a_listing_lists_nothing(body):
    """A server answering `GET /files` with something else: the file is uploaded again."""
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    backend, seen = backend_answering(lambda request: httpx.Response(200, content=content))
    assert list(backend.uploads()) == [] and len(seen) == 1


def test_a_server_that_answers_every_page_with_its_first_is_listed_once():
    """No `has_more` and the `after` cursor ignored: the SDK asks for the next page while one is not
    empty, and this server would be asked for ever."""
    page = {"object": "list", "data": [stored(2, 200), stored(1, 100)]}
    backend, seen = backend_answering(lambda request: httpx.Response(200, json=page))
    assert [u.id for u in backend.uploads()] == ["file-2", "file-1"] and len(seen) == 2


def test_the_batches_listing_of_such_a_server_is_read_once_too():
    batch = {
        "id": "batch-1",
        "object": "batch",
        "endpoint": "/v1/chat/completions",
        "input_file_id": "file-1",
        "completion_window": "24h",
        "status": "in_progress",
        "created_at": 100,
        "metadata": {"lexpilot_workspace": "tag"},
    }
    backend, seen = backend_answering(lambda request: httpx.Response(200, json={"object": "list", "data": [batch]}))
    assert [b.id for b in backend.batches()] == ["batch-1"] and len(seen) == 2
