"""Time-of-day pricing: a provider whose price depends on when a request is answered.

The bundled table (`data/prices.json`) lists each model at its list price; for a provider that
bills less outside its peak hours, its `$schedules` section gives, keyed by the provider's prefix,
`{"peak_utc": ["HH:MM-HH:MM", ...], "peak_days": ["Mon", ...], "off_peak_factor": 0.5, "since":
"YYYY-MM-DDTHH:MM:SSZ", "source": URL, "as_of": "YYYY-MM-DD"}`: the listed price is the peak one,
and outside those windows (every hour of a day not in `peak_days`) a request costs
`off_peak_factor` of it. A window starts inclusive and ends exclusive, in UTC, within one day
(`24:00` ends it at midnight). Before `since` the schedule does not apply (the list price does).
A user's `--prices FILE` may carry the same section, to correct a provider's schedule or add
one (`check_schedules`); it replaces the bundled one of that provider whole.

`factor_at` is the price factor of a model at a UTC instant; `next_change` when its window next
opens or closes. What `--off-peak` holds back and when it sends it again (`engine.off_peak`), the
report's cost of each answer at the time it was answered (`report.build`) and the projection's
cost and wait both ways (`estimate.off_peak`) all read them.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import PROVIDERS
from lexpilot_batch.util import resources

SECTION = "$schedules"
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # `datetime.weekday()` order
FIELDS = frozenset({"peak_utc", "peak_days", "off_peak_factor", "since", "source", "as_of"})
_WINDOW = re.compile(r"^(\d{2}):(\d{2})-(\d{2}):(\d{2})$")
_DAY = 86400.0


@dataclass(frozen=True)
class Schedule:
    """One provider's peak windows: minutes of the UTC day `[start, end)`, on `days` (0 Monday)."""

    provider: str
    windows: tuple[tuple[int, int], ...]
    days: frozenset[int]
    off_peak_factor: float
    since: float | None = None  # epoch seconds; before it the list price applies
    source: str = ""
    as_of: str = ""

    def describe(self) -> str:
        """The windows as the source states them, e.g. `01:00-04:00, 06:00-10:00 UTC Mon-Fri`."""
        spans = ", ".join(f"{_hhmm(a)}-{_hhmm(b)}" for a, b in self.windows)
        days = "every day" if len(self.days) == 7 else "/".join(DAYS[d] for d in sorted(self.days))
        return f"peak {spans} UTC {days}; off-peak x{self.off_peak_factor:g}"


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def is_peak(schedule: Schedule, t: float) -> bool:
    """Whether `t` (epoch seconds, UTC) is inside a peak window (or before the schedule applies)."""
    if schedule.since is not None and t < schedule.since:
        return True
    moment = datetime.fromtimestamp(t, tz=timezone.utc)
    if moment.weekday() not in schedule.days:
        return False
    minute = moment.hour * 60 + moment.minute
    return any(start <= minute < end for start, end in schedule.windows)


def factor_at(schedule: Schedule | None, t: float | None) -> float:
    """What a listed (peak) price is multiplied by for a request answered at `t`: 1 at peak, the
    off-peak factor outside it; 1 without a schedule or a time (the list price, an upper bound)."""
    if schedule is None or t is None:
        return 1.0
    return 1.0 if is_peak(schedule, t) else schedule.off_peak_factor


def next_change(schedule: Schedule, t: float) -> float | None:
    """The first instant after `t` at which `is_peak` changes (a window opens or closes); None when
    it never does (no window, or peak around the clock)."""
    day0 = math.floor(t / _DAY) * _DAY
    marks = {m for window in schedule.windows for m in window} | {0}
    candidates = sorted(day0 + d * _DAY + m * 60.0 for d in range(9) for m in marks)
    if schedule.since is not None:
        candidates = sorted({*candidates, schedule.since})
    now = is_peak(schedule, t)
    return next((c for c in candidates if c > t and is_peak(schedule, c) != now), None)


def next_off_peak(schedule: Schedule, t: float) -> float | None:
    """When the off-peak window is next open: `t` itself if it is now; None if never."""
    return t if not is_peak(schedule, t) else next_change(schedule, t)


def when(t: float) -> str:
    """An instant as shown to a user: `2026-12-07 10:00 UTC (Mon)`."""
    moment = datetime.fromtimestamp(t, tz=timezone.utc)
    return f"{moment:%Y-%m-%d %H:%M} UTC ({DAYS[moment.weekday()]})"


