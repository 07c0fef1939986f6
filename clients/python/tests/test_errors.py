"""Problem types to exceptions, and the key encoding, without a server."""

from __future__ import annotations

import pytest

import doppio
from doppio.keys import document_path, encode_part

BASE = "https://doppio.dev/problems/"


@pytest.mark.parametrize(
    "status,slug,cls",
    [
        (400, "malformed", doppio.BadRequest),
        (401, "unauthenticated", doppio.Unauthenticated),
        (403, "forbidden", doppio.Forbidden),
        (404, "not-found", doppio.NotFound),
        (409, "conflict", doppio.Conflict),
        (410, "checkpoint-expired", doppio.CheckpointExpired),
        (412, "precondition-failed", doppio.PreconditionFailed),
        (413, "too-large", doppio.TooLarge),
        (422, "schema-mismatch", doppio.Unprocessable),
        (429, "over-quota", doppio.OverQuota),
        (429, "too-many-requests", doppio.TooManyRequests),
        (503, "unavailable", doppio.Unavailable),
        (504, "outcome-unknown", doppio.OutcomeUnknown),
    ],
)
def test_problem_types_map_to_exceptions(status: int, slug: str, cls: type[doppio.DoppioError]) -> None:
    e = doppio.error_from_problem(status, {"type": BASE + slug, "title": "t", "status": status, "detail": "why", "field": "f", "operation": 2})
    assert type(e) is cls
    assert (e.status, e.detail, e.field, e.operation) == (status, "why", "f", 2)
    assert isinstance(e, doppio.DoppioError)
    assert str(e) == f"doppio: {status} t: why"


def test_status_decides_when_the_type_is_unknown_or_disagrees() -> None:
    assert type(doppio.error_from_problem(504, None)) is doppio.OutcomeUnknown
    assert type(doppio.error_from_problem(404, {"type": "about:blank"})) is doppio.NotFound
    assert type(doppio.error_from_problem(503, {"type": BASE + "not-found"})) is doppio.Unavailable
    assert type(doppio.error_from_problem(418, {})) is doppio.DoppioError
    e = doppio.error_from_problem(503, {"retryAfter": 2}, retry_after=1)
    assert e.retry_after == 2.0
    assert doppio.error_from_problem(429, {}, retry_after=3).retry_after == 3


def test_key_parts_encode_as_the_server_does() -> None:
    assert encode_part("a\x00b") == b"\x02a\x00\xffb\x00\x01"
    assert encode_part(0) == b"\x15\x80" + b"\x00" * 7
    assert encode_part(-1) == b"\x15\x7f" + b"\xff" * 7
    assert encode_part(1) < encode_part(2) and encode_part(-5) < encode_part(3)
    with pytest.raises(TypeError):
        encode_part(True)
    with pytest.raises(ValueError):
        encode_part(1 << 63)
    assert document_path("d", "T", ["a/b", "(x,y)", ".", 7]) == "/d/T/a%2Fb/%28x%2Cy%29/%2E/7"
    with pytest.raises(ValueError):
        document_path("d", "T", [])
