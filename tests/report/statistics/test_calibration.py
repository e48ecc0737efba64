"""The calibration harness (`bench/calibration.py`) and what docs/report.md quotes of it: the
"measured behaviour" block is generated from the committed result (`bench/calibration.json`),
never typed in, and that result holds every cell of the grid the issue asks for (every world, both
nulls and the shift, both run layouts, 6 to 432 cases) with the replications its first line states.
The harness's truths are checked against a large sample of its own worlds."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bench import calibration
from lexpilot_batch.report import build_report

ROOT = Path(__file__).resolve().parents[3]
RESULT = ROOT / "bench" / "calibration.json"


def _docs_block() -> str:
    page = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    start = page.index("<!-- calibration:begin -->") + len("<!-- calibration:begin -->")
    return page[start : page.index("<!-- calibration:end -->")].strip()


def test_the_measured_behaviour_on_the_docs_page_is_the_committed_results():
    result = json.loads(RESULT.read_text(encoding="utf-8"))
    assert _docs_block() == calibration.report(result).strip()


def test_the_committed_results_cover_the_whole_grid():
    """Every cell below 432 cases is there, planned with the issue's 1,000 replications below 50
    cases and 1,600 at 50 (the shift 400). A grid stopped at a deadline (`--assemble`,
    `settings.complete` false) may hold fewer, and miss 432-case cells (listed); the docs block's
    first line says how many and which, and a cell that is there has at least 200."""
    result = json.loads(RESULT.read_text(encoding="utf-8"))
    settings = result["settings"]
    assert settings["reps"] >= 1000 and settings["reps_large"] >= 1600 and settings["resamples"] >= 1000
    assert settings["reps_shift_large"] >= 400
    cells = {(c["world"], c["scenario"], c["layout"], c["cases"]): c for c in result["cells"]}
    missing = {tuple(m) for m in settings["missing"]}
    assert not missing & set(cells) and all(m[3] == 432 for m in missing)
    assert set(cells) | missing == set(calibration.grid(list(calibration.WORLDS), calibration.SCENARIOS,
                                                        list(calibration.LAYOUTS), calibration.CASES))  # fmt: skip
    reps = {"small": settings["reps"], "large": settings["reps_large"], "shift_large": settings["reps_shift_large"]}
    for (_, scenario, _, n), cell in cells.items():
        planned = calibration.replications(scenario, n, reps)
        if settings["complete"]:  # (a cell measured again with more replications, to settle a rate, too)
            assert cell["reps"] >= planned, (scenario, n, cell["reps"])
        else:
            assert min(200, planned) <= cell["reps"], (scenario, n, cell["reps"])
        # Every replication gave each metric's comparison a p-value or not, and each model an
        # overall interval or not: no such count exceeds the replications (the class_ counts
        # are over every class with an interval: several a replication).
        for counts in cell["counts"].values():
            assert all(v[1] <= cell["reps"] for key, v in counts.items() if "class" not in key)
    assert settings["complete"] == (
        not missing
        and all(c["reps"] >= calibration.replications(c["scenario"], c["cases"], reps) for c in cells.values())
    )
    assert calibration.replications_line(result) in _docs_block()
    # Cells measured again by later code (`--merge`) are in the grid and named on the page.
    for batch in settings.get("remeasured", []):
        assert batch["code"] != settings["code"] and batch["reason"]
        assert {tuple(c) for c in batch["cells"]} <= set(cells)
    assert calibration.remeasured_line(result) in _docs_block()


def _cell(world: str, n: int, reps: int, hits: int) -> dict:
    counts = {"lca.f1_c": {"classes": {}, "difference": [hits, reps]}}
    return {"world": world, "scenario": "shift", "layout": "3v3", "cases": n, "reps": reps, "counts": counts}


def test_a_merge_puts_the_newer_cells_in_place_and_names_them_with_their_code():
    """A grid stopped at a deadline (its 20-case cell short of the planned 1,000) is complete once a
    merge brings that cell to it."""
    planned = {"reps": 1000, "reps_large": 1600, "reps_shift_large": 400}
    grid = {
        "settings": {"code": "old", "complete": False, "missing": [], **planned},
        "seconds": 10,
        "cells": [_cell("low", 8, 1000, 900), _cell("low", 20, 200, 182)],
    }
    newer = {"settings": {"code": "new"}, "seconds": 5, "cells": [_cell("low", 20, 1000, 950)]}
    merged = calibration.merge_into(grid, newer, "a wider interval")
    assert [c["counts"]["lca.f1_c"]["difference"] for c in merged["cells"]] == [[900, 1000], [950, 1000]]
    assert merged["settings"]["complete"] and not calibration.merge_into(grid, grid, "x")["settings"]["complete"]
    assert merged["settings"]["remeasured"] == [
        {"code": "new", "reason": "a wider interval", "cells": [["low", "shift", "3v3", 20]]}
    ]
    assert "with code new (a wider interval): low shift 3v3 20" in calibration.remeasured_line(merged)
    # A cell measured again by yet newer code leaves the earlier batch.
    newest = {"settings": {"code": "newest"}, "seconds": 5, "cells": [_cell("low", 20, 1000, 940)]}
    assert [b["code"] for b in calibration.merge_into(merged, newest, "again")["settings"]["remeasured"]] == ["newest"]
    # Another cell measured by the same newer code is a batch of its own: the first keeps its cells.
    other = {"settings": {"code": "new"}, "seconds": 5, "cells": [_cell("low", 8, 1000, 960)]}
    batches = calibration.merge_into(merged, other, "the small cells")["settings"]["remeasured"]
    assert [(b["code"], b["cells"]) for b in batches] == [
        ("new", [["low", "shift", "3v3", 20]]),
        ("new", [["low", "shift", "3v3", 8]]),
    ]
    with pytest.raises(SystemExit, match="not in the grid"):
        calibration.merge_into(
            grid, {"settings": {"code": "new"}, "seconds": 1, "cells": [_cell("low", 6, 10, 9)]}, "x"
        )


def test_a_models_only_merge_keeps_the_comparisons_counts_and_says_so():
    """`--models-only` counts only the models' intervals (their misses on each side too); its merge
    replaces those and keeps the comparisons' counts, which the earlier code measured."""
    cell = calibration.run_cell("low", "shift", "1v5", 8, 3, 0, models_only=True)
    counts = cell["counts"]["lca.macro_f1"]
    assert "reject" not in counts and "power" not in counts and "difference" not in counts
    for who in ("A1", "B5"):
        if f"overall_{who}" in counts:
            hit, total = counts[f"overall_{who}"]
            assert counts[f"below_overall_{who}"][0] + counts[f"above_overall_{who}"][0] == total - hit
    old = dict(_cell("low", 8, 3, 2), layout="1v5")
    old["counts"] = {metric: {"classes": {"class0_A1": [0, 9]}, "power": [1, 3], "overall_A1": [0, 3]}
                     for metric in cell["counts"]}  # fmt: skip
    grid = {
        "settings": {"code": "old", "reps": 1000, "reps_large": 1600, "reps_shift_large": 400},
        "seconds": 1,
        "cells": [old],
    }
    newer = {"settings": {"code": "new", "models_only": True}, "seconds": 1, "cells": [cell]}
    merged = calibration.merge_into(grid, newer, "kurtosis df")["cells"][0]["counts"]["lca.macro_f1"]
    assert merged["power"] == [1, 3] and merged["overall_A1"] == counts.get("overall_A1")
    assert merged["classes"] == counts["classes"]
    batch = calibration.merge_into(grid, newer, "kurtosis df")["settings"]["remeasured"][0]
    assert (
        batch["reason"]
        == "kurtosis df (the models' intervals, 3 replications; the comparisons' counts are the earlier code's)"
    )
    with pytest.raises(SystemExit, match="more replications"):
        calibration.merge_into(grid, {**newer, "cells": [dict(cell, reps=4)]}, "x")