@functools.cache
def _bundled() -> dict[str, Schedule]:
    try:
        data = json.loads(resources.data_dir().joinpath("prices.json").read_text(encoding="utf-8"))
        return _read(data.get(SECTION) or {}, "the bundled data/prices.json")
    except (OSError, ValueError, LexpilotError):  # a broken install knows no schedule: list prices
        return {}


def bundled_schedules() -> dict[str, Schedule]:
    """The bundled table's schedules, by provider prefix."""
    return dict(_bundled())


def schedule_for(prices: Mapping[str, object] | None, model: str | None) -> Schedule | None:
    """The schedule of `model`'s provider: a `--prices` file's `$schedules` first, else the bundled
    one; None for a model whose provider prices around the clock (or a bare name)."""
    if not model:
        return None
    try:
        provider = parse_model(model).provider
    except ConfigError:
        return None
    if provider is None:
        return None
    given = (prices or {}).get(SECTION)
    if isinstance(given, Mapping) and provider.prefix in given:
        return _read({provider.prefix: given[provider.prefix]}, "--prices")[provider.prefix]
    return _bundled().get(provider.prefix)


def check_schedules(prices: Mapping[str, object] | None, where: str = "--prices") -> None:
    """A `$schedules` section checked as `_read` reads it: `LexpilotError` naming `where` and the
    field, and what is expected."""
    section = (prices or {}).get(SECTION)
    if section is not None:
        _read(section, where)


def _read(section: object, where: str) -> dict[str, Schedule]:
    expected = (
        'expected {"<provider prefix>": {"peak_utc": ["01:00-04:00", ...], "peak_days": ["Mon", ...], '
        '"off_peak_factor": 0.5, "since": "2026-08-16T16:00:00Z", "source": URL, "as_of": "YYYY-MM-DD"}}'
    )
    if not isinstance(section, Mapping):
        raise LexpilotError(f"{where}: {SECTION} must be an object by provider; {expected}")
    out = {}
    for prefix, entry in section.items():
        if prefix.startswith("$"):
            continue
        field = f"{where}: {SECTION}.{prefix}"
        if prefix not in PROVIDERS:
            raise LexpilotError(f"{field}: unknown provider prefix {prefix!r}; known: {', '.join(sorted(PROVIDERS))}")
        if not isinstance(entry, Mapping):
            raise LexpilotError(f"{field}: must be an object; {expected}")
        unknown = sorted(set(entry) - FIELDS)
        if unknown:
            raise LexpilotError(f"{field}: unknown field {', '.join(map(repr, unknown))}; {expected}")
        for required in ("peak_utc", "off_peak_factor"):
            if required not in entry:
                raise LexpilotError(f"{field}: missing field {required!r}; {expected}")
        out[prefix] = Schedule(
            prefix,
            _windows(entry["peak_utc"], f"{field}.peak_utc"),
            _days(entry.get("peak_days", list(DAYS)), f"{field}.peak_days"),
            _factor(entry["off_peak_factor"], f"{field}.off_peak_factor"),
            _since(entry.get("since"), f"{field}.since"),
            str(entry.get("source", "")),
            str(entry.get("as_of", "")),
        )
    return out


def _windows(value: object, field: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list):
        raise LexpilotError(f'{field}: must be a list of "HH:MM-HH:MM" windows in UTC, not {value!r}')
    windows = []
    for text in value:
        match = _WINDOW.match(text) if isinstance(text, str) else None
        if match is None:
            raise LexpilotError(f'{field}: {text!r} is not a "HH:MM-HH:MM" window in UTC (e.g. "01:00-04:00")')
        h1, m1, h2, m2 = map(int, match.groups())
        start, end = h1 * 60 + m1, h2 * 60 + m2
        if h1 > 23 or m1 > 59 or m2 > 59 or end > 1440 or start >= end:
            raise LexpilotError(
                f"{field}: {text!r} must start before it ends within one UTC day (00:00 to 24:00); "
                'split a window across midnight in two ("22:00-24:00", "00:00-02:00")'
            )
        windows.append((start, end))
    return tuple(sorted(windows))


def _days(value: object, field: str) -> frozenset[int]:
    if not isinstance(value, list) or not all(isinstance(d, str) and d in DAYS for d in value):
        raise LexpilotError(f"{field}: must be a list of weekdays among {', '.join(DAYS)} (UTC), not {value!r}")
    return frozenset(DAYS.index(d) for d in value)


def _factor(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise LexpilotError(
            f"{field}: must be a number from 0 to 1 (the off-peak price over the listed peak price), not {value!r}"
        )
    return float(value)


def _since(value: object, field: str) -> float | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise LexpilotError(f'{field}: must be a UTC instant such as "2026-08-16T16:00:00Z", not {value!r}')
    return moment.timestamp()
