"""Cached prefixes: how a request line is laid out so that the prefix it shares with other requests
meets its provider's prompt-caching rules, without changing what the model is asked.

Every prompt of the benchmark is one user message whose *shared part* (`prompts.Prompt.shared`: the
template's text up to and including its first slot, the case's history or claims) recurs in every
run, and its history in every later round. What each provider is sent (the layout is chosen when
a run is registered and pinned in its manifest, `bodies.request.RoleRequest.cache`; each provider
declares its own, `spec.Provider.cache`):

| provider | sent | why |
| --- | --- | --- |
| `openai` | `"prompt_cache_key": "lp-<hash of case and template>"` | caching is automatic above 1,024 tokens; the key joins the prefix hash that routes a request to a cache machine, so a case's prompts of one template meet there (https://developers.openai.com/api/docs/guides/prompt-caching, "How it works"; `openai.types.chat.CompletionCreateParams.prompt_cache_key`) |
| `anthropic` | the message's content as text blocks: the shared part cut at the start of each history message, its last block with `"cache_control": {"type": "ephemeral"}`, then the rest | only prefixes ending at a breakpoint are cached, and a request finds a cached prefix at its breakpoint or at an earlier block boundary (about 20 blocks back) (https://docs.claude.com/en/docs/build-with-claude/prompt-caching; `anthropic.types.TextBlockParam.cache_control`): an interaction round reads the previous round's history at the boundary where that history ended, and writes only what it adds. The model reads the blocks' texts joined, the same text as the one string |
| `google` | nothing | Gemini's implicit caching needs no field (https://ai.google.dev/gemini-api/docs/caching) |
| `fireworks` | nothing | its batch jobs cache prompts by themselves, "placing static content first" (https://docs.fireworks.ai/guides/batch-inference): every prompt's shared part leads already |
| any other | nothing | an OpenAI-compatible endpoint may refuse an unknown field; DeepSeek's and DashScope's implicit caches are automatic (https://api-docs.deepseek.com/guides/kv_cache; https://www.alibabacloud.com/help/en/model-studio/context-cache: DashScope's explicit `cache_control` cache costs 125% to create, and its batches are not documented to take it); Mistral documents a `prompt_cache_key` for its chat API (https://docs.mistral.ai/studio-api/conversations/advanced/prompt-caching), not for its batch lines; Azure's docs name no `prompt_cache_key` we could cite |

A breakpoint is set only where the shared part can reach the model's minimum cacheable length
(`anthropic.cache.ANTHROPIC_MINIMUM`), counted generously as a token a character: a marker on a prefix too short
is ignored by Anthropic, without error or charge, while a missing one forgoes the discount. The
prompt's text is the same either way: the simulated provider's answers, which are drawn from it,
and so every record are unchanged; only the request bytes (and the request hash in a custom_id)
differ.
"""

from __future__ import annotations

import hashlib

KEY = "key"  # send OpenAI's `prompt_cache_key`
BREAKPOINT = "breakpoint"  # "breakpoint:<minimum tokens>": Anthropic's `cache_control` on the shared part


def breakpoint_layout(minimum: int) -> str:
    """The breakpoint layout of a model whose shortest cacheable prefix is `minimum` tokens."""
    return f"{BREAKPOINT}:{minimum}"


_CACHE_CONTROL = '"cache_control":{"type":"ephemeral"}'
NEXT_BLOCK = b'"},{"type":"text","text":"'  # ends a text block and opens the next


def cache_key(case: str, head: str) -> str:
    """The `prompt_cache_key` of a case's prompts of one template (`head`: the template's opening text)."""
    return "lp-" + hashlib.sha256(f"{case}\x1f{head}".encode()).hexdigest()[:16]


def breakpoint_floor(cache: str | None) -> int | None:
    """The minimum a breakpoint layout asks for; None for any other layout."""
    if cache is None or not cache.startswith(BREAKPOINT + ":"):
        return None
    return int(cache.partition(":")[2])


def split_content(middle: bytes, end: bytes) -> tuple[bytes, bytes, bytes]:
    """A line frame whose prompt string (`middle` ends with `"content":"`, `end` starts with its closing
    quote) becomes two text blocks: (the new middle, what goes between the shared part and the rest,
    the new end)."""
    assert middle.endswith(b'"content":"') and end.startswith(b'"')
    return (
        middle[:-1] + b'[{"type":"text","text":"',
        ('",' + _CACHE_CONTROL + '},{"type":"text","text":"').encode(),
        b'"}]' + end[1:],
    )


def whole_marked(end: bytes) -> bytes:
    """The end of a split frame when the shared part is the whole prompt: one marked block."""
    assert end.startswith(b'"}]')
    return ('",' + _CACHE_CONTROL + "}]").encode() + end[3:]
