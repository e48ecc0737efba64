"""The report's numbers beyond each run's metrics: intervals, model comparisons and interaction
statistics, computed from every case's additive statistics with the case as the cluster. Pure:
no database, no files; `build` calls them. docs/report.md gives the methods, their sources and
their measured behaviour (`bench/calibration.py`).

- `family`: a family (the groups that differ only in the evaluated model) and its cases, each
  case's additive statistics in every (group, run, task).
- `influence`: each case's influence on each metric (case-clustered, or jackknifed), and how much
  it moves from run to run.
- `inference`: the pure statistics (t and beta distributions, standard errors, power, the
  sign-flip test and permutation critical values, Holm), functions of numbers only.
- `proportions`: intervals that hold at low rates and in small classes (Clopper-Pearson,
  Korn-Graubard, the logit t interval).
- `estimates`: each group's metrics per run and per cause class, their mean, SD, n, standard
  error and interval (or the reason there is none), and their variance split between cases and runs.
- `compare`: paired model comparisons within a family: the permutation test, its interval and
  minimum detectable difference, Holm over the report.
- `swap`: the swap test, the paired permutation test of Macro-F1, F1_U, F1_C and QWK.
- `plan`: `--plan DELTA`, the cases and runs a comparison needs.
- `interaction`: how Interaction LJP consultations ended, the responses they took, DCG success by
  round.
"""
