"""The PinStore contract (layers/policy/pinning.py: pins shared by replicas), over every
implementation.

- ``claim(pins, replace)`` sets each ``(backend, tool) → fingerprint`` the store has no pin
  for, and those in ``replace`` anyway; it answers the store's pin of each key claimed after
  that, so the first replica's pin wins and a later one judges by it;
- ``load()`` is every pin the store holds;
- one store's pins are the same for every replica sharing it.

Implementations: RedisPins against the real redis-server (two clients on one prefix stand
for two replicas), and the dict the layer's own tests use in its place
(tests/layers/policy/test_pinning.py ``StorePins``), which must keep the same contract.
"""

from __future__ import annotations

import secrets

import pytest

from hopline.layers.policy.pinning import RedisPins
from tests.layers.policy.test_pinning import StorePins

GOOD = "sha256:" + "a" * 64
BAD = "sha256:" + "b" * 64
OTHER = "sha256:" + "c" * 64


@pytest.fixture(params=["redis", "dict"])
async def replicas(request):
    """Two stores sharing one state."""
    if request.param == "dict":
        one = StorePins()
        yield one, one
        return
    url, prefix = request.getfixturevalue("redis_url"), f"c{secrets.token_hex(6)}:"
    a, b = RedisPins.from_url(url, prefix=prefix, timeout=2.0), RedisPins.from_url(url, prefix=prefix, timeout=2.0)
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


async def test_the_first_pin_wins_and_every_replica_reads_it(replicas):
    first, later = replicas
    assert await first.claim({("fs", "read"): GOOD}, ()) == {("fs", "read"): GOOD}
    assert await later.claim({("fs", "read"): BAD, ("fs", "write"): OTHER}, ()) == {("fs", "read"): GOOD, ("fs", "write"): OTHER}
    assert await first.load() == await later.load() == {("fs", "read"): GOOD, ("fs", "write"): OTHER}


async def test_replace_sets_a_pin_anyway(replicas):
    first, later = replicas
    await first.claim({("fs", "read"): GOOD, ("fs", "write"): GOOD}, ())
    assert await later.claim({("fs", "read"): BAD, ("fs", "write"): BAD}, [("fs", "read")]) == {("fs", "read"): BAD, ("fs", "write"): GOOD}
    assert await first.load() == {("fs", "read"): BAD, ("fs", "write"): GOOD}


async def test_keys_are_backend_and_tool_together(replicas):
    first, _ = replicas
    await first.claim({("fs", "read"): GOOD, ("git", "read"): BAD}, ())
    assert await first.load() == {("fs", "read"): GOOD, ("git", "read"): BAD}
    assert await first.claim({}, ()) == {}
