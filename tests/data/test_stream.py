"""Reading a dataset file in chunks: the same values and the same errors as reading it whole, any
chunk size; a file changed between validating it and copying its cases; cases copied once.

The whole-file reader (`read_json`, which still reads categories files) is the reference: for
every file, broken or not, the chunked reader must say exactly what it says.
"""

from __future__ import annotations

import hashlib
import json
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch import data
from lexpilot_batch.data import (
    Case,
    DatasetFile,
    load_dataset,
    open_dataset,
    summarize,
    validate_file,
)
from lexpilot_batch.data.jsonfile import object_pairs, read_json
from lexpilot_batch.data.stream import CaseStream
from lexpilot_batch.engine import loop as engine
from lexpilot_batch.errors import DataError
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.cases import make_case
from tests.helpers.engine import open_session, prepare_runs

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_cases.json"
HINT = "pass a LexPilot JSON file with --dataset FILE"
# Elements of every kind, with characters of one to four UTF-8 bytes, escapes (a surrogate pair
# among them), numbers that a chunk boundary could cut short, and a duplicate key.
MIXED = (
    '[\n  {"中文": "借款纠纷\\u4e2d\\ud83d\\ude00😀", "n": -12345.678e+10, "dup": 1, "dup": 2},\n'
    '  12345678901234567890, -1.5E-3, true, false, null, "\\"引号\\" \\\\ é",\n'
    '  [[], {}, [1, [2, [3]]]], {"key_details": {"甲": ["乙", "丙"]}}\n]\n'
)
CHUNK_SIZES = (1, 2, 3, 4, 5, 7, 13, 64, 1 << 20)


def stream(path: Path, chunk_size: int) -> tuple[list[Any], str]:
    reader = CaseStream(path, HINT, chunk_size)
    return list(reader), reader.sha256


def whole_file_error(path: Path) -> str | None:
    """What reading the file whole says about it as JSON ("not a list"/"empty" for the shapes)."""
    try:
        _, parsed = read_json(path, "Dataset file", HINT)
    except DataError as exc:
        return str(exc)
    if not isinstance(parsed, list):
        return "not a list"
    return "empty" if not parsed else None


def stream_error(path: Path, chunk_size: int) -> str | None:
    try:
        elements, _ = stream(path, chunk_size)
    except DataError as exc:
        text = str(exc)
        return "not a list" if "at the top level; expected a JSON array" in text else text
    return "empty" if not elements else None


# --- the values ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_every_chunk_size_gives_the_values_and_digest_of_the_whole_file(tmp_path: Path, bom: bytes) -> None:
    raw = bom + MIXED.encode("utf-8")
    path = tmp_path / "mixed.json"
    path.write_bytes(raw)
    expected = json.loads(raw.decode("utf-8-sig"), object_pairs_hook=object_pairs)
    # Every size up to 40 puts a boundary at every kind of place: inside a multi-byte character,
    # inside a string and an escape, inside a number, between elements.
    for chunk_size in (*range(1, 41), 1 << 20):
        elements, sha256 = stream(path, chunk_size)
        assert elements == expected, chunk_size
        assert elements[0].duplicate_keys == ["dup"]
        assert elements[0]["中文"] == "借款纠纷中😀😀"
        assert elements[1] == 12345678901234567890 and elements[2] == -1.5e-3
        assert sha256 == hashlib.sha256(raw).hexdigest()


def test_a_boundary_right_at_each_place_between_elements(tmp_path: Path) -> None:
    raw = json.dumps([make_case(case_number=i) for i in range(3)], ensure_ascii=False).encode("utf-8")
    path = tmp_path / "cases.json"
    path.write_bytes(raw)
    expected = json.loads(raw)
    for at in [i for i, byte in enumerate(raw) if byte in b',:{}[]"'][:200]:
        # A first chunk that ends just before / just after a delimiter or a quote.
        for chunk_size in (at, at + 1):
            if chunk_size:
                assert stream(path, chunk_size)[0] == expected, chunk_size


def test_a_boundary_inside_a_multibyte_character(tmp_path: Path) -> None:
    raw = '["借"]'.encode()  # 借 is bytes 2-4
    path = tmp_path / "one.json"
    path.write_bytes(raw)
    for chunk_size in (2, 3, 4):
        assert stream(path, chunk_size)[0] == ["借"]


