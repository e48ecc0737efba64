"""Rate limits of the simulated provider's synchronous calls (`simulated.ratelimits`), checked
against what OpenAI documents (the "Rate limits in headers" table of
https://platform.openai.com/docs/guides/rate-limits) and what the `openai` SDK reads of a 429."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from openai import OpenAI

from lexpilot_batch.providers.file_batch import retry_after
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.faults import FaultSpecError
from lexpilot_batch.simulated.ratelimits import MID_TIER, RateLimits, duration, request_tokens

HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_durations_are_spelt_as_openai_spells_them():
    # The guide's samples: "1s", "6m0s"; the ones answers carry below a second: "12ms".
    assert duration(1.0) == "1s"
    assert duration(360.0) == "6m0s"
    assert duration(0.012) == "12ms"
    assert duration(1.5) == "1.5s"
    assert duration(3725.0) == "1h2m5s"


def test_the_guides_sample_row_for_requests():
    # The guide's table: limit 60, remaining 59, reset 1s after one request of a 60 RPM limit.
    limits = RateLimits(Clock())
    headers = limits.admit(parse_faults("rpm=60"), "openai", "m", 10)
    assert headers == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-reset-requests": "1s",
    }


def test_a_minutes_requests_then_429_until_the_bucket_refills():
    clock = Clock()
    limits, faults = RateLimits(clock), parse_faults("rpm=60,tpm=100000")
    for _ in range(60):
        limits.admit(faults, "openai", "m", 100)
    with pytest.raises(ApiError) as refused:
        limits.admit(faults, "openai", "m", 100)
    exc = refused.value
    assert (exc.status, exc.type, exc.code) == (429, "requests", "rate_limit_exceeded")
    assert exc.headers["x-ratelimit-remaining-requests"] == "0"
    assert exc.headers["retry-after"] == "1" and exc.headers["retry-after-ms"] == "1000"
    assert set(HEADERS) <= set(exc.headers)
    # Another model, or the same model on another API, has buckets of its own.
    limits.admit(faults, "openai", "other", 100)
    limits.admit(faults, "anthropic", "m", 100)
    clock.t += 1.0  # a second refills one request of 60 a minute
    limits.admit(faults, "openai", "m", 100)
    with pytest.raises(ApiError):
        limits.admit(faults, "openai", "m", 100)


def test_tokens_a_minute_refuse_by_tokens_and_name_the_wait():
    clock = Clock()
    limits, faults = RateLimits(clock), parse_faults("tpm=6000")
    limits.admit(faults, "openai", "m", 5000)
    with pytest.raises(ApiError) as refused:
        limits.admit(faults, "openai", "m", 2000)
    assert refused.value.type == "tokens"
    # 1,000 tokens short at 100 tokens a second: 10 s.
    assert refused.value.headers["retry-after-ms"] == "10000"
    assert "x-ratelimit-remaining-requests" not in refused.value.headers  # no RPM limit set
    clock.t += 10.0
    assert limits.admit(faults, "openai", "m", 2000)["x-ratelimit-remaining-tokens"] == "0"


def test_a_request_larger_than_a_minutes_tokens_is_always_refused():
    limits = RateLimits(Clock())
    with pytest.raises(ApiError, match="Request too large"):
        limits.admit(parse_faults("tpm=100"), "openai", "m", 101)


def test_a_tightened_limit_takes_effect_at_once():
    clock = Clock()
    limits = RateLimits(clock)
    limits.admit(parse_faults("rpm=1000"), "openai", "m", 1)
    # 999 left of the old minute, but the new one holds at most 1: one call, then a refusal.
    limits.admit(parse_faults("rpm=1"), "openai", "m", 1)
    with pytest.raises(ApiError):
        limits.admit(parse_faults("rpm=1"), "openai", "m", 1)


def test_request_tokens_count_the_text_and_the_output_ceiling():
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 300}]}
    base = request_tokens(body)
    assert base >= 200
    assert base + 500 <= request_tokens({**body, "max_tokens": 500}) <= base + 520  # the field's own text too
    assert request_tokens({**body, "max_completion_tokens": 500}) >= base + 500
    gemini = {"contents": [{"parts": [{"text": "x" * 300}]}], "generationConfig": {"maxOutputTokens": 700}}
    assert request_tokens(gemini) >= 700 + 200


def test_the_mid_tier_and_bad_values_parse_as_fault_keys():
    faults = parse_faults(MID_TIER)
    assert (faults.rpm, faults.tpm) == (5000, 4_000_000)
    with pytest.raises(FaultSpecError, match="rpm"):
        parse_faults("rpm=-1")
    assert (parse_faults(None).rpm, parse_faults(None).tpm) == (0, 0)  # off by default


def _body(model: str = "gpt-sim") -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": "hello"}]}


def test_every_chat_answer_carries_the_headers_and_a_429_what_the_sdk_honours(tmp_path: Path):
    with SimulatedServer(tmp_path / "sim", faults=parse_faults("rpm=2,tpm=1000000")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(**_body())  # type: ignore[call-overload]
        assert all(raw.headers.get(name) for name in HEADERS)
        assert raw.headers["x-ratelimit-remaining-requests"] == "1"
        # A refusal on the request's merits (a 400) still answers with the headers, and counts.
        with pytest.raises(openai.BadRequestError) as bad:
            client.chat.completions.create(model="gpt-sim", messages=[], extra_body={})
        assert bad.value.response.headers["x-ratelimit-remaining-requests"] == "0"
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(**_body())  # type: ignore[call-overload]
        headers = refused.value.response.headers
        assert refused.value.code == "rate_limit_exceeded"
        assert all(headers.get(name) for name in HEADERS)
        # The SDK's own reading of the answer: it waits what retry-after-ms says, within its 60 s.
        wait = client._parse_retry_after_header(headers)
        assert wait is not None and 0 < wait <= 30.0
        assert client._should_retry(refused.value.response)
        assert retry_after(refused.value) == pytest.approx(wait)  # the product reads the same wait
        # Another model's calls are not refused; calls that are not chat calls carry no headers.
        ok = client.chat.completions.with_raw_response.create(**_body("sim-eval"))  # type: ignore[call-overload]
        assert ok.headers["x-ratelimit-remaining-requests"] == "1"
        listed = client.models.with_raw_response.list()
        assert "x-ratelimit-limit-requests" not in listed.headers
        assert server.stats["rate_limited"] == 1


def test_no_headers_and_no_refusal_when_off(tmp_path: Path):
    with SimulatedServer(tmp_path / "sim", faults=parse_faults("")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        for _ in range(3):
            raw = client.chat.completions.with_raw_response.create(**_body())  # type: ignore[call-overload]
            assert "x-ratelimit-limit-requests" not in raw.headers
