"""Counts said in words (issue 48, point 8: "1 cases")."""

from __future__ import annotations

from lexpilot_batch.report.formats.tables import _class_cases
from lexpilot_batch.util.text import counted


def test_one_is_singular_and_every_other_count_plural():
    assert [counted(n, "case") for n in (0, 1, 2, 1200)] == ["0 cases", "1 case", "2 cases", "1,200 cases"]


def test_a_class_of_one_case_is_said_so_in_the_report_tables():
    groups = [{"cases": {"total": 7, "by_class": {"劳动争议": 1, "合同纠纷": 6}}}]
    assert _class_cases(groups, "劳动争议") == " (1 case)"
    assert _class_cases(groups, "合同纠纷") == " (6 cases)"


def test_a_sentence_ends_once():
    from lexpilot_batch.util.text import ended

    assert [ended(t) for t in ("done", "done.", "did you mean x?", "完成。")] == [
        "done.",
        "done.",
        "did you mean x?",
        "完成。",
    ]