@pytest.mark.slow
def test_intervals_cover_a_low_rate_whose_few_successful_cases_carry_the_variation(monkeypatch: pytest.MonkeyPatch):
    """The low world with B's skill 0.1 lower (mean 0.05) at 20 cases, B with 5 runs, 300
    replications: with cases - 1 degrees of freedom B's overall Macro-F1 and LJP accuracy
    intervals covered 90.7% and 91.9% over 1,000 (missing above: too low when the few cases with
    successes are missing); with the kurtosis df 98.7% and 95.5%. The first 300 hold it too."""
    from lexpilot_batch.report.statistics import inference

    def rates() -> dict[str, float]:
        cell = calibration.run_cell("low", "shift", "1v5", 20, 300, 0, models_only=True)
        return {m: cell["counts"][m]["overall_B5"][0] / cell["counts"][m]["overall_B5"][1]
                for m in ("lca.macro_f1", "ljp_direct.accuracy")}  # fmt: skip

    now = rates()
    assert all(r >= 0.935 for r in now.values()), now
    monkeypatch.setattr(inference, "kurtosis_df", lambda values: len(values) - 1)
    before = rates()
    assert all(r < 0.935 for r in before.values()), before


@pytest.mark.slow
def test_the_comparison_interval_covers_a_true_difference_between_near_deterministic_models():
    """The shift (B's skill 0.1 lower) in the near-deterministic world at 20 cases, 200
    replications of the harness: the permutation interval alone covered 84.6% (QWK) and 89.4%
    (Macro-F1) over 1,000, united with the MOVER interval of Pearson's correlation 92.3% (Macro-F1)
    and 88.7% (F1_C); with the continuity-corrected correlation it covers at least 91% (95% less
    the band of 200 draws, +-3 points) for all three."""
    cell = calibration.run_cell("deterministic", "shift", "3v3", 20, 200, 1000)
    for metric in ("ljp_direct.qwk", "lca.macro_f1", "lca.f1_c"):
        hit, total = cell["counts"][metric]["difference"]
        assert total >= 150 and hit / total >= 0.91, (metric, hit, total)


