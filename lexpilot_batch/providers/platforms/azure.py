"""Azure OpenAI: OpenAI's v1 API under `https://YOUR-RESOURCE.openai.azure.com/openai/v1`, whose
`model` is the Global Batch deployment's name (Azure OpenAI batch how-to)."""

from __future__ import annotations

from lexpilot_batch.providers.openai.dialect import OPENAI
from lexpilot_batch.providers.spec import FORCED, MB, Limits, Provider

PROVIDER = Provider(
    "azure",
    "Azure OpenAI",
    "openai",
    None,  # the resource is yours
    "AZURE_OPENAI_BASE_URL",
    "AZURE_OPENAI_API_KEY",
    # Lines name `/chat/completions` (the v1 API's; its REST reference spells it `/v1/chat/completions`,
    # and the simulated provider takes both). At most 50,000 requests and 200 MB per file: the REST
    # reference's "Create a batch" (learn.microsoft.com/azure/foundry/reference/rest/batches-create-batch,
    # `input_file_id`); the how-to's 100,000 is not kept until a source of the API says more. A
    # resource holds at most 500 batch files
    # without an expiration, output files included, and 10,000 with one (14 to 30 days: 1,209,600
    # to 2,592,000 s; Azure OpenAI batch how-to, "Batch limits"): files expire after 14 days and
    # are deleted once ingested. Its enqueued-token quota is what each deployment is configured with.
    limits=Limits(50_000, 200 * MB, "24h", "/chat/completions", file_expiry=14 * 24 * 3600, delete_files=True),
    hosts=(".openai.azure.com", "/openai/v1"),
    dialect=OPENAI,
    first_party=True,
    # Flex processing (preview) takes OpenAI's field on Global Standard deployments of supported
    # models and answers 400 for others; a deployment's name does not tell its model: only when forced.
    flex=FORCED,
    chat_api=False,  # a Global Batch deployment runs batches only
    url_example="https://YOUR-RESOURCE.openai.azure.com/openai/v1",
)
