"""The experiment's own options (`RUN_OPTIONS` → `RunSpec`): which runs, models, stage, dataset and
generation settings a command prepares, spelled once for every command that takes them
(`options.with_options`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lexpilot_batch.benchmark.protocols import STAGES
from lexpilot_batch.benchmark.settings import DEFAULT_JUDGE_MODEL, DEFAULT_USER_MODEL, Settings
from lexpilot_batch.cli.options import CategoriesOpt, DatasetOpt, Option

SEED = Settings()  # the generation settings' defaults have one home (the seed's); the options read them
TemperatureOpt = Annotated[float, typer.Option("--temperature", help="Evaluated and User Model temperature.")]
JudgeTemperatureOpt = Annotated[float, typer.Option("--judge-temperature", help="Judge temperature.")]
_MAX_TOKENS_HELP = "Output token limit of every request (max_tokens or max_completion_tokens)."
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", help=_MAX_TOKENS_HELP, min=1)]

if TYPE_CHECKING:
    from lexpilot_batch.study.runs import RunSpec

RUN_OPTIONS: list[Option] = [
    (
        "stage",
        Annotated[
            str,
            typer.Option("--stage", help=f"{', '.join(STAGES)} (ljp: the three LJP setups; all: every task)."),
        ],
        "all",
    ),
    (
        "run_id",
        Annotated[
            list[str],
            typer.Option(
                "--run-id", help="Run id; repeat for several independent runs (run1 ... run5). Default: run1."
            ),
        ],
        [],
    ),
    (
        "model",
        Annotated[
            list[str],
            typer.Option(
                "--model",
                envvar="LEXPILOT_MODEL",
                help="An evaluated model, bare (gpt-4o-mini: the role's variables decide where it goes) or with "
                "its provider (openai/gpt-4o-mini, azure/DEPLOYMENT, dashscope/qwen-plus, deepseek/deepseek-chat, "
                "openai-api/SERVICE/MODEL); repeat for several, each its own runs (no default).",
            ),
        ],
        [],
    ),
    (
        "user_model",
        Annotated[
            str | None,
            typer.Option(
                "--user-model",
                envvar="LEXPILOT_USER_MODEL",
                help=f"The User Model simulating the client, bare or with its provider (default {DEFAULT_USER_MODEL}).",
            ),
        ],
        None,
    ),
    (
        "judge_model",
        Annotated[
            str | None,
            typer.Option(
                "--judge-model",
                envvar="LEXPILOT_JUDGE_MODEL",
                help=f"The judge model, bare or with its provider (default {DEFAULT_JUDGE_MODEL}).",
            ),
        ],
        None,
    ),
    (
        "models_file",
        Annotated[
            Path | None,
            typer.Option(
                "--models",
                help="A model list, TOML or JSON: evaluated models, User Model and judge, each with its provider, "
                "base URL, key variable, backend and body fields (see README).",
                dir_okay=False,
            ),
        ],
        None,
    ),
    (
        "model_arg",
        Annotated[
            list[str],
            typer.Option(
                "--model-arg",
                help="MODEL:KEY=VALUE sets a request body field for one model (VALUE is JSON or text; KEY=null "
                "removes the field), e.g. openai/o4-mini:reasoning_effort=high; repeatable.",
            ),
        ],
        [],
    ),
    (
        "allow_model",
        Annotated[
            list[str],
            typer.Option(
                "--allow-model",
                help="A model (as you name it, e.g. anthropic/claude-sonnet-9) to send though its provider's bundled "
                "catalogue does not list it yet: a model newer than the catalogue; repeatable. Check it first "
                "against the provider's live model listing with lexpilot-batch preflight.",
            ),
        ],
        [],
    ),
    (
        "reasoning_effort",
        Annotated[
            str | None,
            typer.Option(
                "--reasoning-effort",
                help="reasoning_effort of OpenAI reasoning models (o1, o3, o4-mini, gpt-5...): none, minimal, low, "
                "medium or high (default: the provider's).",
            ),
        ],
        None,
    ),
    ("dataset", DatasetOpt, None),
    ("categories", CategoriesOpt, None),
    (
        "limit",
        Annotated[int | None, typer.Option("--limit", help="Use only the first N cases (smoke runs).", min=1)],
        None,
    ),
    ("temperature", TemperatureOpt, SEED.temperature),
    ("judge_temperature", JudgeTemperatureOpt, SEED.judge_temperature),
    ("max_tokens", MaxTokensOpt, SEED.max_tokens),
    (
        "prompts_file",
        Annotated[
            Path | None,
            typer.Option(
                "--prompts", help="JSON object replacing prompt templates by name (see README).", dir_okay=False
            ),
        ],
        None,
    ),
    (
        "speculate",
        Annotated[
            bool,
            typer.Option(
                "--speculate/--no-speculate",
                help="Request User Model replies alongside the classification they depend on (8 waves instead of 11).",
            ),
        ],
        False,
    ),
]


def run_spec(values: dict[str, Any]) -> RunSpec:
    from lexpilot_batch.benchmark.settings import Settings
    from lexpilot_batch.data import dataset_source
    from lexpilot_batch.study.model_list import ModelList, load_model_list, parse_model_arg, with_model_args
    from lexpilot_batch.study.runs import RunSpec

    listed = load_model_list(values["models_file"]) if values["models_file"] is not None else ModelList()
    return RunSpec(
        stage=values["stage"],
        run_ids=tuple(values["run_id"] or ["run1"]),
        models=(*listed.eval, *values["model"]),
        settings=Settings(
            values["user_model"] or listed.user or DEFAULT_USER_MODEL,
            values["judge_model"] or listed.judge or DEFAULT_JUDGE_MODEL,
            values["temperature"],
            values["judge_temperature"],
            values["max_tokens"],
        ),
        dataset=dataset_source(values["dataset"]),
        categories=values["categories"],
        limit=values["limit"],
        prompts=values["prompts_file"],
        speculate=values["speculate"],
        model_options=with_model_args(listed.options, [parse_model_arg(a) for a in values["model_arg"]]),
        reasoning_effort=values["reasoning_effort"],
        allowed_models=frozenset(values["allow_model"]),
        defaulted=frozenset(k for k in ("user_model", "judge_model") if not (values[k] or getattr(listed, k[:-6]))),
    )
