"""AWS Bedrock's batch inference for Claude, declared once (`providers.spec`): the `bedrock/` prefix,
`bedrock/<model id>` (`bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0`, or a cross-Region
inference profile, `bedrock/us.anthropic.claude-...`).

Requests are records of a JSONL file put in S3 and run by a model invocation job
(`CreateModelInvocationJob`, `bedrock.batch`); a wave's group too small for a job goes through
`InvokeModel` (`bedrock.chat`). Everything goes through `boto3` (an optional extra: `pip install
"lexpilot-batch[aws]"`), whose default chain finds the credentials: no key variable
(`Provider.keyless`). Where the files go and the role the jobs run as are the environment's
(`bedrock.aws`: `BEDROCK_S3_URI`, `BEDROCK_ROLE_ARN`; docs/providers.md says how to set them up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.anthropic import dialect
from lexpilot_batch.providers.bedrock import contract, ids, lines, results
from lexpilot_batch.providers.spec import MB, ApiSpec, Extra, Limits, Provider

NAME = "bedrock"
EXTRA = Extra("boto3", "aws", "AWS Bedrock")
# The default quotas of a batch inference job (Amazon Bedrock service quotas, AWS General Reference,
# https://docs.aws.amazon.com/general/latest/gr/bedrock.html#limits_bedrock, named in the batch input
# guide https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-data.html; taken
# 2026-12-06), each set per model and adjustable: "Minimum number of records per batch inference
# job" 100 (the code example: "Add records until you hit the minimum"), "Records per input file per
# batch inference job" 50,000, "Batch inference input file size" 1 GB. A job's timeout is 24 to 168
# hours (botocore's service model, `ModelInvocationJobTimeoutDurationInHours`); ours asks for 24.
LIMITS = Limits(50_000, 1_000 * MB, "24h", "/model-invocation-job", min_requests=100)


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.bedrock.batch import BedrockBatchBackend
    from lexpilot_batch.providers.bedrock.chat import BedrockChat

    return BedrockBatchBackend, BedrockChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    return contract.problems(model, body)


def _sample(model: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A record's `modelInput` as every line of a role sends it, with a placeholder message."""
    body: dict[str, Any] = lines.empty(model, "", dict(fields))["modelInput"]
    body["messages"] = [{"role": "user", "content": "(the prompt)"}]
    return body


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=_sample,
    load=_load,
    dialect=dialect.ANTHROPIC,
    read_results=lambda tag: lambda line: results.result(line, tag),
    line_id=ids.line_id,
    our_id=ids.our_id,
    extra=EXTRA,
    simulated_native=True,
    chat_names_model=True,  # a record names no model: the job, or InvokeModel's path, does
)

PROVIDERS = (
    Provider(
        "bedrock",
        "AWS Bedrock batch inference",
        NAME,
        "aws://default",  # boto3 finds each service's endpoint from the Region (`bedrock.aws`)
        "BEDROCK_BASE_URL",
        "AWS_SECRET_ACCESS_KEY",  # boto3's chain reads it (or a profile, SSO, a role); redacted wherever it is echoed
        limits=LIMITS,  # (no `hosts`: an OpenAI-compatible endpoint on AWS is no Bedrock job queue)
        keyless=True,
    ),
)
