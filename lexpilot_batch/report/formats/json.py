"""The report as JSON: the documented shape (`report.document`), Chinese unescaped, floats at full precision."""

from __future__ import annotations

import json


def render_json(report: dict) -> str:
    return json.dumps(report, ensure_ascii=False, indent=2) + "\n"
