"""The SharedSessions contract (transports/shared_sessions.py), over every implementation.

What a store of handshake-era sessions' mutable part promises, whoever implements it:

- ``end(sid)``: ``is_ended(sid)`` is True from then on (for the TTL) and no other session is
  ended; the session's standing requests are forgotten; every ``on_end`` callback of every
  store sharing that state hears ``sid`` (at once in one process, after ``ready`` across
  replicas);
- ``record`` keeps a session's standing requests for ``standing`` to replay: the last
  ``logging/setLevel``, each subscribed URI once (``resources/unsubscribe`` forgets it), at
  most ``MAX_STANDING`` of them (a new one past the bound is not kept; a kept one can still
  change); one session's are never another's;
- ``publish(sid, data)`` reaches the listener of ``sid`` on any store sharing the state, and
  is then True (one process: always False, the copy without a GET stream is the only copy).
  The Protocol's "False if none listens" is not checked here, because RedisSessions does not
  keep it yet (a known bug, left to the Redis stores' owners): it answers True whenever any
  replica's pattern subscription is up, its own included, so a notification for a session
  whose GET stream no replica holds is dropped instead of kept in that session's backlog;
- ``ready`` and ``aclose`` return.

Implementations: MemorySessions, and RedisSessions against the real redis-server (two
stores on one prefix stand for two replicas).
"""

from __future__ import annotations

import asyncio
import secrets

import pytest

from hopline.transports.shared_sessions import MAX_STANDING, MemorySessions, RedisSessions, SharedSessions

IMPLEMENTATIONS = ["memory", "redis"]


@pytest.fixture(params=IMPLEMENTATIONS)
async def replicas(request):
    """``replicas(n)``: n stores sharing one state (one for memory: a process shares nothing)."""
    made: list[SharedSessions] = []
    prefix = f"c{secrets.token_hex(6)}:"

    async def build(n: int = 1) -> list[SharedSessions]:
        if request.param == "memory":
            stores: list[SharedSessions] = [MemorySessions()][:n]
        else:
            url = request.getfixturevalue("redis_url")
            key = [secrets.token_bytes(32)]  # replicas share the session key: what one signs, the others accept
            stores = [RedisSessions.from_url(url, prefix=prefix, timeout=2.0, keys=key) for _ in range(n)]
        made.extend(stores)
        for store in stores:
            await store.ready(5.0)
        return stores

    build.kind = request.param
    yield build
    for store in made:
        await store.aclose()


async def test_an_ended_session_is_ended_and_no_other(replicas):
    [store] = await replicas()
    assert not await store.is_ended("s1")
    await store.end("s1", ttl=60)
    assert await store.is_ended("s1")
    assert not await store.is_ended("s2")


async def test_ending_a_session_forgets_its_standing_requests(replicas):
    [store] = await replicas()
    await store.record("s1", "resources/subscribe", {"uri": "file:///a"}, ttl=60)
    await store.end("s1", ttl=60)
    assert await store.standing("s1") == []


async def test_standing_requests_replay_the_last_level_and_each_subscription_once(replicas):
    [store] = await replicas()
    await store.record("s1", "logging/setLevel", {"level": "debug"}, ttl=60)
    await store.record("s1", "logging/setLevel", {"level": "error"}, ttl=60)
    await store.record("s1", "resources/subscribe", {"uri": "file:///a"}, ttl=60)
    await store.record("s1", "resources/subscribe", {"uri": "file:///a"}, ttl=60)
    await store.record("s1", "resources/subscribe", {"uri": "file:///b"}, ttl=60)
    await store.record("s1", "resources/unsubscribe", {"uri": "file:///b"}, ttl=60)
    standing = sorted(await store.standing("s1"), key=lambda r: r["method"])
    assert standing == [
        {"method": "logging/setLevel", "params": {"level": "error"}},
        {"method": "resources/subscribe", "params": {"uri": "file:///a"}},
    ]
    assert await store.standing("s2") == []  # one session's are never another's


async def test_standing_requests_are_bounded_per_session(replicas):
    [store] = await replicas()
    for n in range(MAX_STANDING):
        await store.record("s1", "resources/subscribe", {"uri": f"file:///{n}"}, ttl=60)
    await store.record("s1", "resources/subscribe", {"uri": "file:///one-too-many"}, ttl=60)
    await store.record("s1", "resources/unsubscribe", {"uri": "file:///0"}, ttl=60)  # a kept one can still change
    uris = {r["params"]["uri"] for r in await store.standing("s1")}
    assert len(uris) == MAX_STANDING - 1 and "file:///one-too-many" not in uris and "file:///0" not in uris


async def test_every_store_hears_an_end(replicas):
    stores = await replicas(2)
    heard: list[asyncio.Queue[str]] = []
    for store in stores:
        queue: asyncio.Queue[str] = asyncio.Queue()
        store.on_end(queue.put_nowait)
        heard.append(queue)
    await stores[0].end("s1", ttl=60)
    for queue in heard:
        assert await asyncio.wait_for(queue.get(), 5) == "s1"
    assert [await store.is_ended("s1") for store in stores] == [True] * len(stores)


async def test_what_is_published_for_a_session_reaches_its_listener(replicas):
    stores = await replicas(2)
    holder, other = stores[0], stores[-1]
    got: asyncio.Queue[bytes] = asyncio.Queue()
    stop = holder.listen("s1", got.put_nowait)
    note = b'{"jsonrpc":"2.0","method":"notifications/message"}'
    try:
        delivered = await other.publish("s1", note)
        if replicas.kind == "redis":
            assert delivered
        if delivered:
            assert await asyncio.wait_for(got.get(), 5) == note
    finally:
        stop()
    if replicas.kind == "memory":  # one process: the copy without a GET stream is the only copy
        assert await other.publish("s1", note) is False
