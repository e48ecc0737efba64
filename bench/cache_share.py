"""Cached-token accounting for the bench: the share of input tokens each provider's documented
caching rule would cache for the workspace's requests, and the cost it would save.

The bench's models are bare names at the simulated provider, so its lines carry no provider's
cache layout. This replays every request the workspace compiled, in compile order (wave, file,
line), as each provider would be sent it: the line the product writes for that provider
(`providers.lines.line_body` with the layout `bodies.request.cache_layout` gives a run of that
provider's model: OpenAI's `prompt_cache_key`, Anthropic's `cache_control` on the shared part),
through the simulated provider's rule for that API (`simulated.caching`). The prompt's shared part
(the template up to and including its first slot) is found again from the default templates.

Prices are the bundled table's (`data/prices.json`), at the batch discount for the APIs whose
batches the product sends; DeepSeek (sync only) at the prices of its pricing page
(https://api-docs.deepseek.com/quick_start/pricing-details-usd: deepseek-chat 0.27 USD per 1M
input tokens, 0.07 on a cache hit, 1.10 output).
"""

from __future__ import annotations

import json
import re
import string
import time
from pathlib import Path
from typing import Any

from lexpilot_batch.benchmark.prompts import DEFAULT_TEMPLATES, Prompt
from lexpilot_batch.providers.anthropic.spec import NAME as ANTHROPIC
from lexpilot_batch.providers.bodies.request import cache_layout
from lexpilot_batch.providers.google.spec import NAME as GOOGLE
from lexpilot_batch.providers.lines import line_body
from lexpilot_batch.providers.openai.spec import NAME as OPENAI
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.prices import DEFAULT_BATCH_DISCOUNT, bundled_prices, cache_saving, cost_usd
from lexpilot_batch.simulated import caching, completions
from lexpilot_batch.simulated.apis.anthropic import _chat_parts
from lexpilot_batch.state.compaction import read_saved

# One model per API shape: (name as registered, API shape, rule, backend it is priced on).
PROVIDERS = (
    ("openai/gpt-4.1-mini", OPENAI, caching.OPENAI_RULE, "batch"),
    ("anthropic/claude-sonnet-4-5", ANTHROPIC, caching.ANTHROPIC_RULE, "batch"),
    ("google/gemini-2.5-flash", GOOGLE, caching.GEMINI_RULE, "batch"),
    ("deepseek/deepseek-chat", OPENAI, caching.DEEPSEEK_RULE, "sync"),
    ("dashscope/qwen-plus", OPENAI, caching.DASHSCOPE_RULE, "batch"),  # no price bundled: share only
)
DEEPSEEK_PRICE = {"input": 0.27, "cached_input": 0.07, "output": 1.10}
_URL = {OPENAI: "/v1/chat/completions", ANTHROPIC: "/v1/messages", GOOGLE: ""}


def _templates() -> list[tuple[str, str]]:
    """(head, what follows the first slot) of each default template, longest head first."""
    out = []
    for template in DEFAULT_TEMPLATES.values():
        parsed = list(string.Formatter().parse(template))
        head = parsed[0][0] if parsed[0][1] is not None else ""
        after = parsed[1][0] if len(parsed) > 1 else ""
        out.append((head, after))
    return sorted(out, key=lambda t: -len(t[0]))


def _prompt(text: str, templates: list[tuple[str, str]]) -> Prompt:
    """The prompt as the compiler built it: head, first slot, rest (`Prompt.shared` = 2)."""
    for head, after in templates:
        if head and text.startswith(head):
            end = text.find(after, len(head)) if after else -1
            if end >= 0:
                # The history's messages, each after the first starting at its "\n" (`Prompt.breaks`).
                slot = [m for m in re.split(r"(?=\n(?:User|Assistant): )", text[len(head) : end]) if m]
                breaks = [i for i, m in enumerate(slot, 1) if i > 1 and m.startswith("\n")]
                return Prompt((head, *slot, text[end:]), 1 + len(slot), breaks)
    return Prompt((text,))


def _request(name: str, api: str, prompt: Prompt, case: str) -> tuple[str, dict[str, Any]]:
    """(model, chat.completions body the simulated provider checks) of this provider's line."""
    model = parse_model(name)
    layout = cache_layout(model)
    fields = json.dumps({"max_tokens": 8192}) if api != GOOGLE else "{}"
    line = json.loads(b'{"x":""' + line_body(model.sent, prompt, fields, _URL[api], None, api, layout, case))
    if api == ANTHROPIC:
        messages, rest = _chat_parts(line["params"])
        return model.sent, {"model": model.sent, "messages": messages, **rest}
    if api == GOOGLE:
        return model.sent, {"model": model.sent, "messages": [{"role": "user", "content": str(prompt)}]}
    return model.sent, line["body"]


def measure(root: Path, db: Any) -> dict[str, Any]:
    """Per provider: prompt tokens, cached (and Anthropic's written) tokens, share, USD saved."""
    started = time.perf_counter()
    templates = _templates()
    case_of = dict(db.execute("SELECT custom_id, case_idx FROM requests"))
    stores = {name: caching.PrefixCache() for name, *_ in PROVIDERS}
    totals = {name: {"prompt": 0, "cached": 0, "written": 0} for name, *_ in PROVIDERS}
    for (path,) in db.execute("SELECT path FROM files ORDER BY wave, pk").fetchall():
        for raw in read_saved(root / path).splitlines():
            line = json.loads(raw)
            text = completions._text_of(line["body"]["messages"][-1]["content"])
            prompt = _prompt(text, templates)
            case = str(case_of.get(line["custom_id"], ""))
            for name, api, rule, _ in PROVIDERS:
                model, body = _request(name, api, prompt, case)
                used = stores[name].usage(rule, model, body)
                t = totals[name]
                t["prompt"] += completions.count_prompt_tokens(body)
                t["cached"] += used.read
                t["written"] += used.written
    prices = bundled_prices()
    out: dict[str, Any] = {}
    for name, api, _, backend in PROVIDERS:
        t = totals[name]
        sent = parse_model(name).sent
        price = DEEPSEEK_PRICE if sent.startswith("deepseek") else prices.get(sent)
        saved = cache_saving(t["prompt"], t["cached"], price, backend, DEFAULT_BATCH_DISCOUNT, t["written"])
        out[name] = {
            "api": api,
            "prompt_tokens": t["prompt"],
            "cached_tokens": t["cached"],
            "cache_write_tokens": t["written"],
            "cached_share": round(t["cached"] / t["prompt"], 4) if t["prompt"] else 0.0,
            "saved_usd": None if saved is None else round(saved, 4),
            "input_cost_usd": None if price is None else round(cost_usd(t["prompt"], 0, price, backend) or 0, 4),
        }
    out["seconds"] = round(time.perf_counter() - started, 2)
    return out
