"""The report's numbers beyond each run's metrics: intervals, model comparisons and interaction
statistics, computed from every case's additive statistics with the case as the cluster. Pure:
no database, no files; `build` calls them.

- `family`: a family (the groups that differ only in the evaluated model) and its cases, each
  case's additive statistics in every (group, run, task).
- `influence`: each case's influence on each metric (case-clustered, or jackknifed).
- `inference`: the pure statistics (t distribution, standard errors, t intervals, power,
  sign-flip, BCa, Holm), functions of numbers only.
- `estimates`: each group's metrics per run and per cause class, their mean, SD, n, standard
  error and interval, or the reason there is none.
- `compare`: paired model comparisons within a family: which test, interval and p-value.
- `bootstrap`: the paired unstratified bootstrap over cases (Macro-F1, F1_U, F1_C, QWK).
- `swap`: the swap test, the paired permutation test of those metrics on few cases.
- `interaction`: how Interaction LJP consultations ended, the responses they took, DCG success by
  round.
"""
