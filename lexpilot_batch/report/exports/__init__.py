"""`lexpilot-batch export`: a workspace's finished records as files for other tools, one module per
`--layout`.

- `seed`: the original benchmark code's result files (runs/, AwN_gen/, Force_ask_gen/,
  Force_judge_gen/, eval_results/), each run's manifest and what that layout has no place for.
- `cases`: one row per finished (run, model, task, case[, variant]), as cases.csv and cases.jsonl.
- `inspect_logs` (`--format inspect`): one Inspect log per (run, model, task), through inspect_ai's API.
"""
