"""The simulated provider's prompt caching (`simulated.caching`): each provider's documented rule,
as a deterministic function of the requests seen, persisted with the provider's state."""

from __future__ import annotations

from lexpilot_batch.simulated import caching, completions
from lexpilot_batch.simulated.caching import ANTHROPIC_RULE, DEEPSEEK_RULE, GEMINI_RULE, OPENAI_RULE, PrefixCache
from lexpilot_batch.simulated.store import Store

CH = 1.5  # characters a token (`completions.CHARS_PER_TOKEN`)


def body(text: str, model: str = "gpt-4o", **fields: object) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], **fields}


def blocks(*texts: str, mark: int, model: str = "claude-sonnet-4-5") -> dict:
    content = [
        {"type": "text", "text": t, **({"cache_control": {"type": "ephemeral"}} if i == mark else {})}
        for i, t in enumerate(texts)
    ]
    return {"model": model, "messages": [{"role": "user", "content": content}]}


def text(tokens: int, fill: str = "法") -> str:
    return fill * int(tokens * CH)


def test_openai_caches_repeated_prefixes_of_1024_tokens_or_more_in_128_token_steps():
    cache = PrefixCache()
    long = text(1500)
    assert completions.count_prompt_tokens(body(long)) == 1503
    assert cache.usage(OPENAI_RULE, "gpt-4o", body(long)).read == 0  # first seen
    assert cache.usage(OPENAI_RULE, "gpt-4o", body(long)).read == 1408  # 1024 + 3 x 128 <= 1503
    # Sharing only its first ~1,300 tokens: the longest step inside them.
    other = long[: int(1300 * CH)] + text(300, "案")
    assert cache.usage(OPENAI_RULE, "gpt-4o", body(other)).read == 1280
    # Below 1,024 tokens nothing is cached, however often it is sent.
    short = text(900)
    assert [cache.usage(OPENAI_RULE, "gpt-4o", body(short)).read for _ in range(3)] == [0, 0, 0]


def test_openai_routes_by_model_and_prompt_cache_key():
    cache = PrefixCache()
    long = text(2000)
    cache.usage(OPENAI_RULE, "gpt-4o", body(long, prompt_cache_key="a"))
    assert cache.usage(OPENAI_RULE, "gpt-4o", body(long, prompt_cache_key="b")).read == 0
    assert cache.usage(OPENAI_RULE, "gpt-4o-mini", body(long, prompt_cache_key="a")).read == 0
    assert cache.usage(OPENAI_RULE, "gpt-4o", body(long, prompt_cache_key="a")).read > 1900


def test_anthropic_caches_only_up_to_a_breakpoint_of_the_models_minimum_and_counts_writes():
    cache = PrefixCache()
    shared, rest = text(1500), "新的回复"
    assert cache.usage(ANTHROPIC_RULE, "claude-sonnet-4-5", body(shared + rest, "claude-sonnet-4-5")).read == 0
    first = cache.usage(ANTHROPIC_RULE, "claude-sonnet-4-5", blocks(shared, rest, mark=0))
    assert (first.read, first.written) == (0, 1503)  # 3 tokens of framing, then the marked block
    again = cache.usage(ANTHROPIC_RULE, "claude-sonnet-4-5", blocks(shared, "另一条回复", mark=0))
    assert (again.read, again.written) == (1503, 0)
    # Haiku 4.5 caches no prefix under 4,096 tokens: neither read nor written.
    assert cache.usage(ANTHROPIC_RULE, "claude-haiku-4-5", blocks(shared, rest, mark=0)) == caching.Usage()


def test_anthropic_finds_an_earlier_rounds_prefix_at_a_block_boundary_and_writes_only_the_rest():
    cache = PrefixCache()
    history = [text(1200), text(200, "问")]
    cache.usage(ANTHROPIC_RULE, "claude-sonnet-4-5", blocks(*history, "尾", mark=1))
    grown = cache.usage(ANTHROPIC_RULE, "claude-sonnet-4-5", blocks(*history, text(300, "答"), "尾", mark=2))
    assert grown.read == 1403 and grown.written == 300