def test_the_loaders_give_the_same_cases_and_digest_at_any_chunk_size() -> None:
    whole = load_dataset(SAMPLE)
    assert whole.sha256 == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    for chunk_size in (1, 7, 4096):
        opened = open_dataset(SAMPLE, chunk_size=chunk_size)
        assert opened.sha256 == whole.sha256
        assert list(opened.case_ids) == whole.case_ids
        assert list(opened.case_classes) == [whole.class_of(case) for case in whole.cases]
        assert list(opened.read_cases()) == whole.cases
        assert list(opened.read_cases(3)) == whole.cases[:3]


def test_validate_file_summarises_as_the_in_memory_summary() -> None:
    assert validate_file(SAMPLE) == summarize(load_dataset(SAMPLE))


def test_open_dataset_keeps_each_cases_variants() -> None:
    seen: list[str] = []

    def two_by_number(case: data.Case) -> tuple[str, ...]:
        seen.append(case.case_id)
        return ("a", "b") if case.case_id == seen[0] else ("a",)

    opened = open_dataset(SAMPLE, variants={"t1": lambda case: ("",), "t2": two_by_number})
    assert seen == list(opened.case_ids)
    assert opened.variants[0] == {"t1": ("",), "t2": ("a", "b")}
    assert all(v == {"t1": ("",), "t2": ("a",)} for v in opened.variants[1:])
    assert opened.variants[1] is opened.variants[2]  # equal variants are kept once


def test_open_dataset_holds_one_case_not_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    case = make_case()
    case["complete_history"][0]["content"] = "借款" * 20_000  # 120 KB of UTF-8 per case
    cases = [{**case, "case_number": i} for i in range(80)]  # about 10 MB
    path.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    tracemalloc.start()
    try:
        opened = open_dataset(path, chunk_size=64 * 1024)
        _, streamed_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        assert sum(1 for _ in opened.read_cases()) == 80
        _, reread_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        load_dataset(path)
        _, loaded_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert loaded_peak > 8 * 2**20  # the reference: every case in memory
    assert streamed_peak < 3 * 2**20 and reread_peak < 3 * 2**20, (streamed_peak, reread_peak)


# --- the errors ---------------------------------------------------------------------------------

