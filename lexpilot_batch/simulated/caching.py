"""Prompt caching as the providers document it: which prompt tokens a request reads from a cache.

The simulated provider counts cached tokens with the rule of the API a model belongs to, as a
deterministic function of the requests it has answered before (a prefix store per model and
routing key), never by chance: the same requests in the same order give the same counts. What each
rule follows (each read 2026-12-02):

- **OpenAI** (https://developers.openai.com/api/docs/guides/prompt-caching, "How it works";
  cookbook `Prompt_Caching_201.ipynb` §1.1): caching is automatic for prompts of 1,024 tokens or
  more; a hit is an exact repeated prefix, counted in increments of 128 tokens (1,024, 1,152, ...),
  the longest prefix a previous request left; requests are routed by a hash of the prompt's start,
  combined with `prompt_cache_key` when one is sent. The store is kept per (model, key): one cache
  machine per routing bucket, so requests with different keys never share a prefix, and a bucket
  never overflows (the docs' ~15 requests per minute per prefix and key is a rate the simulator has
  no clock for). `usage.prompt_tokens_details.cached_tokens` reports the hit.
- **Anthropic** (https://docs.claude.com/en/docs/build-with-claude/prompt-caching, mirrored by
  https://docs.orq.ai/docs/proxy/prompt-caching): only prefixes ending at a `cache_control`
  breakpoint (on a content block, or the request's top-level `cache_control`, which marks the last
  block: `anthropic.types.MessageCreateParams.cache_control`) are cached, if at least the model's
  minimum (`ANTHROPIC_MINIMUM`); a request reads the longest cached prefix ending at its breakpoint
  or at an earlier block boundary, and writes the rest up to its breakpoint. Usage reports
  `cache_read_input_tokens` and `cache_creation_input_tokens`, `input_tokens` being the tokens
  after the last breakpoint. Writes cost 1.25x the input price (5-minute TTL), reads 0.1x; Message
  Batches' 50% discount applies to both (https://docs.claude.com/en/docs/build-with-claude/batch-processing,
  "Pricing"). The TTL is not modelled: the simulator has no clock across a workspace.
- **Gemini** implicit caching (https://ai.google.dev/gemini-api/docs/caching, updated 2026-10-13):
  automatic for Gemini 2.5 and newer above a minimum per model (`GEMINI_MINIMUM`), reported as
  `usageMetadata.cachedContentTokenCount`. The docs name no increment: the simulator counts the
  longest previously seen prefix on the same 128-token grid as OpenAI's (an assumption, said here).
- **DeepSeek** context caching on disk (https://api-docs.deepseek.com/guides/kv_cache, "Cache
  Persistence and Hit Rules"): each request persists a cache prefix unit at the end of its input,
  and a later request hits only a unit it matches fully; usage reports `prompt_cache_hit_tokens`
  and `prompt_cache_miss_tokens`. Of the three ways a unit is persisted the simulator keeps the
  first (request boundaries): the other two (common-prefix detection, fixed intervals of an
  undocumented size) would be guesses, so its counts are a lower bound.
- **DashScope** (Alibaba Model Studio) implicit cache (https://www.alibabacloud.com/help/en/model-studio/context-cache,
  "Implicit cache"): automatic for the Qwen models, the common prefix of requests cached from 256
  tokens on, hits billed at 20% of the input price and reported as
  `usage.prompt_tokens_details.cached_tokens`. No increment is documented: the same 128-token grid
  as above (an assumption). Its explicit cache (`cache_control`, 125% to create) is not sent.

Token counts are the simulator's estimate (`completions.tokens`: 1.5 characters a token, 3 tokens
of framing a message), so a prefix of N tokens is the framing and text that estimate gives N for.
The store is persisted with the simulated provider's state (`store.Store`): a batch's new prefixes
beside its record, written before it (a batch that was never recorded left none), the synchronous
routes' appended to one file; a restarted server on the same folder counts the same.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import math
import re
import sys
import threading
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexpilot_batch.providers.anthropic.spec import NAME as ANTHROPIC
from lexpilot_batch.providers.google.spec import NAME as GOOGLE

OPENAI_RULE = "openai"
ANTHROPIC_RULE = "anthropic"
GEMINI_RULE = "gemini"
DEEPSEEK_RULE = "deepseek"
DASHSCOPE_RULE = "dashscope"
DASHSCOPE_MINIMUM = 256

OPENAI_MINIMUM = 1024
OPENAI_INCREMENT = 128
FRAMING = 3  # tokens of chat framing per message, as `completions.count_prompt_tokens` counts them
CHARS_PER_TOKEN = 1.5  # `completions.CHARS_PER_TOKEN`

# Anthropic's "Minimum cacheable prompt length", most specific pattern first.
ANTHROPIC_MINIMUM: tuple[tuple[str, int], ...] = (
    (r"claude-(opus-4-[5-9]|haiku-4-5)", 4096),
    (r"claude-sonnet-4-6", 2048),
    (r"claude-(3-5-haiku|3-haiku|haiku-3)", 2048),
    (r".*", 1024),  # Sonnet 4.5, 4, 3.7, Opus 4.1, 4
)
# Gemini implicit caching's "Min token limit" (docs updated 2026-10-13); other Gemini models: 4,096.
GEMINI_MINIMUM: tuple[tuple[str, int], ...] = (
    (r"gemini-2\.5-(flash|pro)(-lite)?.*", 2048),
    (r".*", 4096),
)
_DIGEST = 8  # bytes of each stored prefix hash


def minimum(table: Sequence[tuple[str, int]], model: str) -> int:
    return next(n for pattern, n in table if re.match(pattern, model))


@dataclass(frozen=True)
class Usage:
    """What a request's prompt read from the cache, and (Anthropic) wrote to it."""

    read: int = 0
    written: int = 0