@pytest.mark.slow
def test_an_exact_tests_interval_covers_a_true_difference_between_the_sums_it_can_take(
    monkeypatch: pytest.MonkeyPatch,
):
    """The shift in the central world at 8 cases, 3 runs each, 1,200 replications: the sign-flip
    test of Acc_U and LJP accuracy is exact, its distribution on the few sums 8 cases of thirds
    allow, and the true difference lies between them. Ending the interval at the last sum the
    test accepts covered it in 90.8% (Acc_U) of 2,000 draws; halfway to the first sum it rejects,
    97.9%. Both measured here, the second at least 95%, the first below 93.5%."""
    from lexpilot_batch.report.statistics import compare

    def rates() -> dict[str, float]:
        cell = calibration.run_cell("central", "shift", "3v3", 8, 1200, 0)
        return {m: cell["counts"][m]["difference"][0] / cell["counts"][m]["difference"][1]
                for m in ("lca.acc_u", "ljp_direct.accuracy")}  # fmt: skip

    now = rates()
    assert all(r >= 0.95 for r in now.values()), now
    monkeypatch.setattr(compare, "_half_width", lambda result: result.accepted)
    before = rates()
    assert before["lca.acc_u"] < 0.935, before


@pytest.mark.parametrize("world", list(calibration.WORLDS))
def test_the_harness_truths_are_the_metrics_of_a_large_sample_of_its_world(world: str):
    """One run on 20,000 cases of a world (classes in the harness's shares): every metric, overall
    and in every class, within 4 of its standard errors (the report's own) of the analytic truth;
    224 such checks over the four worlds, whose largest deviation by chance is about 3 SEs."""
    n = 20_000
    rng = random.Random(1)
    cases = calibration.draw_cases(calibration.WORLDS[world], n, "sharp", rng)
    run = calibration.one_run(cases, "r", "m", False, rng)
    truth = calibration.scope_truths(calibration.WORLDS[world], n)
    tasks = build_report([run], resamples=0)["groups"][0]["tasks"]
    checked = 0
    for task in ("lca", "dcg", "ljp_direct"):
        for scope, by_metric in [(None, tasks[task]["overall"]), *tasks[task]["by_class"].items()]:
            for metric, s in by_metric.items():
                assert abs(s["mean"] - truth[scope][metric]) <= 4 * s["se"], (world, scope, metric, s["mean"])
                checked += 1
    assert checked == 7 * 8  # overall and six classes, eight metrics
