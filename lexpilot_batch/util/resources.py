"""Where the bundled data files live, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]  # lexpilot_batch/


def data_dir() -> Path:
    """The bundled `data/` folder: inside the wheel, or beside the package in a checkout."""
    for candidate in (_PACKAGE / "_data", _PACKAGE.parent / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the bundled data folder is missing; reinstall lexpilot-batch")


def sample_dataset() -> Path:
    return data_dir() / "sample_cases.json"


def default_categories() -> Path:
    return data_dir() / "categories.json"
