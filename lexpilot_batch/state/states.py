"""Every state word the workspace stores, each spelled here once: what a thread, a request and a
request file can be, and the kinds a failed request can fail as.

Each is a `Literal` type, for mypy to check a column's value where it is read or written, and a
namespace of its words (`ThreadState.DONE`): SQL names them through parameters
(`WHERE status = ?`), never spelled inside the statement. A test walks the package and fails on a
state word written as a string anywhere else. The file states' moves are `waves`'; what a result
line's failure means, `engine.answers`.
"""

from __future__ import annotations

from typing import Final, Literal

ThreadStatus = Literal["active", "done", "failed", "cancelled"]
RequestStatus = Literal["pending", "answered", "failed", "discarded"]
FileStatus = Literal["compiled", "uploaded", "creating", "submitted", "downloaded", "ingested", "lost"]
ErrorKind = Literal["transport", "invalid", "refusal", "permanent", "unexecuted"]


class ThreadState:
    """`threads.status`: a (run, task, case[, variant]) thread's state machine is running, has
    finished with its record, has failed with a reason (`lexpilot-batch retry` makes it due again),
    or was stopped by `lexpilot-batch cancel` (`retry --cancelled` makes it due again; its answers
    are kept)."""

    ACTIVE: Final = "active"
    DONE: Final = "done"
    FAILED: Final = "failed"
    CANCELLED: Final = "cancelled"


class RequestState:
    """`requests.status`: a request waits for its answer, has one, failed (see its error kind), or
    was answered but not needed (`--speculate`: the User Model's reply to what turned out a judgment)."""

    PENDING: Final = "pending"
    ANSWERED: Final = "answered"
    FAILED: Final = "failed"
    DISCARDED: Final = "discarded"


class FileState:
    """`files.status`: a request file's way through a provider (`waves` draws it)."""

    COMPILED: Final = "compiled"  # written and recorded; nothing has left the workspace
    UPLOADED: Final = "uploaded"  # the provider holds the file; no batch yet
    CREATING: Final = "creating"  # a batch is being created: one may exist that the database does not know
    SUBMITTED: Final = "submitted"  # its batch is running (or, manual: the user runs it; sync: it runs when polled)
    DOWNLOADED: Final = "downloaded"  # the results are saved under responses/, not yet applied
    INGESTED: Final = "ingested"  # the results are applied: the file is done
    LOST: Final = "lost"  # the provider lost its batch: its requests failed as never run; the file is done


# `requests.error_kind`: the kind of a failed request decides which attempt budget its retry uses
# (`engine.due`); what makes a failure of each kind is `engine.answers`'.
TRANSPORT: Final = "transport"  # the provider or the network failed; the same request may pass
INVALID: Final = "invalid"  # the answer is there but unusable (truncated, filtered, empty, malformed)
REFUSAL: Final = "refusal"  # the model declined to answer
PERMANENT: Final = "permanent"  # the provider refused the request itself: sending it again cannot pass
UNEXECUTED: Final = "unexecuted"  # nobody ran it (expired, cancelled, lost, 429): not the request's fault
