"""A run's generation settings and the benchmark's three roles, with the seed's defaults.

The roles: `eval`, the evaluated model; `user`, the simulated client (the User Model); `judge`, the
classifier, DCG judge and verdict extractor. The defaults are the seed's: a DeepSeek User Model and
judge, temperature 0.7 for the evaluated model and the User Model, 0.1 for the judge, 8,192 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("eval", "user", "judge")
DEFAULT_USER_MODEL = "DeepSeek-V4.1-Flash"
DEFAULT_JUDGE_MODEL = "DeepSeek-R1"


@dataclass(frozen=True)
class Settings:
    """Generation settings of a run: part of its manifest, so changing them needs a new run id.

    A run's manifest records None for a setting that none of its requests carries (a reasoning
    model's temperature: `providers.bodies.request.applied_settings`).
    """

    user_model: str = DEFAULT_USER_MODEL
    judge_model: str = DEFAULT_JUDGE_MODEL
    temperature: float | None = 0.7
    judge_temperature: float | None = 0.1
    max_tokens: int | None = 8192

    def model_for(self, role: str, eval_model: str) -> str:
        return {"eval": eval_model, "user": self.user_model, "judge": self.judge_model}[role]

    def temperature_for(self, role: str) -> float | None:
        return self.judge_temperature if role == "judge" else self.temperature
