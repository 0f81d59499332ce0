"""Fixtures for the policy tests: a real Redis server, a fake clock, an audit capture.

``redis_url`` (tests/conftest.py) is the session's Redis. ``start_redis(path)`` starts
another one on a unix socket the test chose (for the outage/recovery test) and returns its
stopper.
"""

from __future__ import annotations

from pathlib import Path
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


@pytest.fixture
def free_port() -> Callable[[], int]:
    """A loopback port nothing listens on (yet)."""
    return peers.free_port


@pytest.fixture
def start_redis() -> Iterator[Callable[[Path], Callable[[], None]]]:
    stops: list[Callable[[], None]] = []

    def start(path: Path) -> Callable[[], None]:
        stop = peers.start_redis(path)
        stops.append(stop)
        return stop

    yield start
    for stop in stops:
        stop()
