"""What an API of the simulated provider declares about itself, once: its routes, and what the
server needs to know to answer on them (`SimulatedApi`). Each module of `apis/` declares one, and
`apis` collects them; the server reads the declarations and never asks which API a request is for.

A `Route` is a method, a path pattern, the name `http_routes=` faults take, and a handler: a small
function of the API's `Handlers` (its state) and one `Request` (method, path arguments, query,
headers, body, the platform's profile), returning what the route answers: a JSON-able object,
bytes (a file's content), or a `Reply` with a status or headers of its own. A failure is an
`errors.ApiError`, which the server answers in the error shape of the route's API.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email import policy
from email.message import Message
from email.parser import BytesParser
from typing import Any, Generic, TypeVar

from lexpilot_batch.simulated.chat import HEADER
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.profiles import Profile
from lexpilot_batch.simulated.store import Store


class Handlers:
    """What one API's handlers run over: the provider's state, its faults, the simulated models'
    seed, the per-call faults' draws (the server's seeded generator) and the server's URL."""

    def __init__(self, store: Store, faults: Faults, seed: int, roll: Callable[..., float]) -> None:
        self.store, self.faults, self.seed, self.roll = store, faults, seed, roll
        self.root = ""  # the server's URL, for the URLs an answer names (set once it listens)


H = TypeVar("H", bound=Handlers)


@dataclass(frozen=True)
class Request:
    """One call, as a handler reads it."""

    method: str
    args: tuple[str, ...]  # the path pattern's groups, unquoted
    query: dict[str, str]
    headers: Message
    body: bytes
    profile: Profile | None = None  # the OpenAI-compatible platform whose path it came in on

    def json(self) -> Any:
        """The body as JSON; a 400 when it is none."""
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ApiError(
                400,
                "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.",
                param=None,
                code=None,
            ) from None

    @property
    def call_id(self) -> str | None:
        """The client's id of a synchronous call (`chat.HEADER`), which draws what a batch line draws."""
        return self.headers.get(HEADER)

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "")

    @property
    def platform(self) -> dict[str, Profile]:
        """`profile=` for a handler of a route served under a platform's path, nothing elsewhere."""
        return {"profile": self.profile} if self.profile is not None else {}


@dataclass(frozen=True)
class Reply:
    """A route's answer with a status or headers of its own: `data` is JSON-able, bytes (sent as a
    file's content), or None (an empty body)."""

    data: Any
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200


@dataclass(frozen=True)
class Route(Generic[H]):
    """One route of an API (module docstring)."""

    method: str
    path: str  # a regular expression the whole path matches; its groups are the request's `args`
    name: str  # as `http_routes=` names it (faults); several paths may share one
    handler: Callable[[H, Request], Any]
    creates: bool = False  # it creates a batch: the `late_create` fault holds it
    keyless: bool = False  # its URL is its own credential (an upload session's): no key is asked
    chat: bool = False  # a synchronous chat route: the only one a platform without batches serves
    on_flex: Callable[[Any], bool] | None = None  # whether an answer says it ran on the flex tier
    # A header its API's SDK sends on every call (Anthropic's `anthropic-version`): the route is
    # that API's where two APIs share a path (`GET /v1/models`); None: any call of the path.
    header: str | None = None
    # The member of its JSON answer holding a page of a batch's results (OpenRouter's
    # `GET /batches/{id}/results`: "data"): such an answer is a download, damaged
    # (`damaged_download`) and broken off (`cut_download`) as a file's content is.
    page: str | None = None
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", re.compile(self.path))


@dataclass(frozen=True)
class SimulatedApi(Generic[H]):
    """An API the simulated provider speaks: its routes and what the server answers them with."""

    name: str  # as the simulated provider names it: its module of `apis/`
    spec: str  # the product's API shape it doubles (`providers.spec.ApiSpec.name`)
    handlers: Callable[[Store, Faults, int, Callable[..., float]], H]  # its `Handlers` class
    routes: tuple[Route[H], ...]
    # Where its paths start: a path no route matches is answered in the error shape of the API
    # with the longest of these it starts with.
    prefixes: tuple[str, ...]
    # Its base URL under the server's root, as its provider's variable takes it (`native_url`);
    # None: its clients are pointed at another API's (OpenAI's `base_url`).
    base_path: str | None = None
    error_body: Callable[[ApiError], dict[str, Any]] = ApiError.body  # OpenAI's shape, unless it says
    overloaded: int = 529  # the status of its "overloaded" answer (the `http_529` fault)
    # The header its SDK sends the API key in, and what the value starts with.
    key: tuple[str, str] = ("Authorization", "Bearer ")
    # Its routes are also served under each OpenAI-compatible platform's path (`profiles`), given
    # the platform's profile (`Request.platform`).
    platforms: bool = False
    # The API whose routes create, list, read and cancel its batches, where they are another's (the
    # jobs of Claude on Vertex AI are Vertex's batch prediction jobs); "": its own routes.
    batches_at: str = ""


def parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, str], tuple[str, memoryview] | None]:
    """The text fields and the (filename, bytes) of the `file` field of a form upload.

    Each part's headers go through the stdlib email parser (the `cgi` module is gone in Python
    3.13); its body is a view into the request, not a copy. Handing a whole 200 MB upload to the
    email parser took seconds per file and several times the file's size in memory.
    """
    if not content_type.lower().startswith("multipart/form-data") or "boundary=" not in content_type:
        raise bad_request("Uploads must be multipart/form-data.", "file", "invalid_content_type")
    header = BytesParser(policy=policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode("latin-1"), headersonly=True
    )
    boundary = header.get_boundary()
    if not boundary:
        raise bad_request("Uploads must be multipart/form-data.", "file", "invalid_content_type")
    delimiter = b"--" + boundary.encode("latin-1")
    unreadable = bad_request("Could not parse the multipart form.", "file", "invalid_content_type")
    fields: dict[str, str] = {}
    file_part: tuple[str, memoryview] | None = None
    view = memoryview(body)
    pos = body.find(delimiter)
    if pos < 0:
        raise unreadable
    while True:
        start = pos + len(delimiter)
        if body.startswith(b"--", start):  # the close delimiter
            break
        head_end = body.find(b"\r\n\r\n", start)
        if head_end < 0:
            raise unreadable
        end = body.find(b"\r\n" + delimiter, head_end + 4)
        if end < 0:
            raise unreadable
        part = BytesParser(policy=policy.HTTP).parsebytes(
            body[start:head_end].lstrip(b"\r\n") + b"\r\n\r\n", headersonly=True
        )
        name = part.get_param("name", header="content-disposition")
        data = view[head_end + 4 : end]
        filename = part.get_filename()
        if name == "file":
            if filename is None:
                raise bad_request("The 'file' field must carry a filename.", "file")
            file_part = (filename, data)
        elif isinstance(name, str):
            fields[name] = bytes(data).decode("utf-8", errors="replace")
        pos = end + 2
    return fields, file_part
