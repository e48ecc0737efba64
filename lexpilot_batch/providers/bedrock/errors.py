"""boto3's exceptions read as `providers.errors.Failure`s (the policy is there).

A refused call is a `botocore.exceptions.ClientError` carrying the HTTP status and AWS's error
`Code` and `Message` (Bedrock's `ValidationException` 400, `AccessDeniedException` 403,
`ResourceNotFoundException` 404, `ThrottlingException` 429, `ServiceQuotaExceededException` 400,
`InternalServerException` 500: botocore's service model `bedrock/2023-04-20`; S3's `NoSuchKey`
404). No answer (a connection refused or dropped, a read timed out, a body cut short) is a failure
without a status: lost on the way. Credentials boto3's chain cannot find are a permission problem,
said so.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.errors import Failure

CREDENTIALS = (
    "boto3 found no AWS credentials (its default chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
    "AWS_PROFILE and ~/.aws/config, SSO, an instance or container role); set them up as "
    "docs/providers.md says under AWS Bedrock"
)


def failure_of(exc: BaseException) -> Failure | None:
    """What a `boto3`/`botocore` exception says; None for any other exception."""
    try:
        from botocore import exceptions as aws
    except ImportError:  # pragma: no cover - the extra is installed wherever a client was built
        return None
    if isinstance(exc, aws.ClientError):
        response: Any = exc.response or {}
        error = response.get("Error") or {}
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        code = str(error.get("Code") or "") or None
        message = str(error.get("Message") or code or exc)
        return Failure(int(status) if status else 500, f"{code}: {message}" if code else message, code=code)
    if isinstance(exc, (aws.NoCredentialsError, aws.PartialCredentialsError)):
        return Failure(403, CREDENTIALS)
    if isinstance(exc, (aws.ReadTimeoutError, aws.ConnectTimeoutError)):
        return Failure(None, "no answer within the timeout", timed_out=True)
    if isinstance(exc, (aws.HTTPClientError, aws.ConnectionError, aws.IncompleteReadError, aws.ResponseStreamingError)):
        return Failure(None, f"could not connect, or the answer broke off: {exc}")
    return None
