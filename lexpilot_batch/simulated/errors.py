"""The OpenAI-shaped error a route answers with: `{"error": {message, type, param, code}}`."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Raised anywhere below the HTTP layer; the server turns it into the JSON error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def not_found(message: str, param: str | None = "id") -> ApiError:
    return ApiError(404, message, param=param)


# The error type of each HTTP status in Anthropic's API, and the gRPC status name in Google's.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def error_body(error: ApiError, api: str) -> dict[str, Any]:
    """The error body of `api`'s shape: OpenAI's `{"error": {message, type, param, code}}`, Anthropic's
    `{"type": "error", "error": {type, message}}`, Google's `{"error": {code, message, status}}`,
    Mistral's flat `{"object": "error", message, type, param, code}`."""
    if api == "anthropic":
        kind = _ANTHROPIC_TYPES.get(error.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": error.message}, "request_id": None}
    if api == "gemini":
        status = _GOOGLE_STATUS.get(error.status, "INTERNAL")
        return {"error": {"code": error.status, "message": error.message, "status": status}}
    if api == "mistral":  # Mistral's is flat: {"object": "error", "message", "type", "param", "code"}
        return {
            "object": "error",
            "message": error.message,
            "type": error.type,
            "param": error.param,
            "code": error.code,
        }
    return error.body()
