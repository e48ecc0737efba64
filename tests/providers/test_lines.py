"""Request lines are `json.dumps` of the request, byte for byte, however the prompt is pieced, in
OpenAI's shape and in each native API's."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from lexpilot_batch.benchmark.prompts import Prompt
from lexpilot_batch.providers import cache_layout as prefixes
from lexpilot_batch.providers.lines import Pieces, line_body, line_fingerprint, line_id, request_line
from tests.helpers.result_lines import TAG

_texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30)
# Body fields besides model and messages, as dialects and --model-arg make them: numbers, text,
# null-free nested objects, a field named "content" too.
_values = st.recursive(
    st.booleans() | st.integers(-(10**9), 10**9) | st.floats(allow_nan=False, allow_infinity=False) | _texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=6,
)
_fields = st.dictionaries(
    st.sampled_from(["temperature", "max_tokens", "max_completion_tokens", "n", "reasoning_effort", "content", "x"]),
    _values,
    max_size=5,
)
LEGACY = {"temperature": 0.1, "max_tokens": 8192, "n": 1}


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _expected(cid: str, model: str, prompt: str, fields: dict, url: str) -> bytes:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], **fields}
    line = {"custom_id": cid, "method": "POST", "url": url, "body": body}
    return (_dumps(line) + "\n").encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(cid=_texts, model=_texts, url=_texts, parts=st.lists(_texts, max_size=6), fields=_fields)
def test_request_line_is_json_dumps_of_the_request(cid, model, url, parts, fields):
    pieces = Pieces()  # shared, as across the prompts of a case
    prompt = Prompt(parts)
    expected = _expected(cid, model, prompt, fields, url)
    assert request_line(cid, model, prompt, _dumps(fields), url, pieces) == expected
    assert request_line(cid, model, prompt, _dumps(fields), url, pieces) == expected  # from the cache
    assert request_line(cid, model, str(prompt), _dumps(fields), url) == expected
    assert json.loads(expected)["body"]["messages"][0]["content"] == "".join(parts)


@settings(max_examples=200, deadline=None)
@given(
    model=_texts,
    parts=st.lists(_texts, min_size=1, max_size=6),
    fields=_fields,
    where=st.integers(0, 10**6),
    limit=st.sampled_from([16, 64, 8 << 20]),
    cache=st.sampled_from([None, prefixes.KEY, f"{prefixes.BREAKPOINT}:1"]),
    shared=st.integers(0, 6),
)
@example(model="", parts=[""], fields={"n": 0}, where=0, limit=16, cache=None, shared=0)  # "changing" n to itself
def test_a_fingerprint_is_the_bodys_however_the_cache_stands_and_changes_with_any_piece(
    model, parts, fields, where, limit, cache, shared
):
    """The id's check (`ids.request_check`) is taken of `line_fingerprint`: the body it returns is
    `line_body`'s, the same prompt gives the same fingerprint from a cold, a warm or an emptied cache,
    and a change to any piece, the model or a field changes it."""
    url, body_fields = "/v1/chat/completions", _dumps(fields)
    prompt = Prompt(parts, shared=min(shared, len(parts)), breaks=(1,))
    warm = Pieces(limit=limit)

    def fp(prompt, model=model, fields=body_fields, pieces=warm):
        return line_fingerprint(model, prompt, fields, url, pieces, cache=cache, case="7")

    body, fingerprint = fp(prompt)
    assert body == line_body(model, prompt, body_fields, url, cache=cache, case="7")
    assert fp(prompt) == (body, fingerprint)  # from the cache
    assert fp(prompt, pieces=Pieces(limit=limit))[1] == fingerprint
    changed = list(parts)
    changed[where % len(parts)] += "x"
    assert fp(Prompt(changed, shared=prompt.shared, breaks=(1,)))[1] != fingerprint
    assert fp(prompt, model=model + "x")[1] != fingerprint
    other = {**fields, "n": where}
    if other == fields:  # (the generated fields held that very value: change it for real)
        other["n"] = where + 1
    assert fp(prompt, fields=_dumps(other))[1] != fingerprint


def test_a_quote_in_the_model_name_cannot_be_mistaken_for_the_prompt_slot():
    model = '"content":""'
    fields = _dumps({"content": "", **LEGACY})  # a body field of that name, after the messages
    line = request_line("c-1", model, Prompt(["a", '"content":""', "b"]), fields, "/v1/chat/completions")
    assert json.loads(line)["body"]["model"] == model
    assert json.loads(line)["body"]["messages"][0]["content"] == 'a"content":""b'
    assert json.loads(line)["body"]["content"] == ""


def test_pieces_stay_within_their_byte_limit_and_lines_stay_exact():
    pieces = Pieces(limit=64)
    for i in range(50):
        prompt = Prompt(["模板：", f"第{i}条消息" * (i % 7), "\n", "回复"])
        line = request_line(f"c-{i}", "m", prompt, _dumps(LEGACY), "/v1/chat/completions", pieces)
        assert line == _expected(f"c-{i}", "m", str(prompt), LEGACY, "/v1/chat/completions")
        assert pieces.size == sum(len(v) for v in pieces.values()) <= 64 or len(pieces) == 1


def test_request_files_are_written_whole_in_order_with_their_hash(tmp_path, monkeypatch):
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    import pytest

    from lexpilot_batch.engine.request_files import _Sink

    monkeypatch.setattr(_Sink, "CHUNK", 50)  # many chunks through the background thread
    lines = [f'{{"custom_id":"c-{i}","x":"{"案" * (i % 13)}"}}\n'.encode() for i in range(300)]
    with ThreadPoolExecutor(max_workers=1) as pool:
        sink = _Sink(tmp_path / "f.jsonl", pool)
        for line in lines:
            sink.write(line)
        assert sink.finish() == hashlib.sha256(b"".join(lines)).hexdigest()
        assert (tmp_path / "f.jsonl").read_bytes() == b"".join(lines)

        failing = _Sink(tmp_path / "g.jsonl", pool)

        def full(chunk: bytes) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(failing, "_store", full)
        with pytest.raises(OSError, match="No space left"):
            for line in lines:
                failing.write(line)
            failing.finish()
        failing.discard()


# --- the native APIs' lines ----------------------------------------------------------------------


_texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20)


@settings(max_examples=150, deadline=None)
@given(
    cid=_texts.filter(lambda c: len(c.encode()) < 15),
    model=_texts,
    parts=st.lists(_texts, max_size=5),
    t=st.floats(0, 1),
)
def test_native_lines_are_json_dumps_of_the_native_request(cid, model, parts, t):
    prompt = Prompt(parts)
    anthropic = {"max_tokens": 8192, "temperature": t, "thinking": {"type": "enabled", "content": ""}}
    line = request_line(cid, model, prompt, _dumps(anthropic), "/v1/messages/batches", None, "anthropic", TAG)
    params = {"model": model, "messages": [{"role": "user", "content": str(prompt)}], **anthropic}
    assert line == (_dumps({"custom_id": line_id(cid, "anthropic", TAG), "params": params}) + "\n").encode()
    google = {"generationConfig": {"temperature": t, "maxOutputTokens": 8192}, "x": {"text": ""}}
    line = request_line(cid, model, prompt, _dumps(google), ":batchGenerateContent", None, "google")
    request = {"contents": [{"role": "user", "parts": [{"text": str(prompt)}]}], **google}
    assert line == (_dumps({"key": cid, "request": request}) + "\n").encode()
