"""OpenAI's Files + Batches routes of the simulated provider (`/v1/files`, `/v1/batches`) and its
chat completions, apart from HTTP: arguments in, JSON-able objects out.

Failures raise `ApiError` with the status, type, param and code the real API would use (404 for
unknown ids, 400 for bad requests); the server turns them into responses. A route called under an
OpenAI-compatible platform's path is given its `profiles.Profile` (`profile=`), and runs with that
platform's purposes, endpoints, windows and limits; without one, it is OpenAI's. The batches are
run by `batches`; the chat completion is answered as a batch line is (`chat`).
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.openai.spec import NAME as OPENAI
from lexpilot_batch.simulated import batches, chat, completions
from lexpilot_batch.simulated.errors import ApiError, bad_request, not_found
from lexpilot_batch.simulated.profiles import Profile, window_seconds
from lexpilot_batch.simulated.routes import Handlers, Request, Route, SimulatedApi, parse_multipart
from lexpilot_batch.simulated.sources import names, requests, typed

MAX_FILE_BYTES = 200 * 1024 * 1024
UPLOAD_PURPOSES = ("batch",)  # the only purpose this provider simulates


class OpenAIApi(Handlers):
    """OpenAI's routes over one simulated provider's state."""

    # --- files -------------------------------------------------------------------------------

    def upload_file(self, content_type: str, body: bytes, profile: Profile | None = None) -> dict[str, Any]:
        fields, file_part = parse_multipart(content_type, body)
        purpose = fields.get("purpose")
        if not purpose:
            raise _missing("purpose")
        purposes = profile.purposes if profile else UPLOAD_PURPOSES
        if purpose not in purposes:
            where = f"{profile.name} accepts" if profile else "the simulated provider accepts"
            raise bad_request(
                f"'{purpose}' is not a supported purpose here; {where} only {' and '.join(map(repr, purposes))}.",
                "purpose",
            )
        if file_part is None:
            raise _missing("file")
        filename, data = file_part
        if not filename.endswith(".jsonl"):
            raise bad_request(
                f"Invalid file format for Batch API ('{filename}'). Must be .jsonl",
                "file",
                "invalid_file_format",
            )
        max_bytes = profile.max_bytes if profile else MAX_FILE_BYTES
        if len(data) > max_bytes:
            raise bad_request(f"File is larger than {max_bytes} bytes.", "file", "file_too_large")
        expiry = _expiry(
            {"anchor": fields["expires_after[anchor]"], "seconds": fields.get("expires_after[seconds]")}
            if "expires_after[anchor]" in fields
            else None,
            "expires_after",
        )
        cap = self.faults.file_cap
        if cap and expiry is None and self.store.count_unexpiring() >= cap:
            raise bad_request(
                f"Quota exceeded: this resource holds {cap} batch files without an expiration (input and output "
                "files); delete files or upload with expires_after.",
                "file",
                "quota_exceeded",
            )
        # Mistral's file object (the same route, https://docs.mistral.ai/api, "Upload File") also says
        # what kind of sample it holds and where it came from; OpenAI's SDK ignores the two fields.
        stored = self.store.add_file(data, filename, purpose, expires=expiry)
        return {**stored, "sample_type": "batch_request", "source": "upload"}

    def _file(self, file_id: str) -> dict[str, Any]:
        obj = self.store.get_file(file_id)
        if obj is None:
            raise not_found(f"No such File object: {file_id}")
        return obj

    def retrieve_file(self, file_id: str) -> dict[str, Any]:
        return self._file(file_id)

    def file_content(self, file_id: str) -> bytes:
        self._file(file_id)
        return self.store.file_bytes(file_id)

    def delete_file(self, file_id: str) -> dict[str, Any]:
        if not self.store.delete_file(file_id):
            raise not_found(f"No such File object: {file_id}")
        return {"id": file_id, "object": "file", "deleted": True}

    def list_files(self, query: dict[str, str], profile: Profile | None = None) -> dict[str, Any]:
        """The batch files held, newest first (one file space for OpenAI's path and every
        platform's: a platform lists the purposes it takes, and the outputs)."""
        purposes = {*(profile.purposes if profile else ("batch",)), "batch_output"}
        files = [f for f in self.store.list_files() if f["purpose"] in purposes]
        files = sorted(files, key=lambda f: (f["created_at"], f["id"]), reverse=True)
        if query.get("order") == "asc":
            files.reverse()
        if query.get("purpose"):
            files = [f for f in files if f["purpose"] == query["purpose"]]
        return _page(files, query, default_limit=10_000, max_limit=10_000)

    # --- batches -----------------------------------------------------------------------------

    def create_batch(self, body: Any, profile: Profile | None = None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("The request body must be a JSON object.")
        _check_create(body, profile)
        required = ["input_file_id", "endpoint"]
        if profile is None or profile.window_required:
            required.append("completion_window")
        for name in required:
            if not body.get(name):
                raise _missing(name)
        endpoints = profile.endpoints if profile else batches.ENDPOINTS
        if body["endpoint"] not in endpoints:
            where = profile.name if profile else "OpenAI's routes of the simulated provider"
            raise bad_request(
                f"Unsupported endpoint '{body['endpoint']}': {where} run {' and '.join(sorted(endpoints))} only.",
                "endpoint",
            )
        expiry = _expiry(body.get("output_expires_after"), "output_expires_after")
        window = body.get("completion_window") or batches.COMPLETION_WINDOW
        if profile is not None:
            seconds = window_seconds(profile, window)
        elif window != batches.COMPLETION_WINDOW:
            raise bad_request("completion_window must be '24h'.", "completion_window")
        else:
            seconds = batches.WINDOW_SECONDS
        metadata = batches.check_metadata(body.get("metadata"))
        source = self.store.get_file(body["input_file_id"])
        if source is None:
            raise not_found(f"No such File object: {body['input_file_id']}", "input_file_id")
        if source["purpose"] != "batch":
            raise bad_request(
                f"File {source['id']} has purpose '{source['purpose']}'; a batch input needs purpose 'batch'.",
                "input_file_id",
            )
        record = batches.create(
            self.store,
            input_file_id=source["id"],
            endpoint=body["endpoint"],
            metadata=metadata,
            seed=self.seed,
            faults=self.faults,
            output_expiry=expiry,
            check=lambda request: completions.check_openai(request, profile),
            **(_profiled(profile, window, seconds) if profile else {}),
        )
        return _shown(dict(record["batch"]), profile)

    def _batch(self, batch_id: str, profile: Profile | None = None) -> dict[str, Any]:
        record = self.store.get_batch(batch_id)
        if record is None or "native" in record["sim"] or not _same_account(record, profile):
            raise not_found(f"No batch found with id '{batch_id}'.")
        return record

    def retrieve_batch(self, batch_id: str, profile: Profile | None = None) -> dict[str, Any]:
        return _shown(batches.current(self.store, self._batch(batch_id, profile)), profile)

    def cancel_batch(self, batch_id: str, profile: Profile | None = None) -> dict[str, Any]:
        return _shown(batches.cancel(self.store, self._batch(batch_id, profile)), profile)

    def list_batches(self, query: dict[str, str], profile: Profile | None = None) -> dict[str, Any]:
        records = [
            r for r in self.store.batches_newest_first() if "native" not in r["sim"] and _same_account(r, profile)
        ]
        objects = [_shown(batches.current(self.store, r), profile) for r in records]
        return _page(objects, query, default_limit=20, max_limit=100)

    def list_models(self, profile: Profile | None = None) -> dict[str, Any]:
        """`GET /v1/models`: the names the route serves by name (`completions.model_problem`): a
        platform's published list, or OpenAI's and Mistral's (both APIs are served on this root),
        and the simulator's own; an OpenAI-compatible server's other names are answered unlisted."""
        if profile is not None:
            listed = profile.models() if profile.models is not None else frozenset()
        else:
            listed = names.openai() | names.mistral()
        own = {m for m in names.SIMULATED if completions.model_problem(m, profile) is None}
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "simulated"} for m in sorted(listed | own)]
        return {"object": "list", "data": data}

    # --- synchronous chat --------------------------------------------------------------------

    def chat_completion(
        self, body: Any, client_request_id: str | None = None, profile: Profile | None = None
    ) -> dict[str, Any]:
        """One chat completion, answered as a batch line with the custom_id `client_request_id` is (`chat`)."""
        if profile is not None and not profile.stream and isinstance(body, dict) and body.get("stream"):
            raise bad_request(f"stream must be false on {profile.name}'s batch chat route.", "stream")
        completions.check_openai(body, profile)
        return chat.answer(body, client_request_id, self.seed, self.faults, self.roll, self.store.prefixes)


