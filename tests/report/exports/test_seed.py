"""The seed-layout export: files, records, order, manifests, safe paths, and the report's numbers.

The report's per-run metrics are checked against `helpers.independent_metrics`, which scores the exported
files with scikit-learn and shares no code with `lexpilot_batch.benchmark.metrics` or `report`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.data import SAMPLE_NOTE, load_categories, load_dataset
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import build_report
from lexpilot_batch.report.exports.seed import export_seed
from lexpilot_batch.report.results import load_run_results
from lexpilot_batch.state.workspace import Workspace, seed_name, slug
from lexpilot_batch.util import resources
from tests.helpers.engine import finish, open_session, prepare_runs
from tests.helpers.independent_metrics import lca, ljp, score_export

RUNS = ("r1", "r2", "r3")
MODEL = "sim-eval"
# task -> {relative file: fields every record must have}
FILES: dict[str, dict[str, set[str]]] = {
    "lca": {
        "AwN_gen/{run}/{model}/a1.jsonl": {"case_number", "history_type", "history", "response"},
        "eval_results/{run}/{model}/LCA_results.jsonl": {
            "case_number",
            "history_type",
            "history",
            "response",
            "label",
            "cause_of_action",
            "cause_class",
        },
    },
    "ljp_interaction": {
        "AwN_gen/{run}/{model}/interaction.jsonl": {
            "case_number",
            "history",
            "continued_history",
            "rounds",
            "stop_reason",
            "final_response",
        },
        "eval_results/{run}/{model}/LJP_interaction.jsonl": {
            "case_number",
            "history",
            "response",
            "claims",
            "continued_history",
            "rounds",
            "stop_reason",
            "final_response",
            "cause_of_action",
            "cause_class",
        },
    },
    "dcg": {
        "Force_ask_gen/{run}/{model}/force_ask.jsonl": {"case_number", "history", "rounds"},
        "eval_results/{run}/{model}/DCG_results.jsonl": {
            "case_number",
            "history",
            "rounds",
            "success",
            "cause_of_action",
            "cause_class",
        },
    },
    "ljp_direct": {
        "Force_judge_gen/{run}/{model}/a1_direct.jsonl": {"case_number", "history", "response"},
        "eval_results/{run}/{model}/LJP_direct.jsonl": {
            "case_number",
            "history",
            "response",
            "claims",
            "cause_of_action",
            "cause_class",
        },
    },
    "ljp_gold": {
        "Force_judge_gen/{run}/{model}/a1_force_judge.jsonl": {"case_number", "history", "response"},
        "eval_results/{run}/{model}/LJP_gold.jsonl": {
            "case_number",
            "history",
            "response",
            "claims",
            "cause_of_action",
            "cause_class",
        },
    },
}
TOP_FOLDERS = ("runs", "AwN_gen", "Force_ask_gen", "Force_judge_gen", "eval_results")


def read_jsonl(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert raw == b"" or (raw.endswith(b"\n") and b"\n\n" not in raw), f"{path}: not one record per line"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """Three runs of every task on the bundled sample, finished together in shared waves."""
    with Workspace(tmp_path_factory.mktemp("ws")) as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="all", runs=RUNS, model=MODEL)
            finish(ws, session)
        finally:
            session.close()
        yield ws


@pytest.fixture(scope="module")
def exported(finished, tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    return out, export_seed(finished, out).files


@pytest.fixture(scope="module")
def dataset():
    return load_dataset(None)


def path_of(template: str, run_id: str, model: str = MODEL) -> str:
    return template.format(run=seed_name(run_id), model=seed_name(model))


def test_every_file_is_written_with_the_minimum_fields(exported, dataset):
    out, written = exported
    expected = {path_of("runs/{run}/{model}/manifest.json", r) for r in RUNS}
    expected |= {path_of("runs/{run}/{model}/export.json", r) for r in RUNS}
    expected |= {path_of("runs/{run}/{model}/judge_calls.jsonl", r) for r in RUNS}
    expected |= {path_of(t, r) for r in RUNS for files in FILES.values() for t in files}
    assert {p.relative_to(out).as_posix() for p in written} == expected
    assert set(tree(out)) == expected  # nothing else, no temporary files left behind
    n_cases = len(dataset.cases)
    for run_id in RUNS:
        for task, files in FILES.items():
            for template, fields in files.items():
                recs = read_jsonl(out / path_of(template, run_id))
                assert len(recs) == (2 * n_cases if task == "lca" else n_cases), template
                for rec in recs:
                    assert fields <= set(rec), f"{template}: missing {fields - set(rec)}"
                    assert isinstance(rec["history"], list) and rec["history"], template
                    assert all(set(m) == {"role", "content"} for m in rec["history"]), template


def test_records_follow_dataset_order_and_keep_histories(exported, dataset):
    out, _ = exported
    numbers = [c.case_number for c in dataset.cases]
    for run_id in RUNS:
        a1 = read_jsonl(out / path_of("AwN_gen/{run}/{model}/a1.jsonl", run_id))
        assert [(r["case_number"], r["history_type"]) for r in a1] == [
            (n, t) for n in numbers for t in ("complete", "underspecified")
        ]
        for r in a1:
            case = dataset.cases[numbers.index(r["case_number"])]
            source = case.complete_history if r["history_type"] == "complete" else case.underspecified_history
            assert r["history"] == [m.model_dump() for m in source]
        for task, files in FILES.items():
            if task == "lca":
                continue
            for template in files:
                recs = read_jsonl(out / path_of(template, run_id))
                assert [r["case_number"] for r in recs] == numbers, template
                for r, case in zip(recs, dataset.cases, strict=False):
                    source = case.complete_history if task == "ljp_gold" else case.underspecified_history
                    assert r["history"] == [m.model_dump() for m in source], template


def test_claims_are_in_result_dict_order(exported, dataset):
    out, _ = exported
    for run_id in RUNS:
        for task in ("ljp_direct", "ljp_gold", "ljp_interaction"):
            template = next(t for t in FILES[task] if t.startswith("eval_results"))
            for rec, case in zip(read_jsonl(out / path_of(template, run_id)), dataset.cases, strict=False):
                assert [(c["claim"], c["gold"]) for c in rec["claims"]] == list(case.result_dict.items())
                assert all(c["predicted"] in ("支持", "部分支持", "驳回") for c in rec["claims"])


def test_generation_and_eval_records_agree(exported, finished):
    out, _ = exported
    class_of = load_categories(None)  # the mapping the runs were registered with
    for run_id in RUNS:
        a1 = read_jsonl(out / path_of("AwN_gen/{run}/{model}/a1.jsonl", run_id))
        lca_res = read_jsonl(out / path_of("eval_results/{run}/{model}/LCA_results.jsonl", run_id))
        assert [{k: r[k] for k in a1[0]} for r in lca_res] == a1
        assert {r["label"] for r in lca_res} <= {"judgment", "clarification"}
        ask = read_jsonl(out / path_of("Force_ask_gen/{run}/{model}/force_ask.jsonl", run_id))
        dcg_res = read_jsonl(out / path_of("eval_results/{run}/{model}/DCG_results.jsonl", run_id))
        for gen, res in zip(ask, dcg_res, strict=True):
            assert [set(r) for r in gen["rounds"]] == [{"question", "reply"}, {"question"}]
            assert [{k: v for k, v in r.items() if k != "decision"} for r in res["rounds"]] == gen["rounds"]
            assert [r["decision"] for r in res["rounds"]] in ([a, b] for a in "是否" for b in "是否")
            assert res["success"] == ("是" in [r["decision"] for r in res["rounds"]])
        inter = read_jsonl(out / path_of("AwN_gen/{run}/{model}/interaction.jsonl", run_id))
        inter_res = read_jsonl(out / path_of("eval_results/{run}/{model}/LJP_interaction.jsonl", run_id))
        for gen, res in zip(inter, inter_res, strict=True):
            assert {k: res[k] for k in gen} == gen
            assert res["response"] == res["final_response"] == res["continued_history"][-1]["content"]
        for template in (t for files in FILES.values() for t in files if t.startswith("eval_results")):
            for rec in read_jsonl(out / path_of(template, run_id)):
                assert rec["cause_class"] == class_of[rec["cause_of_action"]]


def test_manifest_equals_the_database(exported, finished):
    out, _ = exported
    for row in finished.store.conn.execute("SELECT run_id, model, manifest FROM runs"):
        path = out / path_of("runs/{run}/{model}/manifest.json", row["run_id"])
        assert json.loads(path.read_text(encoding="utf-8")) == json.loads(row["manifest"])
        # The same bytes as the workspace's own copy.
        own = finished.runs_dir / slug(row["run_id"]) / slug(row["model"]) / "manifest.json"
        assert path.read_bytes() == own.read_bytes()


def assert_report_matches(ws: Workspace, out: Path, partial: bool = False) -> int:
    """Every per-run value of the report, overall and per class, equals the independent one."""
    independent = score_export(out, partial)
    report = build_report(load_run_results(ws))
    compared = 0
    for group in report["groups"]:
        for task, summary in group["tasks"].items():
            for run_id in group["runs"]:
                mine = independent[(run_id, group["model"])][task]
                scopes = [("overall", summary["overall"], mine["overall"])]
                scopes += [(cls, s, mine["by_class"].get(cls, {})) for cls, s in summary["by_class"].items()]
                assert set(mine["by_class"]) <= set(summary["by_class"])
                for scope, theirs, ours in scopes:
                    for metric, values in theirs.items():
                        want, got = values["per_run"][run_id], ours.get(metric)
                        where = f"{run_id} {task} {scope} {metric}"
                        if want is None:
                            assert got is None, f"{where}: report undefined, independent {got}"
                        else:
                            assert got is not None and got == pytest.approx(want, abs=1e-9), where
                        compared += 1
    return compared


def test_exported_metrics_equal_the_report(exported, finished):
    out, _ = exported
    assert set(score_export(out)) == {(r, MODEL) for r in RUNS}
    # 3 runs x (5 LCA + 1 DCG + 3x2 LJP metrics) x (overall + six classes)
    assert assert_report_matches(finished, out) == 3 * 12 * 7


def test_undefined_metrics_agree_with_the_report(tmp_path):
    """Records rewritten so that metrics are undefined: both sides must say None, not 0. Failed
    threads make the export refuse, as the report does; `partial` writes marked files."""
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="all", limit=2)
            finish(ws, session)
        finally:
            session.close()
        with ws.store.transaction() as db:
            # LCA: only underspecified histories, all asked -> F1_C, Acc_C and Macro-F1 undefined.
            db.execute("UPDATE threads SET status = 'failed' WHERE task = 'lca' AND variant = 'c'")
            # DCG: nothing finished -> no denominator.
            db.execute("UPDATE threads SET status = 'failed' WHERE task = 'dcg'")
            for row in db.execute("SELECT pk, task, record FROM threads WHERE status = 'done'").fetchall():
                record = json.loads(row["record"])
                if row["task"] == "lca":
                    record["label"] = "clarification"
                elif row["task"] == "ljp_direct":  # one label everywhere: zero expected disagreement
                    record["claims"] = [{**c, "gold": "支持", "predicted": "支持"} for c in record["claims"]]
                db.execute(
                    "UPDATE threads SET record = ? WHERE pk = ?", (json.dumps(record, ensure_ascii=False), row["pk"])
                )
        with pytest.raises(LexpilotError) as refused:
            export_seed(ws, tmp_path / "out")
        assert not (tmp_path / "out").exists()
        message = str(refused.value)
        assert "r1 / sim-eval / dcg: failed: " in message and "lca: failed: " in message and "--partial" in message
        exported = export_seed(ws, tmp_path / "out", partial=True)
        assert_report_matches(ws, tmp_path / "out", partial=True)
        mine = score_export(tmp_path / "out", partial=True)[("r1", MODEL)]
    assert mine["lca"]["overall"] == {"macro_f1": None, "f1_u": 1.0, "f1_c": None, "acc_c": None, "acc_u": 1.0}
    assert mine["dcg"]["overall"] == {"success_rate": None}
    assert mine["ljp_direct"]["overall"] == {"qwk": None, "accuracy": 1.0}
    out = tmp_path / "out"
    # Files of unfinished tasks are marked; those of finished tasks keep the seed's names.
    assert (out / path_of("eval_results/{run}/{model}/DCG_results.partial.jsonl", "r1")).read_bytes() == b""
    assert (out / path_of("Force_ask_gen/{run}/{model}/force_ask.partial.jsonl", "r1")).read_bytes() == b""
    assert len(read_jsonl(out / path_of("eval_results/{run}/{model}/LCA_results.partial.jsonl", "r1"))) == 2
    assert (out / path_of("eval_results/{run}/{model}/LJP_gold.jsonl", "r1")).exists()
    assert not any(out.rglob("DCG_results.jsonl")) and not any(out.rglob("LCA_results.jsonl"))
    about = json.loads((out / path_of("runs/{run}/{model}/export.json", "r1")).read_text(encoding="utf-8"))
    assert about["complete"] is False
    assert about["tasks"]["dcg"] == {
        "complete": False,
        "records": 0,
        "missing": [],
        "failed": about["tasks"]["dcg"]["failed"],
    }
    assert len(about["tasks"]["dcg"]["failed"]) == 2 and about["tasks"]["ljp_gold"]["complete"] is True
    assert any("partial" in note for note in exported.notes)


def test_independent_scorer_edge_cases():
    """The independent scorer itself, on numbers worked out by hand."""
    always_ask = [{"history_type": t, "label": "clarification"} for t in ("complete", "underspecified")] * 3
    assert lca(always_ask) == {
        "macro_f1": pytest.approx(1 / 3),
        "f1_u": pytest.approx(2 / 3),
        "f1_c": 0.0,
        "acc_c": 0.0,
        "acc_u": 1.0,
    }
    only_u = [{"history_type": "underspecified", "label": "clarification"}]
    assert lca(only_u) == {"macro_f1": None, "f1_u": 1.0, "f1_c": None, "acc_c": None, "acc_u": 1.0}
    same = [{"claims": [{"gold": "支持", "predicted": "支持"}] * 3}]
    assert ljp(same) == {"qwk": None, "accuracy": 1.0}
    spread = [{"claims": [{"gold": "支持", "predicted": "驳回"}, {"gold": "驳回", "predicted": "驳回"}]}]
    assert ljp(spread)["qwk"] == pytest.approx(0.0) and ljp(spread)["accuracy"] == 0.5


def test_export_filtered_by_run_id_writes_only_that_run(finished, tmp_path):
    written = export_seed(finished, tmp_path, run_id="r2").files
    assert written and set(tree(tmp_path)) == {p.relative_to(tmp_path).as_posix() for p in written}
    for top in TOP_FOLDERS:
        assert [p.name for p in (tmp_path / top).iterdir()] == ["r2"], top
    with pytest.raises(LexpilotError, match="'r9'"):
        export_seed(finished, tmp_path / "none", run_id="r9")
    with pytest.raises(LexpilotError, match="'other-model'"):
        export_seed(finished, tmp_path / "none", model="other-model")
    assert not (tmp_path / "none").exists()


def test_exporting_twice_gives_identical_bytes(exported, finished, tmp_path):
    out, _ = exported
    export_seed(finished, tmp_path)
    again = tree(tmp_path)
    assert again == tree(out)
    export_seed(finished, tmp_path)  # over an existing export
    assert tree(tmp_path) == again


def test_files_are_utf8_without_escapes(exported):
    out, _ = exported
    text = (out / path_of("eval_results/{run}/{model}/LJP_gold.jsonl", "r1")).read_text(encoding="utf-8")
    assert "支持" in text and "\\u" not in text


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_no_hidden_facts_or_gold_where_they_do_not_belong(exported, dataset):
    out, _ = exported
    hidden = set()
    for case in dataset.cases:
        rendered = prompts.render_key_details(case.key_details)
        hidden |= {line.strip("- 【】") for line in rendered.splitlines() if len(line.strip("- 【】")) >= 8}
    replies = []
    for run_id in RUNS:
        for task, files in FILES.items():
            for template in files:
                recs = read_jsonl(out / path_of(template, run_id))
                keys = _keys(recs)
                assert not keys & {"key_details", "focal_point", "plaintiff_type", "result_dict"}, template
                if not template.startswith("eval_results"):  # generations carry no scores or gold
                    assert not keys & {"claims", "gold", "decision", "success"}, template
                    # The interaction's per-round labels decided when it stopped: they belong to it.
                    assert "label" not in keys or task == "ljp_interaction", template
        # Before any User Model reply nothing the evaluated model wrote or saw may hold a hidden fact.
        seen_before_reply = []
        for template in (
            "eval_results/{run}/{model}/LCA_results.jsonl",
            "eval_results/{run}/{model}/LJP_direct.jsonl",
            "eval_results/{run}/{model}/LJP_gold.jsonl",
        ):
            seen_before_reply += _strings(
                [{k: v for k, v in r.items() if k != "claims"} for r in read_jsonl(out / path_of(template, run_id))]
            )
        for r in read_jsonl(out / path_of("eval_results/{run}/{model}/DCG_results.jsonl", run_id)):
            seen_before_reply += _strings(r["history"]) + [r["rounds"][0]["question"]]
            replies.append(r["rounds"][0]["reply"])
        for r in read_jsonl(out / path_of("eval_results/{run}/{model}/LJP_interaction.jsonl", run_id)):
            seen_before_reply += _strings(r["history"]) + [r["rounds"][0]["response"]]
            replies += [x["reply"] for x in r["rounds"] if "reply" in x]
        leaked = [h for h in hidden if any(h in s for s in seen_before_reply)]
        assert not leaked, f"{run_id}: hidden facts in exported records: {leaked[:3]}"
    assert any(h in reply for reply in replies for h in hidden), "control: User Model replies reveal facts"


# (no whitespace: `prepare` refuses a run id holding some, `study.values.check_one_value`)
HOSTILE = ("../x", "a/b", "运行1", "..", "/abs", "C:\\evil")


def test_hostile_run_ids_stay_inside_out(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca", runs=HOSTILE, limit=1)
            finish(ws, session)
        finally:
            session.close()
        out = tmp_path / "out" / "inner"
        written = export_seed(ws, out).files
    # manifest, export.json, judge_calls.jsonl, a1.jsonl, LCA_results.jsonl per run
    assert len(written) == 5 * len(HOSTILE)
    for path in written:
        assert path.resolve().is_relative_to(out.resolve()), path
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["inner"]
    for top in ("runs", "AwN_gen", "eval_results"):
        assert sorted(p.name for p in (out / top).iterdir()) == sorted(seed_name(h) for h in HOSTILE)
    for hostile in HOSTILE:
        manifest = out / "runs" / seed_name(hostile) / MODEL / "manifest.json"
        assert json.loads(manifest.read_text(encoding="utf-8"))["run_id"] == hostile


def test_a_run_of_the_three_ljp_setups_exports_under_its_own_name_with_its_round_one(tmp_path):
    """`--stage ljp` (no LCA thread): a run id and a model that are safe names are the folders, as
    the seed writes them, and `a1.jsonl` holds the round-1 responses Interaction LJP used."""
    dataset = tmp_path / "cases.json"  # the sample's cases in another file: a user-supplied dataset
    cases = json.loads(resources.sample_dataset().read_text(encoding="utf-8"))[:2]
    dataset.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="ljp", runs=("run1",), model="gpt-4o-mini", dataset=dataset)
            finish(ws, session)
        finally:
            session.close()
        exported = export_seed(ws, tmp_path / "out")
    out = tmp_path / "out"
    assert {p.relative_to(out).as_posix() for p in exported.files} == {
        "runs/run1/gpt-4o-mini/manifest.json",
        "runs/run1/gpt-4o-mini/export.json",
        "runs/run1/gpt-4o-mini/judge_calls.jsonl",
        "AwN_gen/run1/gpt-4o-mini/a1.jsonl",
        "AwN_gen/run1/gpt-4o-mini/interaction.jsonl",
        "Force_judge_gen/run1/gpt-4o-mini/a1_direct.jsonl",
        "Force_judge_gen/run1/gpt-4o-mini/a1_force_judge.jsonl",
        "eval_results/run1/gpt-4o-mini/LJP_direct.jsonl",
        "eval_results/run1/gpt-4o-mini/LJP_gold.jsonl",
        "eval_results/run1/gpt-4o-mini/LJP_interaction.jsonl",
    }
    a1 = read_jsonl(out / "AwN_gen/run1/gpt-4o-mini/a1.jsonl")
    interaction = read_jsonl(out / "AwN_gen/run1/gpt-4o-mini/interaction.jsonl")
    assert [r["case_number"] for r in a1] == [c["case_number"] for c in cases]
    for first, record, case in zip(a1, interaction, cases, strict=True):
        assert first["history_type"] == "underspecified"
        assert first["history"] == case["underspecified_history"] == record["history"]
        assert (
            first["response"]
            == record["rounds"][0]["response"]
            == record["continued_history"][len(first["history"])]["content"]
        )
    about = json.loads((out / "runs/run1/gpt-4o-mini/export.json").read_text(encoding="utf-8"))
    assert about["bundled_sample"] is False and about["complete"] is True and not exported.notes
    assert about["cause_classes"]["classes"] == {
        cls: causes
        for cls, causes in json.loads(resources.default_categories().read_text(encoding="utf-8")).items()
        if not cls.startswith("$")
    }


def test_a_run_of_the_bundled_sample_says_so(exported):
    out, _ = exported
    about = json.loads((out / path_of("runs/{run}/{model}/export.json", "r1")).read_text(encoding="utf-8"))
    assert about["bundled_sample"] is True and about["dataset_note"] == SAMPLE_NOTE
    manifest = json.loads((out / path_of("runs/{run}/{model}/manifest.json", "r1")).read_text(encoding="utf-8"))
    assert manifest["bundled_sample"] is True


def test_seed_names_keep_safe_names_and_never_meet_a_slug():
    for safe in ("run1", "r.2", "GPT-4o", "gpt-4o-mini", "deepseek_chat", "a" * 100):
        assert seed_name(safe) == safe
    unsafe = ("a/b", "运行 1", "..", ".", "run.", "NUL", "com1.txt", "con", "a" * 101, "x y", "a+b")
    names = {seed_name(text) for text in unsafe}
    assert len(names) == len(unsafe)
    for name in names:
        # A slug holds a '+', which no name kept as it is can: the two kinds never collide.
        assert "+" in name and name.split(".")[0].upper() not in ("NUL", "COM1", "CON")
        assert not name.endswith(".") and len(name) <= 60


def test_run_ids_that_differ_only_in_case_are_refused(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca", runs=("Run1", "run1"), limit=1)
            finish(ws, session)
        finally:
            session.close()
        with pytest.raises(LexpilotError, match="ignores case"):
            export_seed(ws, tmp_path / "out")
        assert not (tmp_path / "out").exists()
        export_seed(ws, tmp_path / "one", run_id="run1")  # one at a time is fine


def test_a_finished_export_replaces_the_partial_files_of_an_earlier_one(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca", limit=1)
            finish(ws, session)
        finally:
            session.close()
        with ws.store.transaction() as db:
            db.execute("UPDATE threads SET status = 'active' WHERE variant = 'c'")
        export_seed(ws, tmp_path / "out", partial=True)
        with ws.store.transaction() as db:
            db.execute("UPDATE threads SET status = 'done' WHERE variant = 'c'")
        export_seed(ws, tmp_path / "out")
    found = sorted(p.name for p in (tmp_path / "out").rglob("*.jsonl"))
    assert found == ["LCA_results.jsonl", "a1.jsonl", "judge_calls.jsonl"]


# --- an export is complete or absent (issue 44, item 5) -------------------------------------------


def _full_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """The device fills up after `writes` files of the export are written (each file written whole
    is flushed to the disk with `os.fsync` before it replaces its target)."""
    count = 0

    def fsync(fd: int) -> None:
        nonlocal count
        count += 1
        if count > writes:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)


def _claims(out: Path) -> list[str]:
    """Every run folder whose export.json says complete while a file of its tasks is missing."""
    wrong = []
    for about_path in out.glob("runs/*/*/export.json"):
        about = json.loads(about_path.read_text(encoding="utf-8"))
        where = about_path.parent.relative_to(out / "runs")
        files = [
            f
            for f in out.rglob("*.jsonl")
            if f.name != "judge_calls.jsonl" and f.parent.relative_to(out).parts[1:] == where.parts
        ]
        if about["complete"] and len(files) < 2 * len(about["tasks"]):
            wrong.append(where.as_posix())
    return wrong


@pytest.mark.parametrize("writes", [0, 1, 2, 5, 9])
def test_a_full_disk_leaves_no_export_folder_at_all(finished, tmp_path, monkeypatch, writes):
    """The export wrote manifest.json, then export.json ("complete": true), then the task files
    one by one: a full disk after any of them left a folder claiming a complete run."""
    out = tmp_path / "out"
    _full_after(monkeypatch, writes)
    with pytest.raises(LexpilotError, match="No space left on device") as refused:
        export_seed(finished, out)
    assert _claims(out) == []
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no staging folder left either
    assert f"the export changed nothing under {out}" in str(refused.value)


def test_a_full_disk_leaves_an_earlier_export_as_it_was(finished, exported, tmp_path, monkeypatch):
    """Into a folder that holds an earlier export (and a file of the user's), a failed export
    changes nothing: neither new files beside old ones nor old ones removed."""
    earlier, _ = exported
    out = tmp_path / "out"
    for name, data in tree(earlier).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    about = out / "runs" / "r1" / MODEL / "export.json"
    about.write_text(about.read_text(encoding="utf-8").replace('"records": ', '"records": 1'), encoding="utf-8")
    before = tree(out)
    _full_after(monkeypatch, 7)
    with pytest.raises(LexpilotError, match="No space left on device"):
        export_seed(finished, out)
    assert tree(out) == before
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    monkeypatch.undo()
    export_seed(finished, out)  # with room again: the export replaces the earlier one, mine kept
    assert tree(out) == {**tree(earlier), "notes.txt": b"mine"}
