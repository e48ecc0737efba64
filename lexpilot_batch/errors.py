"""The one error family whose messages reach the user.

Every message names the file, case, field or line at fault and says what to do. The CLI prints
these without a traceback and exits non-zero; anything else escaping is a bug. A message is
redacted when the error is made (`redaction`): provider text quoted in it, and an endpoint's URL,
never carry a key, wherever the message goes next (printed, or stored as a failure's reason).
"""

from __future__ import annotations

from lexpilot_batch.util.redaction import redact


class LexpilotError(Exception):
    """A problem the user can fix; the message says how."""

    exit_code = 1

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class DataError(LexpilotError):
    """The dataset, the categories file or a prompts file is invalid."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []

    def __str__(self) -> str:
        if not self.problems:
            return self.args[0]
        return "\n".join([self.args[0], *(f"  - {p}" for p in self.problems)])


class ConfigError(LexpilotError):
    """Options, environment or provider configuration are wrong or missing."""


class ManifestMismatch(LexpilotError):
    """A run id is reused with different settings."""


class WorkspaceBusy(LexpilotError):
    """Another lexpilot-batch process holds the workspace."""


class ReadOnlyWorkspace(LexpilotError):
    """A command that writes was given a workspace it cannot write to (an archive, a read-only mount)."""


class NoSpace(LexpilotError):
    """The device holding the workspace (or an output) is full; the state on disk is intact."""


class ProviderError(LexpilotError):
    """A provider refused a request, or could not be reached even after the SDK's own retries."""


class ProviderUnavailable(ProviderError):
    """The provider could not be reached, timed out or answered 5xx/429 even after retries: nothing
    was changed by the failed call, and the same call later is likely to work. `poll-and-advance
    --wait` rides these out (`engine.poll_and_advance`); other commands stop, saying nothing was lost."""


# HTTP statuses that say "not now" rather than "not this request": a timeout, a conflict, the rate,
# a failure of the server. The same call later may pass.
_TRANSIENT_4XX = frozenset({408, 409, 429})


def transient_status(code: int | None) -> bool:
    """Whether an HTTP status is worth the same call again later."""
    return code is not None and (code in _TRANSIENT_4XX or code >= 500)