def _check_create(body: dict[str, Any], profile: Profile | None) -> None:
    """Refuse a batch create whose fields its API's request type does not take (`sources.requests`:
    OpenAI's `BatchCreateParams`, a platform's own SDK's), in OpenAI's words. The endpoint, and a
    platform's completion window, are checked apart against what the route runs
    (`Profile.endpoints`, Azure's own spelling; `Profile.windows`)."""
    create_type = (
        profile.create_type() if profile is not None and profile.create_type else requests.openai_batch_create()
    )
    if create_type is None:
        return
    nulls = profile is not None and profile.create_nulls
    apart = ("endpoint", "completion_window") if profile is not None else ("endpoint",)
    rest = {k: v for k, v in body.items() if k not in apart}
    for field, what in typed.problems(rest, create_type, nulls=nulls):
        if what == "is required":
            continue  # said below, with the route's own list of what it requires
        if what == "is not a field of this request":
            raise bad_request(f"Unrecognized request argument supplied: {field}", field, "unknown_parameter")
        raise bad_request(f"Invalid value for '{field}': {what}.", field, "invalid_value")


def _profiled(profile: Profile, window: str, seconds: int) -> dict[str, Any]:
    """What `batches.create` is told of a platform's batch."""
    return {
        "max_requests": profile.max_requests,
        "completion_window": window,
        "window_seconds": seconds,
        "profile": profile.name,
    }


