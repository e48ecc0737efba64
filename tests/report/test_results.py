"""Records out of the workspace: each run classed with its own cause-class mapping, runs of
different mappings never pooled, workspaces of the previous version reported as they were, and
runs of the bundled sample dataset named as such."""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import sqlite3

import pytest

from lexpilot_batch.data import SAMPLE_NOTE, load_categories, load_dataset
from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.report import build_report, render
from lexpilot_batch.report.results import comparison_key, group_key, load_run_results
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status import detail
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.engine import finish, open_session, records

N_CASES = 6
# A second mapping of every bundled cause: the sample's first cases fall in both of its classes.
LOANS = ["民间借贷纠纷", "房屋租赁合同纠纷", "追索劳动报酬纠纷"]


@pytest.fixture(scope="module")
def two_mappings(tmp_path_factory):
    """Run r1 with the bundled mapping, r2 with another, DCG on the same six sample cases."""
    tmp = tmp_path_factory.mktemp("mappings")
    other = tmp / "other.json"
    rest = [cause for cause in load_categories(None) if cause not in LOANS]
    other.write_text(json.dumps({"借贷租赁与报酬": LOANS, "其他": rest}, ensure_ascii=False), encoding="utf-8")
    with Workspace(tmp / "ws") as ws:
        session = open_session(ws)
        try:
            prepare(ws, session, RunSpec(("r1",), ("sim-eval",), "dcg", limit=N_CASES))
            prepare(ws, session, RunSpec(("r2",), ("sim-eval",), "dcg", limit=N_CASES, categories=other))
            finish(ws, session)
        finally:
            session.close()
        yield ws, load_categories(other)


def by_hand(ws: Workspace, run_id: str, mapping: dict[str, str]) -> dict[str, float]:
    """DCG success rate per class of `run_id`, from its records and the cases' causes alone."""
    causes = [case.cause_of_action for case in load_dataset(None).cases]
    tally: dict[str, list[bool]] = {}
    for (run, _, task, idx, _), record in records(ws).items():
        if run == run_id and task == "dcg":
            tally.setdefault(mapping[causes[idx]], []).append(record["success"])
    return {cls: sum(s) / len(s) for cls, s in tally.items()}


def test_a_second_mapping_in_one_workspace_is_a_second_group_scored_with_its_own_classes(two_mappings):
    ws, other = two_mappings
    report = build_report(load_run_results(ws, texts=False))
    groups = {tuple(g["runs"]): g for g in report["groups"]}
    assert set(groups) == {("r1",), ("r2",)}  # never pooled
    assert groups[("r1",)]["group_key"] != groups[("r2",)]["group_key"]
    assert groups[("r1",)]["settings"]["categories_sha256"] != groups[("r2",)]["settings"]["categories_sha256"]
    for run_id, mapping in (("r1", load_categories(None)), ("r2", other)):
        by_class = groups[(run_id,)]["tasks"]["dcg"]["by_class"]
        expected = by_hand(ws, run_id, mapping)
        assert set(by_class) == set(expected)
        for cls, rate in expected.items():
            assert by_class[cls]["success_rate"]["per_run"][run_id] == pytest.approx(rate)
    assert set(groups[("r2",)]["tasks"]["dcg"]["by_class"]) == {"借贷租赁与报酬", "其他"}
    assert set(groups[("r1",)]["tasks"]["dcg"]["by_class"]) == {"合同、准合同纠纷", "劳动争议、人事争议"}
    # Nor compared: the bootstrap resamples cases within classes, which two mappings do not share.
    assert groups[("r1",)]["comparison_key"] != groups[("r2",)]["comparison_key"]
    assert report["comparisons"] == []


def test_the_mapping_is_in_the_manifest_and_stored_once(two_mappings):
    ws, other = two_mappings
    db = ws.store.conn
    manifests = {r["run_id"]: json.loads(r["manifest"]) for r in db.execute("SELECT run_id, manifest FROM runs")}
    stored = {r["sha256"]: json.loads(r["classes"]) for r in db.execute("SELECT sha256, classes FROM categories")}
    assert set(stored) == {m["categories_sha256"] for m in manifests.values()}
    assert stored[manifests["r2"]["categories_sha256"]] == {"借贷租赁与报酬": LOANS, "其他": list(other)[len(LOANS) :]}
    # The cases are copied once; each keeps its cause of action for every mapping to class it.
    assert db.execute("SELECT COUNT(*) FROM cases").fetchone()[0] == N_CASES
    assert db.execute("SELECT COUNT(*) FROM cases WHERE cause IS NULL").fetchone()[0] == 0


def test_runs_of_the_bundled_sample_are_named_so_by_report_and_status(two_mappings):
    ws, _ = two_mappings
    report = build_report(load_run_results(ws, texts=False))
    assert all(group["bundled_sample"] for group in report["groups"])
    for fmt in ("table", "markdown", "latex"):
        assert SAMPLE_NOTE in render(report, fmt), fmt
    assert all(row["bundled_sample"] == "true" for row in csv.DictReader(io.StringIO(render(report, "csv"))))
    collected = detail.collect(ws)
    assert [r["bundled_sample"] for r in collected["runs"]] == [True, True]
    assert detail.render(collected).count(SAMPLE_NOTE) == 2


