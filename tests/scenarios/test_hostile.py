"""Hostile inputs: huge, strange or deeply nested data; hostile run ids and model names; prompts
files with the wrong slots; a workspace edited by hand between two commands.

The plain SPEC §3 violations are in data/test_dataset.py. Tests marked `xfail(strict=True)` pin a defect
found here (the reason names it); once it is fixed they pass, and the marker must go.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.benchmark.prompts import DEFAULT_TEMPLATES, FORCE_ASK, LEXAWN
from lexpilot_batch.benchmark.settings import ROLES, Settings
from lexpilot_batch.data import load_dataset
from lexpilot_batch.engine import loop as engine
from lexpilot_batch.engine import poll
from lexpilot_batch.engine.loop import poll_and_advance, submit
from lexpilot_batch.engine.poll import poll_files
from lexpilot_batch.engine.submit import TamperedFile
from lexpilot_batch.errors import ConfigError, DataError, LexpilotError
from lexpilot_batch.report.exports.seed import export_seed
from lexpilot_batch.state.compaction import read_saved, saved_exists, saved_files
from lexpilot_batch.state.workspace import Workspace, slug
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.crash import base_env
from tests.helpers.engine import finish, open_session, prepare_runs, records, thread_counts

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_cases.json"
CATEGORIES = Path(__file__).resolve().parents[2] / "data" / "categories.json"
SAFE_NAME = re.compile(r"^[A-Za-z0-9._+-]+$")
WINDOWS_DEVICES = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}
# Characters a terminal acts on or that reorder what it shows: C0 and C1 controls (\n aside),
# bidirectional overrides and isolates, and the Unicode line and paragraph separators.
UNSAFE_FOR_TERMINALS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch):
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


def sample(n: int | None = None) -> list[dict]:
    cases = json.loads(SAMPLE.read_text(encoding="utf-8"))
    return cases[:n] if n else cases


def prepare(ws, session, *, stage, dataset, categories=None, runs=("r1",), model="sim-eval", limit=None):
    """engine.prepare with a dataset and categories of the test's own."""
    spec = RunSpec(tuple(runs), (model,), stage, Settings(), dataset=dataset, categories=categories, limit=limit)
    return engine.prepare(ws, session, spec)


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def cli(args: list[str], cwd: Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m lexpilot_batch ARGS`, with no provider settings from this machine."""
    return subprocess.run(
        [sys.executable, "-m", "lexpilot_batch", *args],
        check=False,
        cwd=cwd,
        env=base_env(**env),
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
    )


def assert_clean_failure(result: subprocess.CompletedProcess[str], *needles: str) -> list[str]:
    """Exit 1, `Error: ...` first on stderr, no traceback; returns stderr's lines."""
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stdout + result.stderr, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines and lines[0].startswith("Error: "), result.stderr[-2000:]
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr[-2000:])
    return lines


def jsonl_files_parse(root: Path) -> int:
    """Every .jsonl line and .json file under root is valid JSON; returns how many files."""
    n = 0
    for path in root.rglob("*.json*"):
        if path.suffix == ".jsonl":
            raw = path.read_bytes()
            assert raw.endswith(b"\n"), path
            for line in raw.split(b"\n")[:-1]:
                json.loads(line)
        elif path.suffix == ".json":
            json.loads(path.read_bytes())
        else:
            continue
        n += 1
    return n


# --- huge, strange and nested datasets -------------------------------------------------------------


@pytest.mark.slow  # a 5 MB message through a whole run: a long simulation
def test_a_5_mb_message_loads_and_runs(tmp_path):
    cases = sample(2)
    huge = "借款" * (5 * 2**20 // 6) + "。请问能得到支持吗？"
    cases[0]["underspecified_history"][0]["content"] = huge
    dataset = write_json(tmp_path / "huge.json", cases)
    assert load_dataset(dataset).cases[0].underspecified_history[0].content == huge
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="lca", dataset=dataset)
        finish(ws, session)
        session.close()
        assert thread_counts(ws) == {"done": 4}
        [record] = [r for k, r in records(ws).items() if k[3] == 0 and k[4] == "u"]
        assert record["history"][0]["content"] == huge
        [first] = saved_files(ws.requests_dir)[:1]
        assert len(read_saved(first)) > 5 * 2**20


# Control characters a JSON encoder must escape, escape sequences, a bidi override, DEL and C1.
CONTROLS = "\x00\x01\x1b[2J\x1b]0;title\x07\u202eevil\x7f\x9b\r\n\t"


def hostile_dataset(tmp_path: Path) -> tuple[Path, Path, list[dict]]:
    cases = sample(3)
    case = cases[0]
    case["complete_history"][0]["content"] += CONTROLS
    case["underspecified_history"][0]["content"] += CONTROLS
    case["key_details"] = {
        k + CONTROLS: (v + CONTROLS if isinstance(v, str) else [x + CONTROLS for x in v])
        for k, v in case["key_details"].items()
    }
    case["focal_point"] = [p + CONTROLS for p in case["focal_point"]]
    case["result_dict"] = {claim + CONTROLS: verdict for claim, verdict in case["result_dict"].items()}
    cause = case["cause_of_action"] + CONTROLS
    case["cause_of_action"] = cause
    categories = json.loads(CATEGORIES.read_text(encoding="utf-8"))
    first_class = next(name for name in categories if not name.startswith("$"))  # `$` keys are notes
    categories[first_class].append(cause)
    return write_json(tmp_path / "controls.json", cases), write_json(tmp_path / "cats.json", categories), cases


def test_control_characters_in_contents_and_causes_round_trip_through_a_run(tmp_path):
    dataset, categories, cases = hostile_dataset(tmp_path)
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare(ws, session, stage="all", dataset=dataset, categories=categories)
        finish(ws, session)
        session.close()
        assert thread_counts(ws) == {"done": 3 * 6}
        mine = {k: r for k, r in records(ws).items() if k[3] == 0}
        lca_u = mine[("r1", "sim-eval", "lca", 0, "u")]
        assert lca_u["history"] == cases[0]["underspecified_history"]  # every character kept
        assert [c["claim"] for c in mine[("r1", "sim-eval", "ljp_gold", 0, "")]["claims"]] == list(
            cases[0]["result_dict"]
        )
        out = tmp_path / "out"
        export_seed(ws, out)
    assert jsonl_files_parse(tmp_path / "ws") >= 10
    assert jsonl_files_parse(out) >= 10
    [exported] = (out / "eval_results").rglob("LCA_results.jsonl")
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["cause_of_action"] == cases[0]["cause_of_action"]


def test_validate_data_output_stays_clean_with_control_characters_in_contents(tmp_path):
    dataset, categories, _ = hostile_dataset(tmp_path)
    result = cli(["validate-data", "--dataset", str(dataset), "--categories", str(categories)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith("valid")
    assert not UNSAFE_FOR_TERMINALS.search(result.stdout + result.stderr)


def test_control_characters_in_case_numbers_are_refused_and_never_printed_raw(tmp_path):
    cases = sample(2)
    cases[0]["case_number"] = "（2022）京0105民初1\x1b]0;pwned\x07号\u202e"
    cases[1]["result_dict"] = {"判令被告\u202e偿还\x85借款": "全部支持"}  # an invalid verdict: a problem line
    dataset = write_json(tmp_path / "numbers.json", cases)
    result = cli(["validate-data", "--dataset", str(dataset)], tmp_path)
    assert_clean_failure(result, "case #1", "case_number")
    assert not UNSAFE_FOR_TERMINALS.search(result.stdout + result.stderr), result.stderr


def nest(depth: int, leaf: object = "细节") -> object:
    value = leaf
    for i in range(depth):
        value = {"层": value} if i % 2 else [value]
    return value


def test_nested_key_details_are_a_clear_error_and_nested_extra_fields_are_kept(tmp_path):
    cases = sample(2)
    cases[0]["key_details"] = {"借贷关系": nest(10)}
    with pytest.raises(DataError) as caught:
        load_dataset(write_json(tmp_path / "kd.json", cases))
    assert caught.value.problems == [
        (
            'case #1 (case_number （2022）京0105民初18732号): key_details["借贷关系"]: is an object; expected a '
            "non-empty string or an array of strings"
        )
    ]

    cases = sample(2)
    cases[0]["judges_notes"] = nest(10)
    dataset = write_json(tmp_path / "extra.json", cases)
    assert load_dataset(dataset).cases[0].model_extra == {"judges_notes": nest(10)}
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare(ws, session, stage="lca", dataset=dataset)
        finish(ws, session)
        session.close()
        assert thread_counts(ws) == {"done": 4}
        [data] = ws.store.conn.execute("SELECT data FROM cases WHERE idx = 0").fetchone()
        assert json.loads(data)["judges_notes"] == nest(10)


def test_100k_levels_of_nesting_are_one_clear_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    lines = assert_clean_failure(cli(["validate-data", "--dataset", str(deep)], tmp_path), "too deeply")
    assert len(lines) == 1


@pytest.mark.slow  # hundreds of levels through every reader and a run: a long simulation
def test_a_case_nested_hundreds_of_levels_is_refused_or_runs(tmp_path):
    for depth in (200, 400):
        cases = sample(2)
        cases[0]["judges_notes"] = nest(depth)
        dataset = write_json(tmp_path / f"nested{depth}.json", cases)
        result = cli(
            [
                "prepare",
                "--stage",
                "lca",
                "--model",
                "sim-eval",
                "--provider",
                "simulated",
                "--dataset",
                str(dataset),
                "--root",
                str(tmp_path / f"ws{depth}"),
            ],
            tmp_path,
        )
        if result.returncode == 0:
            done = cli(
                [
                    "poll-and-advance",
                    "--submit",
                    "--wait",
                    "--poll-interval",
                    "0.05",
                    "--provider",
                    "simulated",
                    "--root",
                    str(tmp_path / f"ws{depth}"),
                ],
                tmp_path,
            )
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
        else:
            assert_clean_failure(result, "case #1", "judges_notes")


@pytest.mark.slow  # 100 MB written and read by a CLI process
def test_a_100_mb_dataset_loads_in_bounded_time(tmp_path):
    cases = sample()
    encoded = [json.dumps(c, ensure_ascii=False) for c in cases]
    numbers = [json.dumps(c["case_number"], ensure_ascii=False) for c in cases]
    parts, size, i = [], 0, 0
    while size < 100 * 2**20:
        k = i % len(cases)
        part = encoded[k].replace(numbers[k], json.dumps(f"BIG-{i}"), 1)
        parts.append(part)
        size += len(part.encode("utf-8")) + 2
        i += 1
    big = tmp_path / "big.json"
    big.write_text("[" + ",\n".join(parts) + "]", encoding="utf-8")
    result = cli(["validate-data", "--dataset", str(big)], tmp_path, timeout=20)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(rf"^Cases\s+{i}$", result.stdout, re.MULTILINE)


@pytest.mark.slow  # 200 MB written and refused by CLI processes
def test_100_mb_of_junk_fails_at_once_with_one_line(tmp_path):
    binary = tmp_path / "junk.bin"
    binary.write_bytes(os.urandom(2**20) * 100)
    lines = assert_clean_failure(cli(["validate-data", "--dataset", str(binary)], tmp_path, timeout=20), "not UTF-8")
    assert len(lines) == 1
    text = tmp_path / "junk.csv"
    text.write_bytes(b"case_number,cause,content\n" + b"1,\xe6\xb0\x91\xe9\x97\xb4,hello world\n" * (100 * 2**20 // 30))
    lines = assert_clean_failure(
        cli(["validate-data", "--dataset", str(text)], tmp_path, timeout=20), "not valid JSON", "line 1 column 1"
    )
    assert len(lines) == 1


@pytest.mark.slow  # 700,000 cases through a CLI process
def test_a_file_of_millions_of_wrong_cases_fails_in_bounded_time_and_memory(tmp_path):
    junk = tmp_path / "empties.json"
    junk.write_text("[" + ",".join(["{}"] * (2 * 2**20 // 3)) + "]", encoding="utf-8")  # 700,000 cases

    def limit_memory() -> None:  # pragma: no cover - runs in the child
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (1_500 * 2**20, 1_500 * 2**20))

    try:
        result = subprocess.run(
            [sys.executable, "-m", "lexpilot_batch", "validate-data", "--dataset", str(junk)],
            check=False,
            env=base_env(),
            capture_output=True,
            text=True,
            encoding="utf-8",
            # A bound against a pathological (quadratic) reading, not a measure of speed: reading them
            # takes 0.4 s, and a quadratic one minutes; the margin is for a loaded machine.
            timeout=30,
            preexec_fn=limit_memory if sys.platform != "win32" else None,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("validate-data took more than 30 s on 2 MB (reading them takes 0.4 s)")
    lines = assert_clean_failure(result, "missing fields")
    assert len(lines) <= 60


# --- prompts files --------------------------------------------------------------------------------


def test_a_prompts_file_with_a_missing_and_an_extra_slot_is_refused_by_prepare(tmp_path):
    prompts_file = write_json(
        tmp_path / "prompts.json",
        {
            LEXAWN: DEFAULT_TEMPLATES[LEXAWN].replace("{history}", "（历史）"),
            FORCE_ASK: DEFAULT_TEMPLATES[FORCE_ASK] + "\n{key_details}",  # would leak the hidden facts
        },
    )
    root = tmp_path / "ws"
    result = cli(
        [
            "prepare",
            "--stage",
            "all",
            "--model",
            "sim-eval",
            "--provider",
            "simulated",
            "--prompts",
            str(prompts_file),
            "--root",
            str(root),
        ],
        tmp_path,
    )
    lines = assert_clean_failure(result, str(prompts_file))
    assert lines[1:] == ["  - lexawn: missing slot(s) {history}", "  - force_ask: unknown slot(s) {key_details}"]
    assert result.stdout == ""
    assert not list(root.rglob("*.jsonl")) and not (root / "runs").exists()


# --- hostile run ids and model names ---------------------------------------------------------------

RUN_IDS = [
    "../escape",
    "a/b",
    "a\\b",
    "c:d",
    "with space",
    "中文运行",
    "CON",
    "..",
    "aux",
    "x" * 100,
    "-rf",
    ".hidden",
    "COM1",
]
MODELS = ["../../m:od el\\中/CON", "org/Qwen2.5-72B:latest", "m" * 200]


def listing(root: Path, skip: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if skip not in p.parents and p != skip}


def assert_safe_tree(root: Path) -> None:
    for path in root.rglob("*"):
        assert path.resolve().is_relative_to(root.resolve()), path
        name = path.name
        assert SAFE_NAME.match(name), f"unsafe file name {name!r}"
        assert not name.endswith((".", " ")), name
        assert name.split(".")[0].upper() not in WINDOWS_DEVICES, f"Windows device name {name!r}"


@pytest.mark.slow  # every hostile name through every stage: a long simulation
def test_hostile_run_ids_and_models_stay_inside_the_workspace(tmp_path):
    root = tmp_path / "ws"
    before = listing(tmp_path, root)
    with Workspace(root) as ws:
        session = open_session(ws)
        for model in MODELS:
            prepare_runs(ws, session, stage="all", runs=RUN_IDS, model=model, limit=1)
        finish(ws, session)
        session.close()
        assert thread_counts(ws) == {"done": len(RUN_IDS) * len(MODELS) * 6}
        stored = {(r["run_id"], r["model"]) for r in ws.store.conn.execute("SELECT run_id, model FROM runs")}
        assert stored == {(r, m) for r in RUN_IDS for m in MODELS}
        ids = [r[0] for r in ws.store.conn.execute("SELECT custom_id FROM requests")]
        assert ids and all(len(i) <= 64 and i.isascii() and SAFE_NAME.match(i) for i in ids)
        export_seed(ws, tmp_path / "out")
    assert listing(tmp_path, root) - before == {p for p in listing(tmp_path, root) if p.startswith("out")}
    assert_safe_tree(root)
    assert_safe_tree(tmp_path / "out")
    assert len(list((root / "runs").rglob("manifest.json"))) == len(RUN_IDS) * len(MODELS)


def test_device_names_with_an_extension_are_not_file_names_on_windows():
    for name in ("nul.txt", "con.1", "COM1.log", "aux.json", "LPT9.x"):
        assert slug(name).split(".")[0].upper() not in WINDOWS_DEVICES, slug(name)


@pytest.mark.parametrize("bad", ["run\x00one", "run\x1b[2J", "run\none", "run\tone", "\x07"])
def test_run_ids_and_models_with_control_characters_are_refused(tmp_path, bad):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        with pytest.raises(ConfigError, match="--run-id must be 1-100 printable characters"):
            prepare_runs(ws, session, runs=(bad,), limit=1)
        with pytest.raises(ConfigError, match="--model must be 1-200 printable characters"):
            prepare_runs(ws, session, model=f"sim{bad}", limit=1)
        session.close()
        assert ws.store.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_overlong_run_ids_and_models_are_refused(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        with pytest.raises(ConfigError, match="--run-id must be 1-100 printable characters"):
            prepare_runs(ws, session, runs=("x" * 101,), limit=1)
        with pytest.raises(ConfigError, match="--model must be 1-200 printable characters"):
            prepare_runs(ws, session, model="m" * 201, limit=1)
        session.close()


def test_a_control_character_run_id_is_one_clear_line_from_the_cli(tmp_path):
    root = tmp_path / "ws"
    result = cli(
        [
            "prepare",
            "--stage",
            "lca",
            "--model",
            "sim-eval",
            "--provider",
            "simulated",
            "--run-id",
            "run\x1b]0;pwned\x07",
            "--root",
            str(root),
        ],
        tmp_path,
    )
    lines = assert_clean_failure(result, "--run-id must be 1-100 printable characters")
    assert len(lines) == 1 and not UNSAFE_FOR_TERMINALS.search(result.stderr)


@pytest.mark.parametrize("bad", ["run\x7f", "run\x85one", "run\u202eeno", "run\u2028one", "run\x9b2J"])
def test_run_ids_with_other_control_characters_are_refused(tmp_path, bad):
    assert unicodedata.category(bad[3]) in ("Cc", "Cf", "Zl")
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        with pytest.raises(ConfigError):
            prepare_runs(ws, session, runs=(bad,), limit=1)
        with pytest.raises(ConfigError):
            prepare_runs(ws, session, model=bad, limit=1)
        session.close()


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_the_simulated_provider_keeps_result_lines_holding_unicode_line_separators(tmp_path, separator):
    from lexpilot_batch.simulated.store import Store

    line = {"custom_id": "k-0-gen-1", "response": {"body": {"content": f"第一行{separator}第二行"}}}
    store = Store(tmp_path / "sim")
    store.write_results("batch_1", [json.dumps(line, ensure_ascii=False)])
    assert [json.loads(raw) for raw in store.read_results("batch_1")] == [line]


# --- a workspace edited by hand ----------------------------------------------------------------------

STAGE, LIMIT = "all", 4


@pytest.fixture(scope="module")
def untouched(tmp_path_factory) -> dict:
    with Workspace(tmp_path_factory.mktemp("untouched") / "ws") as ws:
        session = open_session(ws, max_requests=3)
        prepare_runs(ws, session, stage=STAGE, limit=LIMIT)
        finish(ws, session)
        session.close()
        return records(ws)


@pytest.fixture
def ws(tmp_path):
    with Workspace(tmp_path / "ws") as workspace:
        yield workspace


def start(ws: Workspace, **options):
    session = open_session(ws, max_requests=3, **options)
    prepare_runs(ws, session, stage=STAGE, limit=LIMIT)
    return session


def file_rows(ws: Workspace, status: str) -> list[dict]:
    return [dict(r) for r in ws.store.conn.execute("SELECT * FROM files WHERE status = ? ORDER BY pk", (status,))]


def test_a_saved_result_file_removed_before_ingest_is_named_and_doctor_downloads_it_again(ws, untouched, monkeypatch):
    session = start(ws)
    submit(ws, session)
    real = poll.ingest_file

    def killed(ws_, row):
        monkeypatch.setattr(poll, "ingest_file", real)
        raise KeyboardInterrupt  # the command stops after saving the results, before ingesting them

    monkeypatch.setattr(poll, "ingest_file", killed)
    with pytest.raises(KeyboardInterrupt):
        for _ in range(200):
            poll_files(ws, session)
    [row] = file_rows(ws, "downloaded")
    saved = ws.path(row["output_path"])
    saved.unlink()

    with pytest.raises(LexpilotError) as caught:
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
    message = str(caught.value)
    assert str(saved) in message and "lexpilot-batch doctor" in message and "download them again" in message

    findings = doctor.diagnose(ws)
    assert [f.kind for f in findings] == [doctor.RESULT_MISSING]
    assert doctor.repair(ws, findings)
    finish(ws, session)
    session.close()
    assert records(ws) == untouched
    assert saved_exists(saved) and doctor.diagnose(ws) == []


def test_a_request_file_edited_before_anything_was_sent_is_compiled_again(ws, untouched):
    session = start(ws)
    rows = file_rows(ws, "compiled")
    assert len(rows) >= 2
    originals = {r["path"]: ws.path(r["path"]).read_bytes() for r in rows}
    edited = ws.path(rows[1]["path"])
    edited.write_bytes(originals[rows[1]["path"]].replace(b'"max_tokens":8192', b'"max_tokens":1', 1))
    ws.path(rows[0]["path"]).unlink()

    finish(ws, session)  # submit finds both and compiles the wave again before sending anything
    session.close()
    assert records(ws) == untouched
    assert {p: read_saved(ws.path(p)) for p in originals} == originals


def test_a_request_file_edited_after_part_of_its_wave_was_sent_is_refused(ws, untouched):
    session = start(ws)

    class Stop(Exception):
        pass

    def stop(path: str) -> None:
        raise Stop

    with pytest.raises(Stop):
        submit(ws, session, on_file=stop)  # one file sent, then the command dies
    target = file_rows(ws, "compiled")[0]
    with open(ws.path(target["path"]), "ab") as fh:
        fh.write(b"\n")
    for _ in range(2):  # refused every time, before anything else is sent
        with pytest.raises(TamperedFile) as caught:
            poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
        assert target["path"] in str(caught.value) and "lexpilot-batch doctor" in str(caught.value)
        assert len(file_rows(ws, "submitted")) == 1
    doctor.repair(ws, doctor.diagnose(ws))
    finish(ws, session)
    session.close()
    assert records(ws) == untouched


def test_a_sync_request_file_edited_after_submit_is_not_sent(ws, monkeypatch, tmp_path):
    """The edit must be refused, or undone by compiling the file again, never sent."""
    from lexpilot_batch.simulated import SimulatedServer, parse_faults

    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        for role in ROLES:
            monkeypatch.delenv(f"LEXPILOT_{role.upper()}_BASE_URL", raising=False)
        with Workspace(tmp_path / "untouched-sync") as clean:  # sync answers differ from batch ones
            reference = open_session(clean, max_requests=3, backends={"eval": "sync"})
            prepare_runs(clean, reference, stage=STAGE, limit=LIMIT)
            finish(clean, reference)
            reference.close()
            untouched_sync = records(clean)
        session = open_session(ws, max_requests=3, backends={"eval": "sync"})
        prepare_runs(ws, session, stage=STAGE, limit=LIMIT)
        submit(ws, session)
        row = file_rows(ws, "submitted")[0]
        assert row["backend"] == "sync"
        path = ws.path(row["path"])
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        other = json.loads(SAMPLE.read_text(encoding="utf-8"))[-1]["underspecified_history"][0]["content"]
        for line in lines:  # every prompt now asks about another case
            line["body"]["messages"][0]["content"] = DEFAULT_TEMPLATES[LEXAWN].format(history=f"User: {other}")
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
        try:
            finish(ws, session)
        except TamperedFile as exc:  # refused, naming the file
            assert row["path"] in str(exc)
        else:  # or compiled again from the database before it was run
            assert records(ws) == untouched_sync
        finally:
            session.close()