def _same_account(record: dict[str, Any], profile: Profile | None) -> bool:
    """Whether a batch was created on the platform a request arrives on (OpenAI's for None)."""
    return record["sim"].get("profile") == (profile.name if profile else None)


def _shown(batch: dict[str, Any], profile: Profile | None) -> dict[str, Any]:
    """A Batch object as the platform words it: SiliconFlow's `in_queue` (and null counts) for a
    batch not yet started; every other status is OpenAI's word on every platform."""
    if profile is not None and batch["status"] == "validating":
        batch["status"] = profile.new_status
        if not profile.counts_while_new:
            batch["request_counts"] = None
    return batch


def _expiry(value: Any, param: str) -> int | None:
    """The seconds of an `expires_after` / `output_expires_after` ({"anchor": "created_at",
    "seconds": N}: the openai SDK's `ExpiresAfter`, N from 3600 to 2,592,000); None if not given."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("anchor") != "created_at":
        raise bad_request(f"{param}.anchor must be 'created_at'.", f"{param}.anchor")
    try:
        seconds = int(str(value.get("seconds")))  # a form upload sends it as text
    except ValueError:
        raise bad_request(f"{param}.seconds must be an integer.", f"{param}.seconds") from None
    if not 3600 <= seconds <= 2_592_000:
        raise bad_request(f"{param}.seconds must be between 3600 and 2592000, not {seconds}.", f"{param}.seconds")
    return seconds


def _missing(name: str) -> ApiError:
    return bad_request(f"Missing required parameter: '{name}'.", name, "missing_required_parameter")


def _page(objects: list[dict[str, Any]], query: dict[str, str], default_limit: int, max_limit: int) -> dict[str, Any]:
    """A cursor page: the objects after the `after` id, at most `limit` of them."""
    raw = query.get("limit")
    try:
        limit = default_limit if raw is None else int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= max_limit:
        raise bad_request(f"limit must be an integer between 1 and {max_limit}.", "limit")
    after = query.get("after")
    if after:
        ids = [o["id"] for o in objects]
        if after not in ids:
            raise bad_request(f"No object found with id '{after}' for the 'after' cursor.", "after")
        objects = objects[ids.index(after) + 1 :]
    data = objects[:limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(objects) > limit,
    }


def _chat(api: OpenAIApi, request: Request) -> dict[str, Any]:
    # The client's id of the call draws what a batch draws by custom_id (`chat`).
    return api.chat_completion(request.json(), request.call_id, **request.platform)


API = SimulatedApi[OpenAIApi](
    "openai",
    OPENAI,
    OpenAIApi,
    (
        Route("POST", r"/v1/files", "upload_file", lambda a, r: a.upload_file(r.content_type, r.body, **r.platform)),
        Route("GET", r"/v1/files", "list_files", lambda a, r: a.list_files(r.query, **r.platform)),
        Route("GET", r"/v1/files/([^/]+)/content", "file_content", lambda a, r: a.file_content(*r.args)),
        Route("GET", r"/v1/files/([^/]+)", "retrieve_file", lambda a, r: a.retrieve_file(*r.args)),
        Route("DELETE", r"/v1/files/([^/]+)", "delete_file", lambda a, r: a.delete_file(*r.args)),
        Route(
            "POST", r"/v1/batches", "create_batch", lambda a, r: a.create_batch(r.json(), **r.platform), creates=True
        ),
        Route("GET", r"/v1/batches", "list_batches", lambda a, r: a.list_batches(r.query, **r.platform)),
        Route("GET", r"/v1/batches/([^/]+)", "retrieve_batch", lambda a, r: a.retrieve_batch(r.args[0], **r.platform)),
        Route(
            "POST", r"/v1/batches/([^/]+)/cancel", "cancel_batch", lambda a, r: a.cancel_batch(r.args[0], **r.platform)
        ),
        Route("POST", r"/v1/chat/completions", "chat_completion", _chat, chat=True, on_flex=chat.on_flex),
        Route("GET", r"/v1/models", "list_models", lambda a, r: a.list_models(**r.platform)),
        # Volcengine Ark's batch chat route (`ark/` names' base URL ends in /batch): a chat completion.
        Route("POST", r"/v1/batch/chat/completions", "chat_completion", _chat, chat=True, on_flex=chat.on_flex),
    ),
    prefixes=("/",),  # every path no other API's prefix starts
    base_path="/v1",
    platforms=True,  # each OpenAI-compatible platform's path serves these routes, with its profile
)