# The bundled mapping before it followed the official regulation, as the previous version stored it.
OLD_CLASSES = {
    "民间借贷纠纷": "合同纠纷",
    "房屋租赁合同纠纷": "合同纠纷",
    "买卖合同纠纷": "合同纠纷",
    "追索劳动报酬纠纷": "劳动争议",
    "确认劳动关系纠纷": "劳动争议",
    "工伤保险待遇纠纷": "劳动争议",
}
OLD_GROUP_FIELDS = ("dataset_sha256", "case_ids", "code_hash", "prompts_hash", "model", "user_model", "judge_model")


def test_a_workspace_of_the_previous_version_reports_as_before(tmp_path):
    """Its manifests name no mapping and its classes live in `cases.cause_class`: the upgraded
    workspace reports those classes, under the group key it had."""
    if sqlite3.sqlite_version_info < (3, 35):
        pytest.skip("making the old schema needs ALTER TABLE DROP COLUMN (SQLite 3.35)")
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare(ws, session, RunSpec(("r1", "r2"), ("sim-eval",), "dcg", limit=N_CASES))
            finish(ws, session)
        finally:
            session.close()
        before = {r.run_id: r.tasks["dcg"].records for r in load_run_results(ws, texts=False)}
        with ws.store.transaction() as db:  # what the previous version left
            db.execute("DROP TABLE categories")
            db.execute("ALTER TABLE cases DROP COLUMN cause")
            db.execute("DELETE FROM migrations WHERE name = '0006_categories'")
            for row in db.execute("SELECT idx, data FROM cases").fetchall():
                cause = json.loads(row["data"])["cause_of_action"]
                db.execute("UPDATE cases SET cause_class = ? WHERE idx = ?", (OLD_CLASSES[cause], row["idx"]))
            for row in db.execute("SELECT pk, manifest FROM runs").fetchall():
                manifest = json.loads(row["manifest"])
                for name in ("categories_sha256", "categories_path", "bundled_sample"):
                    del manifest[name]
                db.execute("UPDATE runs SET manifest = ? WHERE pk = ?", (json.dumps(manifest), row["pk"]))
    with Workspace(tmp_path / "ws", writable=False) as ws:  # upgraded as it opens
        runs = load_run_results(ws, texts=False)
        manifest = json.loads(ws.store.conn.execute("SELECT manifest FROM runs LIMIT 1").fetchone()[0])
        assert ws.store.conn.execute("SELECT COUNT(*) FROM cases WHERE cause IS NULL").fetchone()[0] == 0
    group = build_report(runs)["groups"][0]
    assert group["runs"] == ["r1", "r2"]
    fields = {name: manifest[name] for name in OLD_GROUP_FIELDS} | {"settings": manifest["settings"]}
    blob = json.dumps(fields, ensure_ascii=False, sort_keys=True).encode("utf-8")
    assert group["group_key"] == group_key(manifest) == hashlib.sha256(blob).hexdigest()[:16]
    assert "categories_sha256" not in group["settings"]
    assert set(group["tasks"]["dcg"]["by_class"]) == {"合同纠纷", "劳动争议"}
    old_classes = [OLD_CLASSES[case.cause_of_action] for case in load_dataset(None).cases[:N_CASES]]
    for run in runs:  # the same records, under the classes stored with the cases
        assert [r for _, r in run.tasks["dcg"].records] == [r for _, r in before[run.run_id]]
        assert [c for c, _ in run.tasks["dcg"].records] == old_classes
    assert group["bundled_sample"] is True  # told by the dataset's hash


def test_models_are_compared_when_all_but_the_evaluated_model_is_the_same(study):
    """A bare name (its manifest records no `requests`) and a provider-qualified one (it does) with
    the same user and judge requests are compared; what the user or judge requests carry, and the
    mapping, are part of the comparison key; what the evaluated model's carry is not."""
    db = study.store.conn
    manifests = {(r[0], r[1]): json.loads(r[2]) for r in db.execute("SELECT run_id, model, manifest FROM runs")}
    bare, qualified = manifests[("r1", "sim-a")], manifests[("r1", "openai/sim-b")]
    assert "requests" not in bare and "requests" in qualified
    assert comparison_key(bare) == comparison_key(qualified)
    assert group_key(bare) != group_key(qualified)
    report = build_report(load_run_results(study, texts=False), resamples=50)
    assert [(c["a"]["model"], c["b"]["model"]) for c in report["comparisons"]] == [("openai/sim-b", "sim-a")]

    def changed(edit) -> str:
        manifest = copy.deepcopy(qualified)
        edit(manifest)
        return comparison_key(manifest)

    assert changed(lambda m: m["requests"]["judge"]["body"].update(max_completion_tokens=1)) != comparison_key(bare)
    assert changed(lambda m: m["requests"]["user"].update(provider="openai")) != comparison_key(bare)
    assert changed(lambda m: m.update(categories_sha256="0" * 64)) != comparison_key(bare)
    assert changed(lambda m: m["requests"]["eval"]["body"].pop("temperature")) == comparison_key(bare)
