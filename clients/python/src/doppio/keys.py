"""Document keys: their URL form and the partition they belong to.

A key is a sequence of parts, each a ``str`` or an ``int``, as the table's
key declares them. The partition of a key is the server's: xxHash64 of the
order-preserving encoding of its first part, modulo the database's number
of partitions, so smart routing sends a request to its partition's leader.
"""

from __future__ import annotations

from typing import Sequence, Union
from urllib.parse import quote

import xxhash

KeyPart = Union[str, int]
"""One part of a document key."""

Key = Sequence[KeyPart]
"""A document key, or the leading parts of one (a collection)."""

_TAG_STRING = 0x02
_TAG_INT = 0x15
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def escape_part(part: KeyPart) -> str:
    """Return ``part`` as one percent-encoded path segment."""
    if isinstance(part, bool) or not isinstance(part, (str, int)):
        raise TypeError(f"doppio: key part {part!r} is a {type(part).__name__}; want a str or an int")
    if isinstance(part, int):
        return str(part)
    if part == "":
        raise ValueError("doppio: an empty string is not a key part")
    # Commas and parentheses are the multi-get syntax; dots alone are
    # path navigation: all are encoded.
    s = quote(part, safe="")
    return s.replace(".", "%2E") if s in (".", "..") else s


def document_path(db: str, table: str, key: Key) -> str:
    """Return the escaped path of a document or collection."""
    if len(key) == 0:
        raise ValueError("doppio: a key needs at least one part")
    return "/" + quote(db, safe="") + "/" + quote(table, safe="") + "".join("/" + escape_part(p) for p in key)


def encode_part(part: KeyPart) -> bytes:
    """Return the order-preserving encoding of one key part."""
    if isinstance(part, bool) or not isinstance(part, (str, int)):
        raise TypeError(f"doppio: key part {part!r} is a {type(part).__name__}; want a str or an int")
    if isinstance(part, int):
        if not _INT64_MIN <= part <= _INT64_MAX:
            raise ValueError(f"doppio: key part {part} does not fit 64 bits")
        return bytes([_TAG_INT]) + ((part ^ (1 << 63)) & ((1 << 64) - 1)).to_bytes(8, "big")
    return bytes([_TAG_STRING]) + part.encode().replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def partition_of(partition_key: KeyPart, partitions: int) -> int:
    """Return the partition, of ``partitions``, that holds the document
    group whose first key part is ``partition_key``."""
    return xxhash.xxh64_intdigest(encode_part(partition_key)) % partitions
