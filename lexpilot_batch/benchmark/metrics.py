"""The benchmark's metrics as pure functions of labels; no I/O, no knowledge of runs or records.

Undefined metrics. A metric whose denominator is zero (for QWK: zero expected disagreement, or
no claims at all) is *undefined* and is returned as `None`, never as 0 or NaN: a 0 would read as a
real score and a NaN would poison every mean it enters. The report renders `None` as "undefined"
("—" in terminal tables, "--" in LaTeX, each with a note).

Definitions follow the seed README ("Evaluation protocol"):

- LCA, underspecified as positive: truth `underspecified` and label `clarification` is a TP,
  truth `complete` and label `clarification` an FP, truth `underspecified` and label `judgment`
  an FN, truth `complete` and label `judgment` a TN. F1_U = 2TP/(2TP+FP+FN),
  F1_C = 2TN/(2TN+FP+FN), Macro-F1 = (F1_U+F1_C)/2, Acc_C = TN/(TN+FP), Acc_U = TP/(TP+FN).
- DCG: successes over all underspecified cases.
- LJP: claim-level quadratic weighted kappa over the fixed ordinal labels 支持=0, 部分支持=1,
  驳回=2, and claim-level accuracy.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lexpilot_batch.data import VERDICTS

Metric = float | None
"""A metric value; `None` means undefined (zero denominator)."""

TRUTHS = ("complete", "underspecified")
LCA_LABELS = ("judgment", "clarification")

LCA_METRICS = ("macro_f1", "f1_u", "f1_c", "acc_c", "acc_u")
DCG_METRICS = ("success_rate",)
LJP_METRICS = ("qwk", "accuracy")

VERDICT_INDEX: dict[str, int] = {label: i for i, label in enumerate(VERDICTS)}


def ratio(numerator: float, denominator: float) -> Metric:
    """`numerator / denominator`, or undefined when the denominator is zero."""
    if denominator == 0:
        return None
    return numerator / denominator


# --- LCA -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LcaCounts:
    """Confusion counts with underspecified (asking for clarification) as the positive class."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def f1_u(self) -> Metric:
        return ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn)

    @property
    def f1_c(self) -> Metric:
        return ratio(2 * self.tn, 2 * self.tn + self.fp + self.fn)

    @property
    def macro_f1(self) -> Metric:
        return macro_f1(self.f1_u, self.f1_c)

    @property
    def acc_c(self) -> Metric:
        """Share of complete histories answered with a direct judgment."""
        return ratio(self.tn, self.tn + self.fp)

    @property
    def acc_u(self) -> Metric:
        """Share of underspecified histories answered with a clarification request."""
        return ratio(self.tp, self.tp + self.fn)


def macro_f1(f1_u: Metric, f1_c: Metric) -> Metric:
    """(F1_U + F1_C) / 2, undefined when either is."""
    if f1_u is None or f1_c is None:
        return None
    return (f1_u + f1_c) / 2


def lca_counts(pairs: Iterable[tuple[str, str]]) -> LcaCounts:
    """Count (truth, label) pairs: truth is complete|underspecified, label judgment|clarification.

    Raises ValueError on any other value, so that a typo never silently counts as a negative.
    """
    tp = fp = fn = tn = 0
    for truth, label in pairs:
        if truth not in TRUTHS:
            raise ValueError(f"unknown history type {truth!r}; expected one of {TRUTHS}")
        if label not in LCA_LABELS:
            raise ValueError(f"unknown LCA label {label!r}; expected one of {LCA_LABELS}")
        asked = label == "clarification"
        if truth == "underspecified":
            tp, fn = (tp + 1, fn) if asked else (tp, fn + 1)
        else:
            fp, tn = (fp + 1, tn) if asked else (fp, tn + 1)
    return LcaCounts(tp=tp, fp=fp, fn=fn, tn=tn)


def lca_metrics(pairs: Iterable[tuple[str, str]]) -> dict[str, Metric]:
    """Macro-F1, F1_U, F1_C, Acc_C and Acc_U of (truth, label) pairs, keyed as `LCA_METRICS`."""
    return dict(zip(LCA_METRICS, lca_from_counts(lca_counts(pairs)), strict=True))


def lca_from_counts(counts: LcaCounts) -> tuple[Metric, ...]:
    """The `LCA_METRICS` of confusion counts, in that order."""
    f1_u, f1_c = counts.f1_u, counts.f1_c
    return macro_f1(f1_u, f1_c), f1_u, f1_c, counts.acc_c, counts.acc_u


# --- DCG -------------------------------------------------------------------------------------


def dcg_success_rate(successes: Iterable[bool]) -> Metric:
    """Successful cases over *all* cases given (one bool per underspecified case)."""
    total = won = 0
    for success in successes:
        if not isinstance(success, bool):
            raise ValueError(f"DCG success must be true or false, got {success!r}")
        total += 1
        won += success
    return ratio(won, total)


def dcg_metrics(successes: Iterable[bool]) -> dict[str, Metric]:
    return {"success_rate": dcg_success_rate(successes)}


