"""Result lines are read within bounds: size, depth, UTF-8 (issue 23, items 4 and 8).

Each line beyond a bound comes out flagged, with the id it carries when one can be found, and no
reader raises, holds a huge line whole or runs out of stack.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc

import pytest

from lexpilot_batch.engine.result_lines import INVALID_UTF8, TOO_DEEP, TOO_LARGE, read_lines
from lexpilot_batch.util.jsonbounds import MAX_DEPTH, MAX_LINE_BYTES, BeyondBounds, loads, loads_bounded, too_deep


def _line(cid: str, content: str = "好的。") -> bytes:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    line = {"id": "batch_req_1", "custom_id": cid, "response": {"status_code": 200, "body": body}, "error": None}
    return (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")


def _nested(depth: int, cid: str | None = "c-1", where: str = "head") -> bytes:
    deep = "[" * depth + "]" * depth
    if cid is None:
        return ('{"response": {"status_code": 200, "body": ' + deep + "}}\n").encode()
    if where == "head":
        return ('{"custom_id": "' + cid + '", "response": {"status_code": 200, "body": ' + deep + "}}\n").encode()
    return ('{"response": {"status_code": 200, "body": ' + deep + '}, "custom_id": "' + cid + '"}\n').encode()


def test_good_lines_read_as_json_loads_reads_them(tmp_path):
    lines = [_line(f"c-{i}", f'第{i}条回答，含 \\" 引号与 {{括号}} [方括号]。' * (i + 1)) for i in range(20)]
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(lines) + b"\n   \n")
    read = list(read_lines(path))
    assert [n for n, *_ in read] == list(range(1, 21))
    assert [obj for _, obj, _, _ in read] == [json.loads(x) for x in lines]
    assert all(flaw is None for *_, flaw in read)


@pytest.mark.parametrize("where", ["head", "tail"])
def test_a_line_nested_100000_deep_is_flagged_with_its_id_and_never_parsed(tmp_path, where):
    path = tmp_path / "out.jsonl"
    path.write_bytes(_line("c-1") + _nested(100_000, "c-2", where) + _line("c-3"))
    read = list(read_lines(path))
    assert [(n, obj["custom_id"] if obj else None) for n, obj, _, _ in read] == [(1, "c-1"), (2, "c-2"), (3, "c-3")]
    flaw = read[1][3]
    assert flaw is not None and flaw.kind == TOO_DEEP and str(MAX_DEPTH) in flaw.reason
    assert read[1][1] == {"custom_id": "c-2"}  # only its id: nothing of it is parsed
    with pytest.raises(BeyondBounds, match="deeper"):
        loads(_nested(100_000).decode().strip())


def test_depth_is_counted_outside_strings_and_exactly_at_the_bound():
    at_bound = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert not too_deep(at_bound) and json.loads(at_bound) == loads(at_bound)
    assert too_deep("[" + at_bound + "]")
    # Brackets inside strings (escaped quotes included) are text, not structure.
    text = json.dumps({"content": "[{" * 500 + '\\"]' + "}" * 30, "x": [[1]]})
    assert not too_deep(text) and loads(text) == json.loads(text)
    mixed = '{"a": ' * (MAX_DEPTH - 1) + "[[]]" + "}" * (MAX_DEPTH - 1)
    assert too_deep(mixed)


def test_a_deep_line_without_an_id_is_a_bad_line(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_bytes(_nested(100_000, None))
    ((number, obj, text, flaw),) = read_lines(path)
    assert (number, obj) == (1, None) and flaw is not None and flaw.kind == TOO_DEEP and len(text) <= 200


def test_a_50_mb_line_is_flagged_with_its_id_and_never_held_whole(tmp_path):
    path = tmp_path / "out.jsonl"
    huge = _line("c-2", "很长的回答。" * (50_000_000 // 18))
    assert len(huge) > 50_000_000 > MAX_LINE_BYTES
    with open(path, "wb") as fh:
        fh.write(_line("c-1") + huge + _line("c-3"))
    del huge
    tracemalloc.start()
    try:
        read = list(read_lines(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [obj["custom_id"] if obj else None for _, obj, _, _ in read] == ["c-1", "c-2", "c-3"]
    flaw = read[1][3]
    assert (
        flaw is not None
        and flaw.kind == TOO_LARGE
        and f"{path.stat().st_size - 2 * len(_line('c-1')):,}" in flaw.reason
    )
    assert read[1][1] == {"custom_id": "c-2"}
    assert peak < MAX_LINE_BYTES + (4 << 20), f"reading held {peak / 2**20:.1f} MiB"


def test_a_line_of_exactly_the_bound_is_read(tmp_path):
    head = _line("c-1", "")
    filler = MAX_LINE_BYTES - len(head)
    exact = _line("c-1", "a" * filler)
    assert len(exact) == MAX_LINE_BYTES
    path = tmp_path / "out.jsonl"
    path.write_bytes(exact + _line("c-2"))
    read = list(read_lines(path))
    assert [flaw for *_, flaw in read] == [None, None] and read[0][1] == json.loads(exact)


def test_invalid_utf8_is_flagged_not_replaced_silently(tmp_path):
    good = _line("c-1", "借款合同")
    bad = good.replace("合同".encode(), b"\xe5\x90\xff")  # a broken character inside the answer
    path = tmp_path / "out.jsonl"
    path.write_bytes(good + bad)
    (_, first, _, none), (_, second, _, flaw) = read_lines(path)
    assert none is None and first == json.loads(good)
    assert flaw is not None and flaw.kind == INVALID_UTF8 and "byte" in flaw.reason
    assert second is not None and second["custom_id"] == "c-1"  # still read: ingest fails its request


def test_compacted_files_are_read_within_the_same_bounds(tmp_path):
    plain = tmp_path / "out.jsonl"
    with gzip.open(tmp_path / "out.jsonl.gz", "wb") as fh:
        fh.write(_line("c-1") + _nested(100_000, "c-2") + _line("c-3", "好" * (MAX_LINE_BYTES // 3 + 1)))
    kinds = [flaw.kind if flaw else None for *_, flaw in read_lines(plain)]
    assert kinds == [None, TOO_DEEP, TOO_LARGE]


def test_a_provider_answer_beyond_the_bounds_is_refused_as_such():
    assert loads_bounded(b'{"a": [1]}\n') == {"a": [1]}
    with pytest.raises(BeyondBounds, match="deeper"):
        loads_bounded(_nested(100_000))
    with pytest.raises(BeyondBounds, match="MiB"):
        loads_bounded(b" " * (MAX_LINE_BYTES + 1))
    with pytest.raises(ValueError) as not_json:
        loads_bounded(b"<html>")
    assert not isinstance(not_json.value, BeyondBounds)
    with pytest.raises(ValueError):
        loads_bounded(b'{"a": "\xff"}')
