"""The one error family whose messages reach the user.

Every message names the file, case, field or line at fault and says what to do. The CLI prints
these without a traceback and exits non-zero; anything else escaping is a bug. A message is
redacted when the error is made (`redaction`): provider text quoted in it, and an endpoint's URL,
never carry a key, wherever the message goes next (printed, or stored as a failure's reason).
"""

from __future__ import annotations

from lexpilot_batch.redaction import redact


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


class ProviderError(LexpilotError):
    """A provider refused a request in a way retrying will not fix."""
