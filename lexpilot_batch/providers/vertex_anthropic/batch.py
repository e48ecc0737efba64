"""The `batch` backend of Claude on Vertex AI: Vertex AI batch prediction jobs of Anthropic's
publisher models, through the same `google-genai` Vertex client and Cloud Storage calls as Gemini's
(`vertex.batch`, whose backend this one is a variant of), as Google's own example creates one
(https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/batch, taken
2026-12-06: `client.batches.create(model="publishers/anthropic/models/...", src="gs://...jsonl",
config=CreateBatchJobConfig(dest=...))`).

What differs from Gemini's jobs:

- **upload**: the workspace's lines are already Vertex's (`{"custom_id", "request"}`, `lines`):
  the file is stored as it is under the bucket's `lexpilot/input/`.
- **create**: the model is `publishers/anthropic/models/<model>`. The workspace's tag is written
  into the job's output prefix, as for Gemini's jobs: a job whose create answer was lost is found
  again in the listing, which shows the jobs of both publishers (a tag names its file).
- **results**: `predictions*.jsonl` under the job's output directory, every row `{"custom_id",
  "request", "response", "status"}` (`results`); a cancelled or expired job's completed rows too.
- **quota**: "By default, the number of concurrent batch requests that you can make in a single
  project is 4" (the same page); what Vertex answers a fifth is not documented there.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from lexpilot_batch.providers.batch import BatchInfo, BatchSource
from lexpilot_batch.providers.vertex.batch import VertexBatchBackend
from lexpilot_batch.providers.vertex_anthropic.spec import PUBLISHED


class VertexClaudeBatchBackend(VertexBatchBackend):
    noun = "Vertex AI batch job of Claude"

    def _upload(self, path: Path, name: str) -> str:
        """The file as it is (its lines are Vertex's), streamed, under a name of its own."""
        object_name = f"{self.where.prefix}lexpilot/input/{uuid.uuid4().hex[:12]}/{Path(name).name}"
        with open(path, "rb") as fh:
            return self.gcs.upload(self.where.bucket, object_name, fh)

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        if source is None:
            raise ValueError("a Vertex batch job names its model: create it from its workspace file")
        named = dataclasses.replace(source, model=PUBLISHED + source.model.removeprefix(PUBLISHED))
        return super()._create(input_file_id, metadata, endpoint, named)
