"""The TaskStore contract (layers/session/task_store.py), over every implementation.

A store maps an exposed task id to its :class:`TaskRecord` for a TTL:

- ``get`` answers what ``put`` kept (the same record, as plain data), None for an id never
  put, deleted, expired or dropped; ``delete`` of an absent id is no error;
- ``put`` of a kept id replaces its record;
- ``owned(owner, limit)`` is at most ``limit`` of that owner's live records, oldest first,
  and never a record whose owner is another (nothing leaks across principals);
- bounded: past ``max_per_owner`` records of one owner, a ``put`` drops that owner's oldest
  (it is unknown from then on: fail closed), and no other owner's.

Implementations: MemoryTaskStore, and RedisTaskStore against the real redis-server.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest

from hopline.layers.session.task_store import MemoryTaskStore, RedisTaskStore, TaskRecord, TaskStore

IMPLEMENTATIONS = ["memory", "redis"]


@pytest.fixture(params=IMPLEMENTATIONS)
async def make(request):
    """``make(max_per_owner=…)``: a fresh, empty store of the implementation under test."""
    made = []

    def build(max_per_owner: int = 1_000) -> TaskStore:
        if request.param == "memory":
            store = MemoryTaskStore(max_per_owner=max_per_owner)
        else:
            url = request.getfixturevalue("redis_url")
            store = RedisTaskStore.from_url(url, prefix=f"c{secrets.token_hex(6)}:", timeout=2.0, max_per_owner=max_per_owner)
        made.append(store)
        return store

    yield build
    for store in made:
        if hasattr(store, "aclose"):
            await store.aclose()


def record(owner: str = "principal:https://idp:alice", n: int = 1, **kw: str) -> TaskRecord:
    return TaskRecord(backend="jobs", task_id=f"backend-task-{n}", owner=owner, tool="job", **kw)


async def test_get_answers_what_put_kept_and_nothing_else(make):
    store = make()
    kept = record(era="handshake", replica="r1")
    await store.put("t1", kept, ttl=60)
    assert await store.get("t1") == kept
    assert await store.get("t2") is None


async def test_put_replaces_and_delete_forgets(make):
    store = make()
    await store.put("t1", record(n=1), ttl=60)
    await store.put("t1", record(n=2), ttl=60)
    assert (await store.get("t1")).task_id == "backend-task-2"
    await store.delete("t1")
    assert await store.get("t1") is None
    await store.delete("t1")  # absent: no error
    assert await store.owned(record().owner, 10) == []


async def test_owned_lists_one_owners_live_records_oldest_first_up_to_the_limit(make):
    store = make()
    alice, bob = "principal:https://idp:alice", "principal:https://idp:bob"
    for n in range(1, 4):
        await store.put(f"a{n}", record(alice, n), ttl=60)
    await store.put("b1", record(bob, 9), ttl=60)
    assert [t for t, _ in await store.owned(alice, 10)] == ["a1", "a2", "a3"]
    assert [t for t, _ in await store.owned(alice, 2)] == ["a1", "a2"]
    assert [(t, r.owner) for t, r in await store.owned(bob, 10)] == [("b1", bob)]
    assert await store.owned("session:nobody", 10) == []


async def test_a_record_put_again_for_another_owner_is_no_longer_the_first_owners(make):
    store = make()
    alice, bob = "principal:https://idp:alice", "principal:https://idp:bob"
    await store.put("t1", record(alice), ttl=60)
    await store.put("t1", record(bob), ttl=60)
    assert await store.owned(alice, 10) == []  # never bob's record in alice's list
    assert [(t, r.owner) for t, r in await store.owned(bob, 10)] == [("t1", bob)]


async def test_past_the_per_owner_bound_that_owners_oldest_is_dropped(make):
    store = make(max_per_owner=2)
    alice, bob = "principal:https://idp:alice", "principal:https://idp:bob"
    await store.put("b1", record(bob), ttl=60)
    for n in range(1, 4):
        await store.put(f"a{n}", record(alice, n), ttl=60)
    assert await store.get("a1") is None  # dropped: unknown from now on
    assert [t for t, _ in await store.owned(alice, 10)] == ["a2", "a3"]
    assert await store.get("b1") is not None  # another owner's records stay


async def test_an_expired_record_is_gone_everywhere(make):
    store = make()
    owner = record().owner
    await store.put("short", record(n=1), ttl=0.001)
    await store.put("long", record(n=2), ttl=60)
    async with asyncio.timeout(5):
        while await store.get("short") is not None:  # Redis expires in real time: wait for it
            await asyncio.sleep(0.01)
    assert [t for t, _ in await store.owned(owner, 10)] == ["long"]