BROKEN: dict[str, bytes] = {
    "trailing comma in an object": b'[\n  {"case_number": 1,}\n]',
    "control character in a string": '[{"a": 1}\n,\n {"b": "中文\x01"}]'.encode(),
    "missing comma between elements": b'[{"a": 1}\n {"b": 2}]',
    "trailing comma in the array": b'[{"a": 1},\n]',
    "two commas": b'[{"a": 1},,{"b": 2}]',
    "extra data after the array": b'[{"a": 1}] {"b": 2}',
    "extra unicode space after the array": '[{"a": 1}]\u3000'.encode(),
    "unclosed array": b'[{"a": 1},\n {"b": 2}\n',
    "unclosed string": '[{"a": "借款'.encode(),
    "cut inside an escape": b'[{"a": "\\u4e',
    "cut inside a number": b'[{"a": 12.',
    "cut after a comma": b'[{"a": 1},  \n',
    "only an opening bracket": b"[",
    "empty array": b"[ \n ]",
    "empty file": b"",
    "only whitespace": b" \n\t ",
    "only unicode whitespace": "\u3000\n".encode(),
    "object at the top level": b'{"cases": []}',
    "broken object at the top level": b'{"cases": [}',
    "string at the top level": '"借款"'.encode(),
    "a second byte-order mark": b"\xef\xbb\xbf\xef\xbb\xbf[1]",
    "junk": b"case_number,cause\n1,2\n",
    "gbk": json.dumps([make_case()], ensure_ascii=False).encode("gbk"),
    "bad byte after a JSON fault": b'[{"a": 1,}]' + b" " * 100 + b"\xff",
    "bad byte after a truncation": b'[{"a": "' + b"x" * 100 + b"\xc3",
    "too deep": b"[" * 50_000 + b"]" * 50_000,
    "too deep, then a bad byte": b"[" * 50_000 + b"\xff",
    "bad literal": b"[tru]",
    "bad number": b"[-]",
    "not a number": b'[{"a": -Infinit}]',
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_files_get_the_error_reading_them_whole_gives(tmp_path: Path, name: str) -> None:
    path = tmp_path / "cases.json"
    path.write_bytes(BROKEN[name])
    expected = whole_file_error(path)
    assert expected is not None or name == "empty array"
    for chunk_size in CHUNK_SIZES:
        assert stream_error(path, chunk_size) == expected, chunk_size


def test_line_and_column_count_in_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_bytes('[{"a": 1}\n,\n {"b": "中文\x01"}]'.encode())
    for chunk_size in CHUNK_SIZES:
        with pytest.raises(DataError, match="Invalid control character at at line 3 column 11; fix the file"):
            list(CaseStream(path, HINT, chunk_size))
    path.write_bytes(b'[{"a": 1},\n {"b": 2}\n')
    for chunk_size in CHUNK_SIZES:
        with pytest.raises(DataError, match=r"ends unexpectedly \(Expecting ',' delimiter at line 3 column 1\)"):
            list(CaseStream(path, HINT, chunk_size))


def test_a_byte_not_utf8_counts_from_the_start_of_the_file_after_a_byte_order_mark(tmp_path: Path) -> None:
    raw = b'\xef\xbb\xbf[\n"ab\xffc"]'
    path = tmp_path / "cases.json"
    path.write_bytes(raw)
    assert raw.index(b"\xff") == 8
    for chunk_size in CHUNK_SIZES:
        with pytest.raises(DataError, match=r"is not UTF-8 text \(byte 0xff at line 2, byte offset 8\)"):
            list(CaseStream(path, HINT, chunk_size))
    with pytest.raises(DataError, match=r"is not UTF-8 text \(byte 0xff at line 2, byte offset 8\)"):
        read_json(path, "Dataset file", HINT)


def test_random_corruptions_get_the_error_reading_them_whole_gives(tmp_path: Path) -> None:
    rng = random.Random(20)
    base = json.dumps([make_case(case_number=i) for i in range(2)], ensure_ascii=False, indent=1).encode()
    pieces = [
        b"[",
        b"]",
        b"{",
        b"}",
        b",",
        b":",
        b'"',
        b"\\",
        b"\\u",
        b"\\ud83d",
        b" ",
        b"\n",
        b"1",
        b"-",
        b".",
        b"e",
        b"\xe4",
        b"\xb8",
        b"\xef\xbb\xbf",
        "\u3000".encode(),
        b"tru",
        b"\x01",
    ]
    path = tmp_path / "cases.json"
    for _ in range(300):
        raw = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            at, what = rng.randrange(len(raw) + 1), rng.random()
            if what < 0.3:
                del raw[at : at + rng.randint(1, 3)]
            elif what < 0.8:
                raw[at:at] = rng.choice(pieces)
            else:
                del raw[at:]
        path.write_bytes(bytes(raw))
        expected = whole_file_error(path)
        for chunk_size in (1, 3, 16, 1 << 20):
            assert stream_error(path, chunk_size) == expected, (bytes(raw), chunk_size)


def test_a_file_error_comes_before_the_problems_of_the_cases_before_it(tmp_path: Path) -> None:
    bad_case = json.dumps(make_case(result_dict={}), ensure_ascii=False)
    path = tmp_path / "cases.json"
    path.write_text(f'[{bad_case}, {bad_case}, {{"a": 1,}}]', encoding="utf-8")
    with pytest.raises(DataError) as info:
        open_dataset(path, chunk_size=5)
    assert "is not valid JSON: Expecting property name" in str(info.value) and not info.value.problems
    path.write_bytes(f"[{bad_case}, {bad_case}]".encode() + b"\n\xff")
    with pytest.raises(DataError, match="is not UTF-8 text") as info:
        open_dataset(path, chunk_size=5)
    assert not info.value.problems


def test_past_the_problem_cap_the_rest_is_still_read_as_json(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text("[" + ",".join(["{}"] * (data.MAX_COUNTED + 5)) + ",]", encoding="utf-8")
    with pytest.raises(DataError, match="is not valid JSON: Expecting value"):
        open_dataset(path, chunk_size=100)
    path.write_text("[" + ",".join(["{}"] * (data.MAX_COUNTED + 5)) + "]", encoding="utf-8")
    with pytest.raises(DataError, match="checking stopped at case #1000"):
        open_dataset(path, chunk_size=100)


def test_folder_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="is a folder; pass a LexPilot JSON file"):
        open_dataset(tmp_path)
    with pytest.raises(DataError, match="does not exist; pass a LexPilot JSON file"):
        open_dataset(tmp_path / "nope.json")


# --- a file changed between validating it and reading its cases again -------------------------


def _sample_copy(tmp_path: Path) -> tuple[Path, bytes]:
    path = tmp_path / "cases.json"
    raw = SAMPLE.read_bytes()
    path.write_bytes(raw)
    return path, raw


@pytest.mark.parametrize(
    "change",
    ["one character", "whitespace only", "a case less", "truncated", "not utf-8", "no array", "deleted", "appended"],
)
def test_a_file_changed_after_validation_is_refused_when_read_again(tmp_path: Path, change: str) -> None:
    path, raw = _sample_copy(tmp_path)
    opened = open_dataset(path, chunk_size=4096)
    cases = json.loads(raw)
    if change == "one character":
        path.write_bytes(raw.replace("借".encode(), "贷".encode(), 1))
    elif change == "whitespace only":
        path.write_bytes(raw.replace(b"[", b"[ ", 1))
    elif change == "a case less":
        path.write_text(json.dumps(cases[:-1], ensure_ascii=False), encoding="utf-8")
    elif change == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif change == "not utf-8":
        path.write_bytes(raw + b"\xff")
    elif change == "no array":
        path.write_text(json.dumps({"cases": cases}, ensure_ascii=False), encoding="utf-8")
    elif change == "deleted":
        path.unlink()
    else:
        path.write_bytes(raw + b"\n")
    with pytest.raises(DataError, match="changed while it was being read, so nothing was taken from it"):
        list(opened.read_cases())
    with pytest.raises(DataError, match="changed while it was being read"):
        list(opened.read_cases(2))  # the bytes past the cases read count too


def test_an_unchanged_file_reads_again(tmp_path: Path) -> None:
    path, raw = _sample_copy(tmp_path)
    opened = open_dataset(path)
    path.write_bytes(raw)  # written again, the same bytes
    assert [case.case_id for case in opened.read_cases()] == list(opened.case_ids)


def test_prepare_leaves_nothing_behind_when_the_file_changes_before_its_cases_are_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, raw = _sample_copy(tmp_path)
    real_open = data.open_dataset

    def open_then_change(*args: Any, **kwargs: Any) -> DatasetFile:
        opened = real_open(*args, **kwargs)
        path.write_bytes(raw.replace("借".encode(), "贷".encode(), 1))
        return opened

    monkeypatch.setattr(engine, "open_dataset", open_then_change)
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        with pytest.raises(DataError, match="changed while it was being read"):
            prepare_runs(ws, session, stage="lca", runs=("r1", "r2"), dataset=path)
        session.close()
        db = ws.store.conn
        assert db.execute("SELECT COUNT(*) FROM cases").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_cases_are_copied_once_per_dataset_not_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = _sample_copy(tmp_path)
    n_cases = len(json.loads(SAMPLE.read_bytes()))
    reads: list[int | None] = []
    real_read = DatasetFile.read_cases

    def counted(self: DatasetFile, limit: int | None = None) -> Iterator[Case]:
        reads.append(limit)
        return real_read(self, limit)

    monkeypatch.setattr(DatasetFile, "read_cases", counted)
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="lca", runs=("r1", "r2"), limit=2, dataset=path)
        assert reads == [2]  # r2 found the two cases r1 copied
        prepare_runs(ws, session, stage="lca", runs=("r3", "r4"), dataset=path)
        assert reads == [2, n_cases]  # r3 needs every case; r4 finds them
        prepare_runs(ws, session, stage="all", runs=("r5",), dataset=path)
        assert reads == [2, n_cases]
        session.close()
        stored = ws.store.conn.execute("SELECT idx, case_number, cause_class, data FROM cases ORDER BY idx").fetchall()
    whole = load_dataset(path)
    assert [tuple(row) for row in stored] == [
        (i, case.case_id, whole.class_of(case), case.model_dump_json()) for i, case in enumerate(whole.cases)
    ]
