"""Shared fixtures: the servers the Go test started, named by DOPPIO_*."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def env(name: str) -> str:
    """Return the environment variable the Go test set; fail without it."""
    v = os.environ.get(name)
    if not v:
        raise RuntimeError(f"{name} is not set: run these tests through the Go test (e2e/pyclient_test.go)")
    return v


def tls_options() -> dict[str, Any]:
    """The CA and client certificate to reach a secure server with, when
    the Go test gave them (DOPPIO_CA, DOPPIO_CERT, DOPPIO_KEY)."""
    opts: dict[str, Any] = {}
    if os.environ.get("DOPPIO_CA"):
        opts["ca"] = os.environ["DOPPIO_CA"]
    if os.environ.get("DOPPIO_CERT"):
        opts["cert"] = (os.environ["DOPPIO_CERT"], os.environ["DOPPIO_KEY"])
    return opts


def eventually(what: str, fn: Callable[[], T], timeout: float = 20.0) -> T:
    """Return fn()'s first truthy result, polling until timeout."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last  # type: ignore[return-value]
        except Exception as e:  # noqa: BLE001 - reported below
            last = e
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")
