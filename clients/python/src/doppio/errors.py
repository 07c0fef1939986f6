"""Exceptions raised by the Doppio client.

Every answer of status 400 or above is raised as a :class:`DoppioError`
subclass chosen from its RFC 9457 problem type (``type``), falling back on
its HTTP status, so callers catch the failure they can handle::

    try:
        client.put("mail", "Message", ["m1", 7], doc, if_match=etag)
    except doppio.PreconditionFailed:
        ...  # someone changed it first: read it again
"""

from __future__ import annotations

from typing import Any, Mapping

PROBLEM_BASE = "https://doppio.dev/problems/"


class DoppioError(Exception):
    """A failure the server answered, from its problem+json document."""

    def __init__(
        self,
        status: int,
        title: str = "",
        detail: str = "",
        *,
        type: str = "",
        field: str | None = None,
        operation: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        """The HTTP status."""
        self.type = type
        """The problem type URI, e.g. ``https://doppio.dev/problems/not-found``."""
        self.title = title
        """The fixed summary of the problem type."""
        self.detail = detail
        """What precisely went wrong."""
        self.field = field
        """The offending field, key part or parameter, if any."""
        self.operation = operation
        """The index of a transaction's failing operation, if any."""
        self.retry_after = retry_after
        """Seconds to wait before sending again (429 and 503 answers)."""
        text = f"doppio: {status} {title or 'error'}"
        super().__init__(f"{text}: {detail}" if detail else text)


class BadRequest(DoppioError):
    """400: the request is malformed or inconsistent."""


class Unauthenticated(DoppioError):
    """401: no credentials, or credentials that prove nobody."""


class Forbidden(DoppioError):
    """403: the caller lacks the privilege the call needs."""


class NotFound(DoppioError):
    """404: the database, table or document does not exist."""


class Conflict(DoppioError):
    """409: an incompatible schema, a duplicate or a state conflict."""


class CheckpointExpired(DoppioError):
    """410: a change-stream checkpoint is no longer retained; bootstrap."""


class PreconditionFailed(DoppioError):
    """412: a write condition (If-Match, If-None-Match, a transaction
    operation's condition) was false; nothing was applied."""


class TooLarge(DoppioError):
    """413: a body, document, batch or transaction is too large."""


class Unprocessable(DoppioError):
    """422: the document does not match its table's schema, or an
    ``Idempotency-Key`` was reused for another request."""


class TooManyRequests(DoppioError):
    """429: too many requests; :attr:`retry_after` says when to try again."""


class OverQuota(TooManyRequests):
    """429: a database's or user's capacity units are spent; nothing was
    done. The client retries it after ``Retry-After`` while its retry time
    allows."""


class Unavailable(DoppioError):
    """503: not ready or no leader; nothing was applied, so any request may
    be sent again (the client does so while its retry time allows)."""


class OutcomeUnknown(DoppioError):
    """504: a write reached the replication log but its outcome was not
    learnt in time. It may or may not be applied: read to find out before
    sending it again. Retried by the client only for a write sent under an
    ``Idempotency-Key`` (inserts, transactions, batches)."""


class NotModified(Exception):
    """A read's ``if_none_match`` held: the caller's copy is current."""

    def __init__(self, etag: str) -> None:
        self.etag = etag
        super().__init__(f"doppio: not modified (ETag {etag})")


_BY_TYPE: dict[str, type[DoppioError]] = {
    "malformed": BadRequest,
    "unauthenticated": Unauthenticated,
    "forbidden": Forbidden,
    "not-found": NotFound,
    "conflict": Conflict,
    "checkpoint-expired": CheckpointExpired,
    "precondition-failed": PreconditionFailed,
    "too-large": TooLarge,
    "schema-mismatch": Unprocessable,
    "too-many-requests": TooManyRequests,
    "over-quota": OverQuota,
    "unavailable": Unavailable,
    "outcome-unknown": OutcomeUnknown,
}

_BY_STATUS: dict[int, type[DoppioError]] = {
    400: BadRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: CheckpointExpired,
    412: PreconditionFailed,
    413: TooLarge,
    422: Unprocessable,
    429: TooManyRequests,
    503: Unavailable,
    504: OutcomeUnknown,
}


def error_from_problem(
    status: int, problem: Mapping[str, Any] | None, retry_after: float | None = None
) -> DoppioError:
    """Return the exception for an answer of ``status`` carrying ``problem``
    (its decoded problem+json body, or None when it had none)."""
    p = problem or {}
    ptype = str(p.get("type") or "")
    cls = _BY_TYPE.get(ptype.removeprefix(PROBLEM_BASE)) if ptype.startswith(PROBLEM_BASE) else None
    if cls is None or _cls_status(cls) not in (None, status):
        cls = _BY_STATUS.get(status, DoppioError)
    ra = p.get("retryAfter")
    if isinstance(ra, (int, float)) and ra > 0:
        retry_after = float(ra)
    op = p.get("operation")
    return cls(
        status,
        str(p.get("title") or ""),
        str(p.get("detail") or ""),
        type=ptype,
        field=p.get("field") or None,
        operation=op if isinstance(op, int) else None,
        retry_after=retry_after,
    )


def _cls_status(cls: type[DoppioError]) -> int | None:
    """The HTTP status an exception class stands for (None: any)."""
    for status, c in _BY_STATUS.items():
        if issubclass(cls, c):
            return status
    return None
