"""doppio: the Python client of Doppio, a distributed document store.

Documents, collections and queries, transactions and batches, schemas,
the cluster view and the change stream, over Doppio's REST API (httpx)::

    import doppio

    with doppio.Client("http://127.0.0.1:8080") as c:
        c.put("mail", "Message", ["m1", 7], {"subject": "hi"})
        doc = c.get("mail", "Message", ["m1", 7])
        for d in c.iter("mail", "Message", ["m1"], page_size=100):
            print(d.key, d.body)

Failures are exceptions mirroring the server's problem types
(:class:`NotFound`, :class:`Conflict`, :class:`PreconditionFailed`,
:class:`Unprocessable`, :class:`OverQuota`, :class:`Unavailable`,
:class:`OutcomeUnknown`, all :class:`DoppioError`).
"""

from .changes import ChangeEvent, ChangeStream, Transaction
from .client import DEFAULT_RETRY, Client, delete_op, insert_op, patch_op, put_op
from .errors import (
    BadRequest,
    CheckpointExpired,
    Conflict,
    DoppioError,
    Forbidden,
    NotFound,
    NotModified,
    OutcomeUnknown,
    OverQuota,
    PreconditionFailed,
    TooLarge,
    TooManyRequests,
    Unauthenticated,
    Unavailable,
    Unprocessable,
    error_from_problem,
)
from .keys import Key, KeyPart, partition_of
from .models import BatchResult, Document, IndexStatus, OpResult, Page, Session, TxnResult, WriteResult

__all__ = [
    "BadRequest", "BatchResult", "ChangeEvent", "ChangeStream", "CheckpointExpired", "Client",
    "Conflict", "DEFAULT_RETRY", "Document", "DoppioError", "Forbidden", "IndexStatus", "Key",
    "KeyPart", "NotFound", "NotModified", "OpResult", "OutcomeUnknown", "OverQuota", "Page",
    "PreconditionFailed", "Session", "TooLarge", "TooManyRequests", "Transaction", "TxnResult",
    "Unauthenticated", "Unavailable", "Unprocessable", "WriteResult", "delete_op", "error_from_problem",
    "insert_op", "partition_of", "patch_op", "put_op",
]
