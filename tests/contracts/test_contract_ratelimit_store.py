"""The rate-limit Store contract (layers/policy/ratelimit.py), over every implementation.

``take(buckets)`` takes one token from every ``(key, rate, burst)`` bucket, or none:

- a bucket never seen holds ``burst`` tokens and refills at ``rate`` a second up to ``burst``;
- all taken: ``(0, -1)``; refused: ``(seconds until the refusing bucket has a token, its
  index)`` and nothing is taken from any bucket (all or nothing); when several refuse, the
  one that makes the caller wait longest is named;
- keys are independent of each other.

Implementations: MemoryStore, and RedisStore (its Lua script) against the real
redis-server. Both read time from an injectable clock, so this runs on a fake one.
"""

from __future__ import annotations

import secrets

import pytest

from hopline.layers.policy.ratelimit import MemoryStore, RedisStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "redis"])
async def store(request, clock):
    if request.param == "memory":
        yield MemoryStore(clock=clock)
        return
    s = RedisStore.from_url(request.getfixturevalue("redis_url"), prefix=f"c{secrets.token_hex(6)}:", timeout=2.0, clock=clock, on_unavailable="closed")
    try:
        yield s
    finally:
        await s.aclose()


async def test_a_new_bucket_holds_its_burst_then_says_how_long_to_wait(store, clock):
    bucket = [("alice", 2.0, 3.0)]  # 2 tokens a second, 3 at most
    assert [await store.take(bucket) for _ in range(3)] == [(0.0, -1)] * 3
    assert await store.take(bucket) == (0.5, 0)
    clock.now += 0.5
    assert await store.take(bucket) == (0.0, -1)
    assert await store.take(bucket) == (0.5, 0)


async def test_refill_stops_at_the_burst(store, clock):
    bucket = [("alice", 1.0, 2.0)]
    assert await store.take(bucket) == (0.0, -1)
    clock.now += 3600
    assert [await store.take(bucket) for _ in range(3)] == [(0.0, -1), (0.0, -1), (1.0, 0)]


async def test_all_or_nothing_and_the_longest_wait_is_named(store, clock):
    user, backend, tool = ("u", 1.0, 1.0), ("b", 4.0, 2.0), ("t", 0.5, 1.0)
    assert await store.take([user, backend, tool]) == (0.0, -1)
    assert await store.take([backend, user, tool]) == (2.0, 2)  # u waits 1 s, t 2 s: t is named
    assert await store.take([backend]) == (0.0, -1)  # the refused take took nothing from b
    assert await store.take([backend]) == (0.25, 0)


async def test_keys_are_independent(store, clock):
    assert await store.take([("alice", 1.0, 1.0)]) == (0.0, -1)
    assert await store.take([("alice", 1.0, 1.0)]) == (1.0, 0)
    assert await store.take([("bob", 1.0, 1.0)]) == (0.0, -1)
