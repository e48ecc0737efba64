"""The calls a simulated server answers: counted per route (`stats`), and the per-call faults drawn
for them (HTTP 429, 500 and 529, slow answers, late creates, cut and damaged downloads), each drawn
from the fault seed, the fault, the route and the route's own count of such draws
(`faults.draw`), never from the `random` module's shared generator (which a seeded test, or
Hypothesis, in the same process owns) nor from one stream all handler threads take turns on: the
k-th create of a run meets the same faults run after run, whatever other threads' calls (polls,
downloads) came in between.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.faults import DAMAGES, Faults, draw
from lexpilot_batch.simulated.profiles import Profile


class Calls:
    """One server's calls and the per-call faults of `faults` (module docstring)."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        # calls, http_429, http_500, http_slow, retried calls, flex_429 refusals and flex_answers seen;
        # each also per route ("calls:upload_file")
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._draws: Counter[tuple[str, ...]] = Counter()  # draws made per key: the next one's number
        self._damaged: Counter[str] = Counter()  # damaged downloads by file (its path): `damaged_times`
        # Set to a list to keep a log of the synchronous calls answered: (model, the client's id of
        # the call, began, ended) on this process's monotonic clock (`chat_span`); None: no log.
        self.chats: list[tuple[str, str, float, float]] | None = None

    def chat_span(self, model: str, call_id: str, began: float) -> None:
        """Log a synchronous call answered now, begun at `began` (`time.monotonic`), if logging."""
        if self.chats is not None:
            ended = time.monotonic()
            with self._lock:
                self.chats.append((model, call_id, began, ended))

    def count(self, what: str, route: str) -> None:
        with self._lock:
            self.stats[what] += 1
            self.stats[f"{what}:{route}"] += 1

    def record(self, route: str, retry_count: str, profile: Profile | None = None) -> None:
        self.count("calls", route)
        if retry_count not in ("", "0"):
            self.count("retried", route)
        if profile is not None:  # "calls:zhipu:create_batch": the platform's own calls
            with self._lock:
                self.stats[f"calls:{profile.name}:{route}"] += 1
                if retry_count not in ("", "0"):
                    self.stats[f"retried:{profile.name}:{route}"] += 1

    def roll(self, *key: str) -> float:
        """The next draw for `key` (a fault and a route): the
        n-th draw of a key is the same number run after run (module docstring)."""
        with self._lock:
            number = self._draws[key]
            self._draws[key] += 1
        return draw(self.faults.seed, "call", *key, str(number))

    def _struck(self, fault: str, route: str) -> bool:
        """Whether a per-call fault (`http_slow`, `late_create`, `cut_download`) strikes this call:
        drawn only while it is on, and counted when it strikes."""
        chance = getattr(self.faults, fault)
        if not chance:
            return False
        if self.roll(fault, route) < chance:
            self.count(fault, route)
            return True
        return False

    def slow(self, route: str) -> None:
        """Maybe hold the answer of a call whose route has run (drawn per call)."""
        if self.faults.applies_to(route) and self._struck("http_slow", route):
            time.sleep(self.faults.slow_seconds)

    def cut(self, route: str) -> bool:
        """Whether to break off this download of a file's content half-way (drawn per call)."""
        return self._struck("cut_download", route)

    def damage(self, route: str, path: str) -> str | None:
        """The damage (`faults.DAMAGES`) to do to this download of a file's content, at `path`, or
        None (drawn per call; at most `damaged_times` per file when that is set)."""
        faults = self.faults
        if not faults.damaged_download:
            return None
        with self._lock:
            if faults.damaged_times and self._damaged[path] >= faults.damaged_times:
                return None
        if self.roll("damaged_download", route) >= faults.damaged_download:
            return None
        kinds = faults.damage.split("+") if faults.damage else DAMAGES
        kind = kinds[min(int(self.roll("damage", route) * len(kinds)), len(kinds) - 1)]
        with self._lock:
            self._damaged[path] += 1
        self.count("damaged_download", route)
        self.count(f"damaged_download:{kind}", route)
        return kind

    def late(self, route: str) -> None:
        """Maybe hold a batches create *before* it runs (drawn per call): the batch appears only
        after a client with a shorter timeout gave up on its answer."""
        if self._struck("late_create", route):
            time.sleep(self.faults.slow_seconds)

    def http_fault(self, route: str, overloaded: int = 529) -> None:
        """Maybe answer 429, 500 or 529 (`overloaded`: the route's API's status for it) instead of
        running the route (drawn per call)."""
        faults = self.faults
        if not (faults.http_429 or faults.http_500 or faults.http_529) or not faults.applies_to(route):
            return
        roll = self.roll("http", route)
        wait = {
            "retry-after": str(max(0, round(faults.retry_after))),
            "retry-after-ms": str(int(faults.retry_after * 1000)),
        }
        if roll < faults.http_429:
            self.count("http_429", route)
            raise ApiError(
                429,
                "Rate limit reached for requests (simulated). Please try again shortly.",
                type="requests",
                code="rate_limit_exceeded",
                headers=wait,
            )
        if roll < faults.http_429 + faults.http_500:
            self.count("http_500", route)
            # Real 500s carry no retry-after; ours do, so that retries in tests stay fast.
            raise ApiError(
                500,
                "The server had an error while processing your request. Sorry about that!",
                type="server_error",
                headers=wait,
            )
        if roll < faults.http_429 + faults.http_500 + faults.http_529:
            self.count("http_529", route)
            raise ApiError(overloaded, "Overloaded", type="overloaded_error", headers=wait)


_HTML = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n"
    b"<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n"
)
_TEXT = b"upstream connect error or disconnect/reset before headers. reset reason: connection termination"


def damaged(kind: str, data: bytes) -> tuple[bytes, str]:
    """A file's content as a damaged download of it answers it (`faults.DAMAGES`), and its content type."""
    if kind == "empty":
        return b"", "application/octet-stream"
    if kind == "html":
        return _HTML, "text/html; charset=utf-8"
    if kind == "text":
        return _TEXT, "text/plain"
    lines = data.splitlines(keepends=True)
    if kind == "missing_line":
        return b"".join(lines[: len(lines) // 2] + lines[len(lines) // 2 + 1 :]), "application/octet-stream"
    # truncated: cut in the middle of its last line (a cut that fell between two lines looks like `missing_line`)
    last = lines[-1] if lines else b""
    return data[: len(data) - len(last) + len(last) // 2], "application/octet-stream"


def damaged_page(kind: str, page: dict, member: str) -> tuple[bytes, str]:
    """A JSON page of results (its `member` the list of them) as a damaged download answers it: a
    result short (`missing_line`), its JSON cut in the middle (`truncated`), or as a file's content
    is damaged (`damaged`)."""
    whole = json.dumps(page, ensure_ascii=False).encode("utf-8")
    if kind == "missing_line":
        items = list(page[member])
        del items[len(items) // 2]
        return json.dumps({**page, member: items}, ensure_ascii=False).encode("utf-8"), "application/json"
    if kind == "truncated":
        return whole[: len(whole) // 2], "application/json"
    return damaged(kind, whole)
