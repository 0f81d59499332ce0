"""Fixtures for the policy tests: a real Redis server, a fake clock, an audit capture.

``redis_url`` starts Debian's ``redis-server`` (no persistence) on a free loopback port
once per test session and waits for its "Ready to accept connections" line — no polling
sleeps; it is stopped at the end. ``start_redis(port)`` starts another one on a chosen
port (for the outage/recovery test) and returns its stopper.
"""

from __future__ import annotations

import socket
from typing import Any, Callable, Iterator

import orjson
import pytest

from tests import peers

from hopline.layers.policy.audit import AuditLog



class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class AuditCapture:
    """An AuditLog writing into a list; ``records`` decodes them."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.log = AuditLog(self.lines.append, clock=lambda: 1_700_000_000.0)

    @property
    def records(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.lines]

    def text(self) -> str:
        return b"".join(self.lines).decode()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def audit() -> AuditCapture:
    return AuditCapture()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def free_port() -> Callable[[], int]:
    """A loopback port nothing listens on (yet)."""
    return _free_port


_start = peers.start_redis


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    port = _free_port()
    stop = _start(port)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop()


@pytest.fixture
def start_redis() -> Iterator[Callable[[int], Callable[[], None]]]:
    stops: list[Callable[[], None]] = []

    def start(port: int) -> Callable[[], None]:
        stop = _start(port)
        stops.append(stop)
        return stop

    yield start
    for stop in stops:
        stop()
