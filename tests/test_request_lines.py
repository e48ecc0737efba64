"""Request lines are `json.dumps` of the request, byte for byte, however the prompt is pieced."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from lexpilot_batch.config import Settings
from lexpilot_batch.prompts import Prompt
from lexpilot_batch.request_lines import Pieces, request_line

_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


def _expected(cid: str, model: str, prompt: str, config: Settings, role: str, url: str) -> bytes:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": config.temperature_for(role),
        "max_tokens": config.max_tokens,
        "n": 1,
    }
    line = {"custom_id": cid, "method": "POST", "url": url, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(
    cid=_texts,
    model=_texts,
    url=_texts,
    parts=st.lists(_texts, max_size=6),
    role=st.sampled_from(["eval", "user", "judge"]),
    temperature=st.floats(0, 2),
    max_tokens=st.integers(1, 10**6),
)
def test_request_line_is_json_dumps_of_the_request(cid, model, url, parts, role, temperature, max_tokens):
    config = Settings(temperature=temperature, max_tokens=max_tokens)
    pieces = Pieces()  # shared, as across the prompts of a case
    prompt = Prompt(parts)
    expected = _expected(cid, model, prompt, config, role, url)
    assert request_line(cid, model, prompt, config, role, url, pieces) == expected
    assert request_line(cid, model, prompt, config, role, url, pieces) == expected  # from the cache
    assert request_line(cid, model, str(prompt), config, role, url) == expected
    assert json.loads(expected)["body"]["messages"][0]["content"] == "".join(parts)


def test_a_quote_in_the_model_name_cannot_be_mistaken_for_the_prompt_slot():
    config = Settings()
    model = '"content":""'
    line = request_line("c-1", model, Prompt(["a", '"content":""', "b"]), config, "eval", "/v1/chat/completions")
    assert json.loads(line)["body"]["model"] == model
    assert json.loads(line)["body"]["messages"][0]["content"] == 'a"content":""b'


def test_pieces_stay_within_their_byte_limit_and_lines_stay_exact():
    config = Settings()
    pieces = Pieces(limit=64)
    for i in range(50):
        prompt = Prompt(["模板：", f"第{i}条消息" * (i % 7), "\n", "回复"])
        line = request_line(f"c-{i}", "m", prompt, config, "judge", "/v1/chat/completions", pieces)
        assert line == _expected(f"c-{i}", "m", str(prompt), config, "judge", "/v1/chat/completions")
        assert pieces.size == sum(len(v) for v in pieces.values()) <= 64 or len(pieces) == 1


def test_request_files_are_written_whole_in_order_with_their_hash(tmp_path, monkeypatch):
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    import pytest

    from lexpilot_batch.request_files import _Sink

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