def dcg_from_counts(successes: int, cases: int) -> tuple[Metric, ...]:
    """The `DCG_METRICS` of a count of successes among cases."""
    return (ratio(successes, cases),)


# --- LJP -------------------------------------------------------------------------------------


def verdict_index(label: str) -> int:
    """The ordinal of a verdict label: 支持=0, 部分支持=1, 驳回=2."""
    try:
        return VERDICT_INDEX[label]
    except KeyError:
        raise ValueError(f"unknown verdict {label!r}; expected one of {VERDICTS}") from None


def quadratic_weighted_kappa(gold: Sequence[int], predicted: Sequence[int], n_labels: int = len(VERDICTS)) -> Metric:
    """Cohen's kappa with weights (i-j)^2/(K-1)^2 over the fixed labels 0..K-1.

    The same number as scikit-learn's `cohen_kappa_score(weights="quadratic",
    labels=range(K))`, computed in exact integer arithmetic so that "zero expected
    disagreement" is an exact test: it is undefined when every gold and every predicted label
    is one and the same label, and when there are no items.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    if n_labels < 2:
        raise ValueError("quadratic weighted kappa needs at least two labels")
    for value in (*gold, *predicted):
        if not 0 <= value < n_labels:
            raise ValueError(f"label {value!r} outside 0..{n_labels - 1}")
    gold_totals = [0] * n_labels
    pred_totals = [0] * n_labels
    observed = 0  # sum over items of (i-j)^2
    for g, p in zip(gold, predicted, strict=True):
        gold_totals[g] += 1
        pred_totals[p] += 1
        observed += (g - p) ** 2
    return qwk_from_totals(gold_totals, pred_totals, observed)


def qwk_from_totals(gold_totals: Sequence[int], pred_totals: Sequence[int], observed: int) -> Metric:
    """Quadratic weighted kappa from its sufficient statistics: how many items have each gold and
    each predicted label, and the sum over items of (gold - predicted)^2. Sums of these over
    disjoint sets of items are the statistics of their union, which is what lets the report's
    bootstrap resample cases by adding their statistics."""
    n = sum(gold_totals)
    if n == 0:
        return None
    # Expected disagreement times n: sum_ij (i-j)^2 * r_i * c_j, expanded as
    # C * sum_i i^2 r_i + R * sum_j j^2 c_j - 2 (sum_i i r_i)(sum_j j c_j) with R = sum r_i and
    # C = sum c_j (both n): the same integer in O(K) (the bootstrap evaluates it a million times).
    # The common factor 1/(K-1)^2 of the weights cancels in the ratio.
    first_gold = second_gold = first_pred = second_pred = 0
    for i in range(1, len(gold_totals)):
        r, c = gold_totals[i], pred_totals[i]
        first_gold += i * r
        second_gold += i * i * r
        first_pred += i * c
        second_pred += i * i * c
    expected = sum(pred_totals) * second_gold + n * second_pred - 2 * first_gold * first_pred
    if expected == 0:
        return None
    return 1 - n * observed / expected


def accuracy(gold: Sequence[object], predicted: Sequence[object]) -> Metric:
    """Share of items whose prediction equals the gold label; undefined with no items."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    return ratio(sum(g == p for g, p in zip(gold, predicted, strict=True)), len(gold))


def ljp_metrics(pairs: Iterable[tuple[str, str]]) -> dict[str, Metric]:
    """Claim-level QWK and accuracy of (gold verdict, predicted verdict) pairs."""
    gold: list[int] = []
    predicted: list[int] = []
    for g, p in pairs:
        gold.append(verdict_index(g))
        predicted.append(verdict_index(p))
    return {"qwk": quadratic_weighted_kappa(gold, predicted), "accuracy": accuracy(gold, predicted)}


def ljp_from_counts(
    gold_totals: Sequence[int], pred_totals: Sequence[int], observed: int, correct: int
) -> tuple[Metric, ...]:
    """The `LJP_METRICS` from claim counts per gold and per predicted label, the summed squared
    label distance and the number of correct claims."""
    return qwk_from_totals(gold_totals, pred_totals, observed), ratio(correct, sum(gold_totals))


# --- Across runs -----------------------------------------------------------------------------


def n_defined(values: Iterable[Metric]) -> int:
    """How many of the values are defined (not None)."""
    return sum(v is not None for v in values)


def mean_sd(values: Iterable[Metric]) -> tuple[Metric, Metric]:
    """Mean and sample standard deviation (ddof=1) of one metric over runs.

    Undefined runs are *excluded*, not counted as 0: a run where, say, F1_U has no denominator
    carries no information about the score, and a 0 would bias the mean down. The report
    therefore always shows `n_defined` beside the mean, so a mean over 4 of 5 runs is visible
    as such. The mean is undefined when no run is defined; the SD is undefined with fewer than
    two defined runs (a single run has no spread to estimate, and 0 would claim there is none).
    """
    defined = [float(v) for v in values if v is not None]
    if not defined:
        return None, None
    mean = statistics.fmean(defined)
    sd = statistics.stdev(defined) if len(defined) >= 2 else None
    return mean, sd
