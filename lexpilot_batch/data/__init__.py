"""The LexPilot dataset: the case models, the cause-of-action → class mapping, and the loader.

The loader reads a dataset file in chunks, one case at a time, checks every rule of the schema
and either accepts the whole file or raises one `DataError` listing the problems it found (case
and field named, what was expected said; the first MAX_PROBLEMS are shown, and checking stops
after MAX_COUNTED). Nothing is ever half-loaded. `load_dataset` keeps every case in memory;
`open_dataset` keeps only what is small (case numbers, classes, thread variants) and reads the
cases again when they are copied, so that a dataset of any size fits in bounded memory. Values
quoted in problem lines are escaped so that none can act on a terminal. `validate_file` backs the
`validate-data` command and returns a printable `DatasetSummary`.

One module per job:
- `schema`: the case models (`Case`, `Message`) and the schema's names (`VERDICTS`, `ROLES`, ...)
- `jsonfile`: reading a JSON file whole, and the wording of every way reading one fails
- `stream`: reading a dataset file's top-level array in chunks, with the same errors
- `problems`: the bounded list of problem lines, and how they quote the file's values
- `checks`: every schema rule on one case object
- `categories`: the cause-of-action → class mapping
- `dataset`: validating a dataset file (`Dataset`, `DatasetFile`, `load_dataset`, `open_dataset`)
- `hub`: a file of a Hugging Face dataset (`hf://datasets/...`), read through `huggingface_hub`'s cache
- `summary`: what `validate-data` prints (`DatasetSummary`, `validate_file`)
"""

from lexpilot_batch.data.categories import load_categories
from lexpilot_batch.data.checks import MAX_NESTING, case_label
from lexpilot_batch.data.dataset import SAMPLE_NOTE, Dataset, DatasetFile, load_dataset, open_dataset
from lexpilot_batch.data.hub import HubDownload, HubFile, dataset_source
from lexpilot_batch.data.problems import MAX_COUNTED, MAX_PROBLEMS
from lexpilot_batch.data.schema import (
    HISTORY_ALIASES,
    HISTORY_FIELDS,
    REQUIRED_FIELDS,
    ROLES,
    VERDICTS,
    Case,
    KeyDetails,
    Message,
    Role,
    Verdict,
    dump_messages,
    stored_case,
)
from lexpilot_batch.data.stream import CHUNK_SIZE
from lexpilot_batch.data.summary import DatasetSummary, summarize, validate_file

__all__ = [
    "CHUNK_SIZE",
    "HISTORY_ALIASES",
    "HISTORY_FIELDS",
    "MAX_COUNTED",
    "MAX_NESTING",
    "MAX_PROBLEMS",
    "REQUIRED_FIELDS",
    "ROLES",
    "SAMPLE_NOTE",
    "VERDICTS",
    "Case",
    "Dataset",
    "DatasetFile",
    "DatasetSummary",
    "HubDownload",
    "HubFile",
    "KeyDetails",
    "Message",
    "Role",
    "Verdict",
    "case_label",
    "dataset_source",
    "dump_messages",
    "load_categories",
    "load_dataset",
    "open_dataset",
    "stored_case",
    "summarize",
    "validate_file",
]
