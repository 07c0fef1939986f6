"""The change stream: a database's committed writes as events, in commit
order per partition, resumable from a checkpoint."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import httpx

from .errors import error_from_problem


@dataclass
class ChangeEvent:
    """One write of a committed transaction."""

    scn: str
    """``generation:sequence`` of the transaction."""
    partition: int
    """The partition it committed in."""
    table: str
    """The written table."""
    key: list[Any]
    """The written document's key."""
    op: str
    """``insert``, ``update`` or ``delete``."""
    before: Any = None
    """The document before the write (None for an insert)."""
    after: Any = None
    """The document after the write (None for a delete)."""
    txn_end: bool = False
    """True on the last event of its transaction."""
    snapshot: bool = False
    """True for an event of a bootstrap snapshot."""
    ts: int = 0
    """Commit time, Unix milliseconds."""
    checkpoint: str = ""
    """The stream's checkpoint right after this event."""


@dataclass
class Transaction:
    """The events of one transaction of one partition, whole."""

    scn: str
    """The transaction's SCN."""
    partition: int
    """Its partition."""
    events: list[ChangeEvent] = field(default_factory=list)
    """Its writes, in order."""
    checkpoint: str = ""
    """The checkpoint right after it: resuming there starts after it."""


class ChangeStream:
    """An open change stream (from :meth:`doppio.Client.changes`).

    Iterating yields :class:`ChangeEvent`; :meth:`transactions` yields
    whole :class:`Transaction` instead. :attr:`checkpoint` is always the
    position after the last event read: store it, and pass it to
    ``Client.changes(checkpoint=...)`` to resume exactly there. Close the
    stream (or use it as a context manager) when done.
    """

    def __init__(self, response: httpx.Response, checkpoint: str) -> None:
        self._resp = response
        self._lines = response.iter_lines()
        self.checkpoint = checkpoint
        """The position after the last event read."""
        self.sources: str = response.headers.get("X-Doppio-Change-Sources", "")
        """Which replicas the stream reads, as the server said."""

    def __iter__(self) -> Iterator[ChangeEvent]:
        return self

    def __next__(self) -> ChangeEvent:
        for raw in self._lines:
            if not raw.strip():
                continue
            line = json.loads(raw)
            if line.get("error"):
                p = line["error"]
                raise error_from_problem(int(p.get("status") or 500), p)
            if line.get("checkpoint"):
                self.checkpoint = line["checkpoint"]
            if not line.get("scn"):
                continue  # a position only: the checkpoint moved
            return ChangeEvent(
                scn=line["scn"], partition=line.get("partition", 0), table=line.get("table", ""),
                key=line.get("key") or [], op=line.get("op", ""), before=line.get("before"),
                after=line.get("after"), txn_end=bool(line.get("txnEnd")),
                snapshot=bool(line.get("snapshot")), ts=line.get("ts", 0),
                checkpoint=line.get("checkpoint", "") or "",
            )
        raise StopIteration

    def transactions(self) -> Iterator[Transaction]:
        """Yield whole transactions: every event of one, per partition,
        gathered until its last (``txn_end``)."""
        open_: dict[int, Transaction] = {}
        for ev in self:
            t = open_.setdefault(ev.partition, Transaction(scn=ev.scn, partition=ev.partition))
            t.events.append(ev)
            if ev.txn_end:
                del open_[ev.partition]
                t.checkpoint = self.checkpoint
                yield t

    def close(self) -> None:
        """Close the stream's connection."""
        self._resp.close()

    def __enter__(self) -> "ChangeStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ChangeEvent", "ChangeStream", "Transaction"]