def test_gemini_implicit_caching_has_a_minimum_per_model():
    cache = PrefixCache()
    mid, long = text(1500), text(3000)
    for _ in range(2):
        short_hit = cache.usage(GEMINI_RULE, "gemini-2.5-flash", body(mid, "gemini-2.5-flash")).read
        long_hit = cache.usage(GEMINI_RULE, "gemini-2.5-flash", body(long, "gemini-2.5-flash")).read
    assert short_hit == 0 and long_hit == 2944  # 2,048 minimum; the steps of 128 under 3,003


def test_dashscope_implicit_cache_starts_at_256_tokens():
    cache = PrefixCache()
    assert caching.rule_for("qwen-plus") == caching.DASHSCOPE_RULE
    for _ in range(2):
        short = cache.usage(caching.DASHSCOPE_RULE, "qwen-plus", body(text(200), "qwen-plus")).read
        hit = cache.usage(caching.DASHSCOPE_RULE, "qwen-plus", body(text(700), "qwen-plus")).read
    assert short == 0 and hit == 640  # 256 + 3 x 128 <= 703


def test_deepseek_hits_a_whole_earlier_input_only():
    cache = PrefixCache()
    first = text(500)
    assert cache.usage(DEEPSEEK_RULE, "deepseek-chat", body(first, "deepseek-chat")).read == 0
    assert cache.usage(DEEPSEEK_RULE, "deepseek-chat", body(first, "deepseek-chat")).read == 503
    # A different ending after a shared start is no unit of an earlier request.
    assert cache.usage(DEEPSEEK_RULE, "deepseek-chat", body(first[:600] + "不同", "deepseek-chat")).read == 0


def test_the_store_is_persisted_per_batch_and_per_sync_call(tmp_path):
    store = Store(tmp_path / "sim")
    new: list[bytes] = []
    store.prefixes.usage(OPENAI_RULE, "gpt-4o", body(text(2000)), new)
    store.write_prefixes("batch_a", new)
    store.put_batch({"batch": {"id": "batch_a"}, "sim": {"seq": 1}})
    orphan: list[bytes] = []  # a batch whose record was never written: a crash between the two
    store.prefixes.usage(OPENAI_RULE, "gpt-4o", body(text(2000, "案")), orphan)
    store.write_prefixes("batch_b", orphan)
    sync: list[bytes] = []
    store.prefixes.usage(OPENAI_RULE, "gpt-4o", body(text(2000, "律")), sync)
    store.prefixes.append_sync(sync)
    with open(tmp_path / "sim" / "sync.prefixes", "ab") as out:
        out.write(b"\x01\x02\x03")  # an append cut short
    again = Store(tmp_path / "sim").prefixes
    assert again.usage(OPENAI_RULE, "gpt-4o", body(text(2000))).read > 1900
    assert again.usage(OPENAI_RULE, "gpt-4o", body(text(2000, "律"))).read > 1900
    assert again.usage(OPENAI_RULE, "gpt-4o", body(text(2000, "案"))).read == 0


def test_caching_changes_no_answer_only_the_cached_tokens():
    prompt = "请阅读下面的对话历史，并以律师的身份给出下一轮回复。\n<对话历史>\nUser: " + text(1500) + "\n</对话历史>"
    cache = PrefixCache()
    for truncate, empty in ((False, False), (True, False), (False, True)):
        plain = completions.complete(body(prompt), 7, key="k", created=0, truncate=truncate, empty=empty)
        cached = completions.complete(
            body(prompt), 7, key="k", created=0, truncate=truncate, empty=empty, prefixes=cache
        )
        assert plain["choices"] == cached["choices"]
    assert cached["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert plain["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_the_hash_set_keeps_every_hash_across_merges_and_forgets_on_request():
    import os

    from lexpilot_batch.simulated.caching import _Hashes

    keys = [os.urandom(8) for _ in range(70_000)]  # past the first merge (65,536 added)
    hashes = _Hashes([b"".join(keys[:1000]), b"".join(keys[1000:2000])])  # two persisted runs
    for k in keys[2000:]:
        hashes.add(k)
    assert len(hashes.added) < len(keys) - 2000  # merged into the sorted array at least once
    assert all(k in hashes for k in keys[::97]) and os.urandom(8) not in hashes
    hashes.remove([keys[5], keys[-1]])
    assert keys[5] not in hashes and keys[-1] not in hashes and keys[6] in hashes