@dataclass
class _Prompt:
    """A prompt as the cache sees it: its text by content block, and the blocks' breakpoints."""

    blocks: list[tuple[str, bool]] = field(default_factory=list)  # (text, ends a message)
    marks: set[int] = field(default_factory=set)  # indexes of blocks with a cache_control
    top_level: bool = False


def _prompt(body: dict[str, Any]) -> _Prompt:
    out = _Prompt(top_level=isinstance(body.get("cache_control"), dict))
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        parts = content if isinstance(content, list) else [{"text": content if isinstance(content, str) else ""}]
        texts = [p for p in parts if isinstance(p, dict)]
        for i, part in enumerate(texts):
            if isinstance(part.get("cache_control"), dict):
                out.marks.add(len(out.blocks))
            text = part.get("text")
            out.blocks.append((text if isinstance(text, str) else "", i == len(texts) - 1))
    if out.top_level and out.blocks:
        out.marks.add(len(out.blocks) - 1)
    return out


class _Walk:
    """The prompt's prefixes in order, hashed incrementally: token counts at block ends and at
    given token counts inside them."""

    def __init__(self, bucket: str, prompt: _Prompt) -> None:
        self.prompt = prompt
        self.hasher = hashlib.blake2b(bucket.encode("utf-8"), digest_size=_DIGEST)

    def points(self, grid: Iterable[int] = ()) -> list[tuple[int, int | None, bytes]]:
        """(tokens, block index if a block ends there, hash) of every grid point and block end."""
        wanted = iter(sorted(grid))
        target = next(wanted, None)
        out: list[tuple[int, int | None, bytes]] = []
        before, opened = 0, True  # tokens before this block; whether it opens a message
        for index, (text, ends) in enumerate(self.prompt.blocks):
            start = before + (FRAMING if opened else 0)
            self.hasher.update(b"\x1e" if opened else b"\x1f")
            size = len(text) / CHARS_PER_TOKEN
            done = 0  # characters hashed of this block
            while target is not None and target <= start + int(size):
                if target > start:
                    cut = min(len(text), math.ceil((target - start) * CHARS_PER_TOKEN))
                    self.hasher.update(text[done:cut].encode("utf-8"))
                    done = cut
                    out.append((target, None, self.hasher.digest()))
                target = next(wanted, None)
            self.hasher.update(text[done:].encode("utf-8"))
            before = start + max(1, int(size)) if ends else start + int(size)
            out.append((before, index, self.hasher.digest()))
            opened = ends
        return out


