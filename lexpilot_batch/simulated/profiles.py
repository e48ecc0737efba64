"""How each OpenAI-compatible platform's batch API differs from OpenAI's, as the simulated provider
speaks it: one `Profile` per platform, chosen by the path a request arrives on.

Each platform is served under `/<name>` followed by the platform's own base path, so that its SDK
or the `openai` SDK pointed at `SimulatedServer.profile_url(name)` calls the platform's own routes:
`/groq/openai/v1/batches`, `/zhipu/api/paas/v4/files`, `/qianfan/v2/batches`,
`/siliconflow/v1/batches`, `/moonshot/v1/files`, `/ark/api/v3/batch/chat/completions`. A request
there is run by the OpenAI routes (`apis.openai`) with the platform's differences: the file purposes it
takes, the batch endpoints (and line urls) it runs, the completion windows it accepts, how many
requests one file may hold and how large it may be, a new batch's status word, and the body of its
error answers. Batches created on one platform are not seen on another, nor on OpenAI's `/v1`
(each is an account of its own); files are shared, their ids being unguessable.

Each value below is the platform's published documentation (cited per profile). Where the docs are
silent, OpenAI's behaviour is kept, and the profile says so: the result and error lines of a
batch (no platform documents its own), the statuses after the first one, a file over the request
limit (OpenAI's way: the batch fails validation with `too_many_requests`, since no platform says
whether it refuses the create or fails the batch), request counts while running.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.simulated.errors import ApiError

MB = 1024 * 1024


@dataclass(frozen=True)
class Profile:
    """One platform's differences from OpenAI's Batch API."""

    name: str
    base: str  # the platform's base path, after `/<name>`
    endpoints: frozenset[str]  # the batch endpoints it runs; each line's url must be the batch's
    purposes: tuple[str, ...]  # the upload purposes it takes
    windows: tuple[int, int]  # the completion windows it accepts, in hours (inclusive)
    units: str  # the units a window may be written in: "h" (24h) and "d" (7d)
    window_required: bool  # whether a batch must name its completion window
    max_requests: int  # requests per input file
    max_bytes: int  # bytes per input file
    # Its error body, of the same status, message and param as OpenAI's in the platform's fields.
    error_body: Callable[[ApiError], dict[str, Any]]
    new_status: str = "validating"  # the status word of a batch not yet started
    counts_while_new: bool = True  # False: `request_counts` is null while the batch is new
    batches: bool = True  # False: no Files + Batches routes, only the chat completions route
    stream: bool = True  # False: a chat completion with "stream": true is refused


# HTTP status -> (code, type) of each platform's error body; statuses not listed take the row of
# their class (`_row`). Zhipu's codes are business codes, Qianfan's and Ark's names.
_ZHIPU = {400: "1210", 401: "1001", 404: "1210", 405: "1210", 429: "1302", 500: "500"}
_QIANFAN = {
    400: ("invalid_argument", "invalid_request_error"),
    401: ("access_denied", "invalid_request_error"),
    404: ("invalid_argument", "invalid_request_error"),
    429: ("rpm_rate_limit_exceeded", "rate_limit_exceeded"),
    500: ("internal_error", "internal_error"),
}
_MOONSHOT = {
    400: "invalid_request_error",
    401: "invalid_authentication_error",
    404: "resource_not_found_error",
    429: "rate_limit_reached_error",
    500: "server_error",
}
_ARK = {
    400: ("InvalidParameter", "BadRequest"),
    401: ("AuthenticationError", "Unauthorized"),
    404: ("InvalidEndpointOrModel.NotFound", "NotFound"),
    429: ("RateLimitExceeded.EndpointRPMExceeded", "TooManyRequests"),
    500: ("InternalServiceError", "InternalServiceError"),
}


def _row(table: dict[int, Any], status: int) -> Any:
    if status in table:
        return table[status]
    return table[500] if status >= 500 else table[400]


def _zhipu(error: ApiError) -> dict[str, Any]:
    return {"error": {"code": _row(_ZHIPU, error.status), "message": error.message}}


def _qianfan(error: ApiError) -> dict[str, Any]:
    code, kind = _row(_QIANFAN, error.status)
    return {"error": {"code": code, "message": error.message, "type": kind}, "id": "as-simulated"}


def _siliconflow(error: ApiError) -> dict[str, Any]:
    code = 20012 if error.code == "model_not_found" else error.status
    return {"code": code, "message": error.message, "data": None}


def _moonshot(error: ApiError) -> dict[str, Any]:
    return {"error": {"type": _row(_MOONSHOT, error.status), "message": error.message}}


def _ark(error: ApiError) -> dict[str, Any]:
    code, kind = _row(_ARK, error.status)
    return {"error": {"code": code, "message": error.message, "param": error.param or "", "type": kind}}


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        # Groq: the `groq` SDK (`resources/batches.py`: endpoint `/v1/chat/completions`, a window of
        # `24h` to `7d`; `resources/files.py`: purpose `batch`) and https://console.groq.com/docs/batch
        # (lines name /v1/chat/completions; files of at most 100 MB, as the SDK's docstring says).
        # Silent on a request count per file and on error bodies: OpenAI's 50,000 and OpenAI's shape.
        Profile(
            "groq",
            "/openai/v1",
            frozenset({"/v1/chat/completions"}),
            ("batch",),
            (24, 7 * 24),
            "hd",
            True,
            50_000,
            100 * MB,
            ApiError.body,  # OpenAI's
        ),
        # Zhipu BigModel: https://docs.bigmodel.cn/cn/guide/tools/batch (lines name
        # /v4/chat/completions, at most 50,000 requests and 100 MB per file) and `POST /paas/v4/batches`
        # (https://docs.bigmodel.cn/api-reference/批处理-api/创建批处理任务: its example names only
        # `input_file_id` and `endpoint`, so a window is optional; its values are not documented:
        # OpenAI's `24h`). Errors: `{"error": {"code": "<business code>", "message"}}`, the codes of
        # https://docs.z.ai/api-reference/api-code (1210 bad parameters, 1302 too many concurrent
        # requests, 500 internal error, 1000 authentication).
        Profile(
            "zhipu",
            "/api/paas/v4",
            frozenset({"/v4/chat/completions"}),
            ("batch",),
            (24, 24),
            "h",
            False,
            50_000,
            100 * MB,
            _zhipu,
        ),
        # Baidu Qianfan: `POST /v2/batches` (https://cloud.baidu.com/doc/qianfan-api/s/xmk297s1a: a
        # window of 1-672 h written as a number and `h`; endpoint /v2/chat/completions; the input
        # file uploaded with purpose `batch`, at most 5,000 requests and 1 GB) and the batch guide
        # https://cloud.baidu.com/doc/qianfan/s/Oml4r78ea. Errors:
        # `{"error": {"code", "message", "type"}, "id"}` (https://cloud.baidu.com/doc/qianfan-api/s/Om9b4yj3w).
        Profile(
            "qianfan",
            "/v2",
            frozenset({"/v2/chat/completions"}),
            ("batch",),
            (1, 672),
            "h",
            True,
            5_000,
            1024 * MB,
            _qianfan,
        ),
        # SiliconFlow: https://docs.siliconflow.cn/cn/userguide/guides/batch (at most 5,000 lines and
        # 1 GB per file) and https://docs.siliconflow.cn/cn/api-reference/batch/create-batch (a window
        # of 24 to 336 hours, "24h" in its example; endpoint /v1/chat/completions; the create answer's
        # status `in_queue`, its `request_counts` null). Errors: the flat
        # `{"code": 20012, "message", "data": null}` of https://docs.siliconflow.cn/cn/faqs/error-code,
        # whose only documented code is 20012 (no such model): other errors carry their HTTP status.
        Profile(
            "siliconflow",
            "/v1",
            frozenset({"/v1/chat/completions"}),
            ("batch",),
            (24, 336),
            "h",
            True,
            5_000,
            1024 * MB,
            _siliconflow,
            new_status="in_queue",
            counts_while_new=False,
        ),
        # Moonshot (Kimi): https://platform.kimi.com/docs/api/batch-create (purpose `batch`; endpoint
        # /v1/chat/completions only; a window of 12h to 7d, as `12h`, `1d`, `3d`) and
        # https://platform.kimi.com/docs/guide/use-batch-api. Files of at most 100 MB
        # (https://platform.kimi.com/docs/api/errors: "max file size is 100MB"); no request count
        # is documented: OpenAI's 50,000. Errors: `{"error": {"type", "message"}}` (the same page).
        Profile(
            "moonshot",
            "/v1",
            frozenset({"/v1/chat/completions"}),
            ("batch",),
            (12, 7 * 24),
            "hd",
            True,
            50_000,
            100 * MB,
            _moonshot,
        ),
        # Volcengine Ark: no Files + Batches, only `POST /api/v3/batch/chat/completions`
        # (https://www.volcengine.com/docs/82379/1449576: the fields of ChatCompletions, but "stream"
        # may only be false, "设置为true，接口会直接报错"). Errors:
        # `{"error": {"code", "message", "param", "type"}}` with the codes and types of
        # https://www.volcengine.com/docs/82379/1299023 (InvalidParameter/BadRequest,
        # RateLimitExceeded.EndpointRPMExceeded/TooManyRequests, InternalServiceError).
        Profile(
            "ark",
            "/api/v3/batch",
            frozenset(),
            (),
            (24, 24),
            "h",
            True,
            0,
            0,
            _ark,
            batches=False,
            stream=False,
        ),
    )
}


def match(path: str) -> tuple[Profile, str] | None:
    """The profile a request path is under, and the path as OpenAI's routes name it (`/v1/...`);
    None for a path under no profile (OpenAI's own `/v1`, Mistral's, Anthropic's, Gemini's)."""
    head, _, rest = path.lstrip("/").partition("/")
    profile = PROFILES.get(head)
    if profile is None:
        return None
    rest = "/" + rest
    if rest != profile.base and not rest.startswith(profile.base + "/"):
        return profile, "/unknown" + rest  # under the platform, but not its base path: a 404
    return profile, "/v1" + rest[len(profile.base) :]


_WINDOW = re.compile(r"([1-9][0-9]{0,4})([a-z])")


def window_seconds(profile: Profile, window: Any) -> int:
    """The seconds of a completion window the platform accepts; raises its 400 otherwise."""
    low, high = profile.windows
    found = _WINDOW.fullmatch(window) if isinstance(window, str) else None
    hours = None
    if found and found.group(2) in profile.units:
        hours = int(found.group(1)) * (24 if found.group(2) == "d" else 1)
    if hours is None or not low <= hours <= high:
        shown = f"'{low}h'" if low == high else f"from {low}h to {high}h"
        units = " (in hours or days, as 24h or 7d)" if "d" in profile.units else " (in hours, as 24h)"
        raise ApiError(
            400,
            f"completion_window must be {shown}{units} on {profile.name}, not {window!r}.",
            param="completion_window",
            code="invalid_value",
        )
    return hours * 3600
