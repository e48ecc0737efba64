"""`lexpilot-batch status`: where a workspace stands, read from its database only (and, for the
projection the command passes in, the estimate, which sends nothing).

- `summary`: the one screen `status` prints: per model threads done / active / failed, tokens and
  cost so far against the projection, the batches in flight and their age, what blocks, and the
  next command to run.
- `detail`: the full detail, `status --verbose` (every run's models and endpoints and tasks,
  requests per role, open files, failed threads, budgets, retries), and the JSON of
  `status --format json`.
"""
