"""The assumptions of an estimate, each replaced by what the workspace measured once it has
answered requests:

- `CHARS_PER_TOKEN` = 1.3 prompt characters per token, about right for mostly-Chinese prompts on
  current tokenizers; measured as sum(prompt_chars) / sum(prompt_tokens) over requests whose
  provider reported `prompt_tokens`.
- `RESPONSE_CHARS`: an eval response ≈ 600 characters, a User Model reply ≈ 150; these feed the
  prompts of later steps (judge outputs feed none). Measured as the mean answer length per role.
- `COMPLETION_TOKENS` per request: eval 500, user 120, judge 400 (the default judge is a
  reasoning model whose thinking is billed as completion). Measured as the mean reported
  `completion_tokens` per role.
- cached share = 0 of each role's prompt tokens read from a provider's cache (priced at the
  model's `cached_input`); measured as sum(cached_tokens) / sum(prompt_tokens) per role over
  requests whose provider reported `prompt_tokens`.
- `CLARIFY_PROBABILITY` = 0.5 that a consultation response asks rather than judges; measured
  from the answered underspecified-LCA and interaction labels once there are `MIN_LABELS`.

The defaults live with `Assumptions` in `model`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.estimate.assumptions import Assumptions
from lexpilot_batch.estimate.projection import BRANCHING
from lexpilot_batch.state.states import RequestState
from lexpilot_batch.state.workspace import Workspace

MIN_LABELS = 10  # answered labels needed before their clarification rate replaces the default


def calibrate(
    ws: Workspace | None, clarify_probability: float | None, discount: float, backends: Mapping[str, str]
) -> Assumptions:
    """The assumptions of an estimate: the defaults, replaced by a probability given or what `ws` measured."""
    a = Assumptions(batch_discount=discount, backends=dict(backends))
    if clarify_probability is not None:
        if not 0 <= clarify_probability <= 1:
            raise ConfigError(f"the clarification probability must be between 0 and 1, not {clarify_probability}")
        a.clarify_probability, a.clarify_probability_given = clarify_probability, True
    if ws is None:
        return a
    db = ws.store.conn
    chars, tokens, n = db.execute(
        "SELECT SUM(prompt_chars), SUM(prompt_tokens), COUNT(*) FROM requests WHERE prompt_tokens > 0"
    ).fetchone()
    if n:
        a.chars_per_token, a.chars_per_token_measured_on = chars / tokens, n
    for r in db.execute(
        "SELECT role, AVG(LENGTH(text)) AS mean, COUNT(*) AS n FROM requests"
        f" WHERE status IN ('{RequestState.ANSWERED}', '{RequestState.DISCARDED}') AND parser = 'text' GROUP BY role"
    ):
        a.response_chars[r["role"]], a.response_chars_measured_on[r["role"]] = round(r["mean"]), r["n"]
    for r in db.execute(
        "SELECT role, AVG(completion_tokens) AS mean, COUNT(*) AS n FROM requests"
        f" WHERE status IN ('{RequestState.ANSWERED}', '{RequestState.DISCARDED}') AND completion_tokens > 0 GROUP BY role"
    ):
        a.completion_tokens[r["role"]], a.completion_tokens_measured_on[r["role"]] = round(r["mean"]), r["n"]
    for r in db.execute(
        "SELECT role, SUM(COALESCE(cached_tokens, 0)) AS cached, SUM(prompt_tokens) AS prompt, COUNT(*) AS n"
        " FROM requests WHERE prompt_tokens > 0 GROUP BY role"
    ):
        a.cached_share[r["role"]], a.cached_share_measured_on[r["role"]] = r["cached"] / r["prompt"], r["n"]
    keys = sorted(BRANCHING)
    asks, n = db.execute(
        f"SELECT SUM(value = ?), COUNT(*) FROM requests WHERE status IN ('{RequestState.ANSWERED}', '{RequestState.DISCARDED}')"
        f" AND parser = 'lca_label' AND step IN ({', '.join('?' * len(keys))})",
        (json.dumps("clarification"), *keys),
    ).fetchone()
    if n >= MIN_LABELS and not a.clarify_probability_given:
        a.clarify_probability, a.clarify_probability_measured_on = asks / n, n
    return a
