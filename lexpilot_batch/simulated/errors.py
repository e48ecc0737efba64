"""The error a route raises (`ApiError`): its HTTP status and OpenAI's fields, `{"error": {message,
type, param, code}}`. The server answers it in the error shape its route's API declares
(`routes.SimulatedApi.error_body`), or its platform's (`profiles.Profile.error_body`)."""

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
