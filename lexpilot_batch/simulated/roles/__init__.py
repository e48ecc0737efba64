"""The simulated models: what each benchmark role answers, decided by the prompt it receives.

The behaviours are built to exercise every branch of the benchmark, and every answer is a pure
function of (seed, sample, prompt). Modules:

- `reading`: which role a prompt is for, its history, and the text features the roles weigh
- `evaluated`: the evaluated model (LexAwN, forced to ask, forced to judge)
- `user_model`: the User Model, answering from the key facts
- `judges`: the LCA classifier, the DCG judge, the verdict extractor, and malformed judge output
- `respond`: the entry point, `respond(prompt, seed)`
"""

from __future__ import annotations

from lexpilot_batch.simulated.roles.judges import is_question, malformed_judge
from lexpilot_batch.simulated.roles.reading import (
    EVAL_KINDS,
    GENERIC,
    JUDGE_KINDS,
    bigrams,
    count_facts,
    identify_kind,
    parse_history,
)
from lexpilot_batch.simulated.roles.respond import Reply, respond, rng_for, rng_from

__all__ = [
    "EVAL_KINDS",
    "GENERIC",
    "JUDGE_KINDS",
    "Reply",
    "bigrams",
    "count_facts",
    "identify_kind",
    "is_question",
    "malformed_judge",
    "parse_history",
    "respond",
    "rng_for",
    "rng_from",
]
