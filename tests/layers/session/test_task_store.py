"""MemoryTaskStore: the TaskStore contract (layers/session/task_store.py) on a fake clock."""

from __future__ import annotations

import pytest

from hopline.context import ANONYMOUS, Principal
from hopline.layers.session.task_store import MemoryTaskStore, TaskRecord, mint, owner_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rec(owner: str = "o", task_id: str = "t") -> TaskRecord:
    return TaskRecord("b", task_id, owner, "tool")


async def test_put_get_delete_and_ttl():
    clock = Clock()
    store = MemoryTaskStore(clock=clock)
    await store.put("x", rec(), 10)
    assert await store.get("x") == rec()
    clock.now += 9.9
    assert await store.get("x") == rec()
    clock.now += 0.2
    assert await store.get("x") is None and len(store) == 0  # expired: as if deleted
    await store.put("y", rec(), 10)
    await store.delete("y")
    await store.delete("y")  # absent: no error
    assert await store.get("y") is None


async def test_total_bound_drops_the_oldest_and_expired_first():
    clock = Clock()
    store = MemoryTaskStore(max_tasks=3, clock=clock)
    await store.put("short", rec("a"), 1)
    await store.put("b", rec("b"), 100)
    await store.put("c", rec("c"), 100)
    clock.now += 2
    await store.put("d", rec("d"), 100)  # full: the expired one goes, nothing live is dropped
    assert [await store.get(t) is not None for t in ("b", "c", "d")] == [True, True, True] and store.dropped == 0
    await store.put("e", rec("e"), 100)  # full of live ones: the oldest goes
    assert await store.get("b") is None and await store.get("e") is not None and store.dropped == 1
    assert len(store) == 3


async def test_per_owner_bound_drops_that_owners_oldest_only():
    store = MemoryTaskStore(max_per_owner=2)
    await store.put("other", rec("bob"), 100)
    for task in ("a1", "a2", "a3"):
        await store.put(task, rec("alice", task), 100)
    assert await store.get("a1") is None and await store.get("other") is not None
    assert [t for t, _ in await store.owned("alice", 10)] == ["a2", "a3"]
    assert [t for t, _ in await store.owned("alice", 1)] == ["a2"]
    assert await store.owned("nobody", 10) == []


async def test_put_again_replaces_and_moves_owner():
    store = MemoryTaskStore()
    await store.put("x", rec("alice"), 100)
    await store.put("x", rec("bob"), 100)
    assert await store.owned("alice", 10) == [] and [t for t, _ in await store.owned("bob", 10)] == ["x"]


def test_records_round_trip_as_plain_data_and_bounds_are_checked():
    assert TaskRecord.of(rec().as_dict()) == rec()
    with pytest.raises(ValueError):
        MemoryTaskStore(max_tasks=0)


def test_owner_is_the_principal_else_the_session():
    alice = Principal("alice", issuer="api-key")
    assert owner_of(alice, "s1") == owner_of(alice, "s2") == owner_of(alice, None)
    assert owner_of(ANONYMOUS, "s1") != owner_of(ANONYMOUS, "s2")
    assert owner_of(ANONYMOUS, None) == "anonymous"
    assert owner_of(Principal("anonymous", issuer="api-key"), "s1") != owner_of(ANONYMOUS, "s1")  # a key named so


def test_minted_ids_are_unguessable():
    ids = {mint() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) >= 22 for i in ids)
