"""The OpenAI-shaped Batch object read by `providers.openai.batch.info`, in every shape its
publishers show: OpenAI's nested `request_counts`, and Zhipu BigModel's, whose REST reference
gives `request_counts` as an integer with `total`, `completed` and `failed` at the top level. The
documented examples themselves are read in `tests/providers/test_documented.py`."""

from __future__ import annotations

from typing import Any

import pytest
from openai._models import construct_type
from openai.types import Batch

from lexpilot_batch.providers.batch import BatchStatus
from lexpilot_batch.providers.openai.batch import info

BASE = {
    "id": "batch_1",
    "object": "batch",
    "endpoint": "/v4/chat/completions",
    "input_file_id": "file-1",
    "completion_window": "24h",
    "created_at": 1711471533,
}


def _read(**fields: Any) -> Any:
    """The object as the `openai` SDK hands it over: built from the JSON, never validated."""
    return info(construct_type(type_=Batch, value={**BASE, **fields}))


def test_openais_nested_counts_are_read():
    read = _read(status="completed", request_counts={"total": 100, "completed": 95, "failed": 5})
    assert read.terminal and read.request_counts == {"total": 100, "completed": 95, "failed": 5}


@pytest.mark.parametrize("status", ["validating", "in_progress", "completed", "failed", "cancelled"])
def test_zhipus_integer_counts_with_its_totals_at_the_top_level_are_read_not_crashed_on(status):
    """Before, `counts.total` raised AttributeError on the first create, retrieve or list answer:
    after the provider had made the batch."""
    read = _read(status=status, request_counts=10, total=10, completed=9, failed=1)
    assert read.status == status and read.request_counts == {"total": 10, "completed": 9, "failed": 1}


def test_no_counts_and_empty_file_ids_read_as_none():
    read = _read(status=BatchStatus.IN_PROGRESS, request_counts=None, output_file_id="", error_file_id="")
    assert read.request_counts == {} and read.output_file_id is None and read.error_file_id is None