class _Hashes:
    """A set of 8-byte hashes in about 8 bytes each (a 20x workspace leaves millions): a sorted
    array, and the hashes added since it was last merged. Built from persisted runs of hashes, each
    sorted on its own and the runs merged, so that no Python object per hash is ever held at once."""

    def __init__(self, runs: Iterable[bytes] = ()) -> None:
        sorted_runs = []
        for data in runs:
            run = array("Q")
            run.frombytes(data)
            sorted_runs.append(array("Q", sorted(run)))  # one run's objects at a time
        self.base = array("Q", heapq.merge(*sorted_runs))
        self.added: set[int] = set()

    @staticmethod
    def _key(digest: bytes) -> int:
        return int.from_bytes(digest, sys.byteorder)  # as `array.frombytes` reads the persisted bytes

    def __contains__(self, digest: bytes) -> bool:
        key = self._key(digest)
        if key in self.added:
            return True
        i = bisect.bisect_left(self.base, key)
        return i < len(self.base) and self.base[i] == key

    def __len__(self) -> int:
        return len(self.base) + len(self.added)

    def add(self, digest: bytes) -> None:
        self.added.add(self._key(digest))
        if len(self.added) > max(1 << 16, len(self.base) // 4):  # merged geometrically: O(n log n) in all
            self.base = array("Q", heapq.merge(self.base, sorted(self.added)))
            self.added.clear()

    def remove(self, digests: Iterable[bytes]) -> None:
        keys = {self._key(d) for d in digests}
        self.added -= keys
        if any(k in keys for k in self.base):
            self.base = array("Q", [k for k in self.base if k not in keys])


class PrefixCache:
    """The prefixes every earlier request left, per rule, model and routing key: 8-byte hashes.

    `usage` answers a request and remembers its prefixes; `new`, when given, collects the hashes
    it added, for the caller to persist with what it answered (`persist`, `load`).
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.seen = _Hashes()
        self.lock = threading.Lock()
        if root is not None:
            self.load()

    def load(self) -> None:
        """Every batch's prefixes whose record exists, and the synchronous routes'."""
        if self.root is None:
            return
        parts: list[bytes] = []
        paths = [p for p in (self.root / "batches").glob("*.prefixes") if p.with_suffix(".json").exists()]
        for path in [*paths, self.root / "sync.prefixes"]:
            if path.exists():
                data = path.read_bytes()
                parts.append(data[: len(data) - len(data) % _DIGEST])  # an append cut short by a crash: dropped
        seen = _Hashes(parts)
        with self.lock:
            self.seen = seen

    def forget(self, new: list[bytes]) -> None:
        """Undo what requests whose answers were thrown away added."""
        with self.lock:
            self.seen.remove(new)
        new.clear()

    def append_sync(self, new: list[bytes]) -> None:
        """Persist a synchronous call's new prefixes."""
        if self.root is not None and new:
            with self.lock, open(self.root / "sync.prefixes", "ab") as out:
                out.write(b"".join(new))

    def usage(self, rule: str | None, model: str, body: dict[str, Any], new: list[bytes] | None = None) -> Usage:
        """What `body` (a checked chat.completions body: messages of text or text blocks, and an
        Anthropic-style `cache_control` where a Claude request had one) reads and writes under
        `rule`; None: no caching."""
        if rule is None:
            return Usage()
        prompt = _prompt(body)
        key = body.get("prompt_cache_key") if rule == OPENAI_RULE else None
        bucket = f"{rule}|{model}|{key if isinstance(key, str) else ''}|"
        walk = _Walk(bucket, prompt)
        with self.lock:
            if rule == ANTHROPIC_RULE:
                return self._anthropic(walk, model, new)
            if rule == DEEPSEEK_RULE:
                return self._whole(walk, new)
            if rule == DASHSCOPE_RULE:
                return self._grid(walk, DASHSCOPE_MINIMUM, new)
            return self._grid(walk, OPENAI_MINIMUM if rule == OPENAI_RULE else minimum(GEMINI_MINIMUM, model), new)

    def _remember(self, digests: Iterable[bytes], new: list[bytes] | None) -> None:
        for d in digests:
            if d not in self.seen:
                self.seen.add(d)
                if new is not None:
                    new.append(d)

    def _grid(self, walk: _Walk, floor: int, new: list[bytes] | None) -> Usage:
        # The grid's points only (floor + 128k), at most the whole prompt's tokens.
        total = _total(walk.prompt)
        if total < floor:
            return Usage()
        points = [p for p in walk.points(range(floor, total + 1, OPENAI_INCREMENT)) if p[1] is None]
        read = max((t for t, _, d in points if d in self.seen), default=0)
        self._remember((d for _, _, d in points), new)
        return Usage(read=read)

    def _whole(self, walk: _Walk, new: list[bytes] | None) -> Usage:
        # A unit at the end of each request's input; a hit matches a whole earlier input.
        ends = walk.points()
        read = max((t for t, _, d in ends if d in self.seen), default=0)
        self._remember([ends[-1][2]] if ends else [], new)
        return Usage(read=read)

    def _anthropic(self, walk: _Walk, model: str, new: list[bytes] | None) -> Usage:
        marks = walk.prompt.marks
        if not marks:
            return Usage()
        ends = walk.points()
        floor = minimum(ANTHROPIC_MINIMUM, model)
        last = max(marks)
        # Reads: the longest cached prefix at a breakpoint or an earlier block boundary.
        read = max((t for t, i, d in ends if i is not None and i <= last and t >= floor and d in self.seen), default=0)
        written_to = max((t for t, i, _ in ends if i in marks and t >= floor), default=0)
        self._remember((d for t, i, d in ends if i in marks and t >= floor), new)
        return Usage(read=read, written=max(0, written_to - read))


def _total(prompt: _Prompt) -> int:
    """The prompt's tokens as `completions.count_prompt_tokens` counts a body of these messages."""
    total, text = 0, 0.0
    for block, ends in prompt.blocks:
        text += len(block)
        if ends:
            total += max(1, int(text / CHARS_PER_TOKEN)) + FRAMING
            text = 0.0
    return total


# The rule of each lab whose models cache by their own API's rule (`bodies.model_names.lab_of`), and
# of the models other labs serve under their own names (DeepSeek's, Qwen's), by a name's start.
_LAB_RULES = {ANTHROPIC: ANTHROPIC_RULE, GOOGLE: GEMINI_RULE}
_NAMED_RULES = ((("deepseek",), DEEPSEEK_RULE), (("qwen", "qwq"), DASHSCOPE_RULE))


def rule_for(api: str | None, model: str) -> str | None:
    """The caching rule of a model the simulated provider answers: by its lab's API
    (`bodies.model_names.lab_of`), DeepSeek's and Qwen's models by their names, any other model
    the OpenAI routes answer by OpenAI's."""
    return _LAB_RULES.get(api or "") or next(
        (rule for starts, rule in _NAMED_RULES if model.startswith(starts)), OPENAI_RULE
    )
