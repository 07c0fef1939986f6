"""The values the client returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from .errors import DoppioError
from .keys import KeyPart


@dataclass
class Document:
    """One document, as a read answered it."""

    key: list[KeyPart]
    """The document's full key."""
    body: Any
    """The document, decoded from JSON (projected when ``fields`` was given)."""
    etag: str = ""
    """The quoted checksum of the stored document, for ``if_match``."""
    last_modified: Optional[datetime] = None
    """When it was last written (point reads only)."""
    schema_version: int = 0
    """The document-schema version it was written with (point reads only)."""
    scn: str = ""
    """The SCN of its last write (point reads only)."""


@dataclass
class Page:
    """One page of a collection, multi-get or query."""

    documents: list[Document]
    """The page's documents, in key order (or the query's sort order)."""
    next: str = ""
    """The cursor of the next page; empty on the last."""


@dataclass
class WriteResult:
    """What a put, patch or insert answered."""

    key: list[KeyPart]
    """The written document's key (with its auto-increment part)."""
    etag: str = ""
    """The new ETag."""
    scn: str = ""
    """The SCN the write committed at."""
    version: int = 0
    """The document-schema version the document was stored with."""
    created: bool = False
    """True when the document did not exist before."""


@dataclass
class OpResult:
    """The outcome of one operation of a transaction or batch."""

    key: list[KeyPart] = field(default_factory=list)
    """The operation's key (with its auto-increment part)."""
    etag: str = ""
    """The document's new ETag (put, patch, insert)."""
    created: bool = False
    """True when a put or insert created the document."""
    deleted: int = 0
    """How many documents a delete removed."""


@dataclass
class TxnResult:
    """What a transaction answered: all its operations applied at one SCN."""

    scn: str
    """The SCN every operation committed at."""
    results: list[OpResult]
    """One result per operation, in order."""


@dataclass
class BatchResult:
    """The outcome of one operation of a batch (each applied on its own)."""

    status: int
    """The HTTP status the operation would have had alone."""
    scn: str = ""
    """The SCN it committed at, when it succeeded."""
    result: Optional[OpResult] = None
    """Its result, when it succeeded."""
    error: Optional[DoppioError] = None
    """Its failure, when it failed."""


@dataclass
class IndexStatus:
    """The build state of one index of a table."""

    field: str
    """The indexed field."""
    kind: str
    """``attribute`` or ``text``."""
    state: str
    """``ready`` or ``building``."""
    progress: float = 0.0
    """The fraction built, 0 to 1."""
    done: int = 0
    """Documents indexed so far."""
    total: int = 0
    """Documents to index."""


@dataclass
class Session:
    """A session token from :meth:`doppio.Client.login`."""

    token: str
    """The Bearer token."""
    expires: str
    """When it expires (RFC 3339)."""
