"""The child pool of one stdio backend (transports/child_pool.py), with real child processes.

Children are counted from outside with psutil (the children of this test process), so
each bound is checked on the processes themselves, not on the pool's own bookkeeping.
"""

from __future__ import annotations

import asyncio

import psutil
import pytest

from hopline.jsonrpc import Message, request
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.child_pool import AtCapacity, ChildPool
from hopline.transports.stdio import StdioChild
from tests.conftest import PY, SERVERS
from tests.peers import eventually, live, running

PID_SERVER = [PY, str(SERVERS / "pid_server.py")]


def spawner(argv: list[str] = PID_SERVER):
    return lambda: StdioChild.spawn(argv, name="t")


def live_children() -> set[int]:
    """This test process's live pid_server children (others, like the suite's redis-server, are not the pool's)."""
    return live(psutil.Process().children(), running("pid_server"))



async def ask_pid(lease) -> int:
    await lease.send(request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
    await asyncio.wait_for(lease.receive(), 15)
    await lease.send(request(2, "tools/call", {"name": "pid", "arguments": {}}))
    answer = await asyncio.wait_for(lease.receive(), 15)
    return int(answer.body["result"]["content"][0]["text"])


def giving(gave: list[int], *leases) -> None:
    """Each lease gives its child up when asked (closing it), noting its pid in ``gave``."""
    for lease in leases:
        async def give(lease=lease) -> bool:
            gave.append(lease.pid)
            await lease.aclose()
            return True

        lease.reclaim = give


@pytest.fixture
async def pools():
    made: list[ChildPool] = []

    def make(**kw) -> ChildPool:
        pool = ChildPool(kw.pop("spawn", spawner()), name="t", **kw)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        await pool.aclose()
    await eventually(lambda: not live_children())


async def test_the_cap_holds_and_a_request_beyond_it_fails_with_retry_after(pools):
    pool = pools(max_children=3, wait=0)
    leases = [await pool.acquire() for _ in range(3)]
    assert len(live_children()) == 3
    with pytest.raises(AtCapacity) as caught:
        await pool.acquire()
    assert caught.value.code == -31001 and caught.value.data["retry_after"] > 0 and "cap of 3" in caught.value.message
    assert len(live_children()) == 3
    await leases[0].aclose()
    fourth = await pool.acquire()
    assert fourth.pid in live_children() and len(live_children()) == 3


async def test_a_waiter_gets_the_slot_a_closed_child_frees(pools):
    pool = pools(max_children=1, wait=30)
    first = await pool.acquire()
    waiting = asyncio.ensure_future(pool.acquire())
    await eventually(lambda: pool.stats()["waiting"] == 1)
    assert not waiting.done()
    await first.aclose()
    second = await asyncio.wait_for(waiting, 15)
    assert second.pid != first.pid and live_children() == {second.pid}


async def test_a_spare_is_started_after_first_use_and_handed_to_the_next_request(pools):
    pool = pools(max_children=4, prewarm=1)
    await asyncio.sleep(0)
    assert not live_children()  # no pre-warming before the backend's first use
    first = await pool.acquire()
    await eventually(lambda: pool.stats()["spare"] == 1)  # the spare
    (spare,) = live_children() - {first.pid}
    second = await pool.acquire()
    assert second.pid == spare
    assert await ask_pid(second) == spare
    await eventually(lambda: pool.stats()["spare"] == 1)  # replaced in the background
    assert len(live_children()) == 3


async def test_a_spare_that_died_is_discarded(pools):
    pool = pools(max_children=4, prewarm=1)
    first = await pool.acquire()
    await eventually(lambda: pool.stats()["spare"] == 1)
    (spare,) = live_children() - {first.pid}
    psutil.Process(spare).kill()
    await eventually(lambda: pool.stats()["spare"] == 0)  # noticed (its exit reaped) and discarded
    second = await pool.acquire()
    assert second.pid != spare and second.alive()
    assert await ask_pid(second) == second.pid


async def test_spares_count_against_the_cap(pools):
    pool = pools(max_children=2, prewarm=2, wait=0)
    first = await pool.acquire()
    await eventually(lambda: pool.stats()["spare"] == 1)  # only one more fits
    second = await pool.acquire()
    assert len(live_children()) == 2
    with pytest.raises(AtCapacity):
        await pool.acquire()
    assert {first.pid, second.pid} == live_children()


async def test_concurrent_spawns_are_bounded(pools):
    running = peak = 0

    async def spawn():
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(0.05)  # hold the spawn gate a little, so spawns overlap
            return await StdioChild.spawn(PID_SERVER, name="t")
        finally:
            running -= 1

    pool = pools(max_children=8, max_spawning=2, spawn=spawn)
    leases = await asyncio.gather(*(pool.acquire() for _ in range(8)))
    assert peak == 2 and len({lease.pid for lease in leases}) == 8


async def test_an_abandoned_spawn_closes_its_child_and_frees_its_slot(pools):
    started, go = asyncio.Event(), asyncio.Event()

    async def spawn():
        started.set()
        await go.wait()
        return await StdioChild.spawn(PID_SERVER, name="t")

    pool = pools(max_children=1, wait=0, spawn=spawn)
    task = asyncio.ensure_future(pool.acquire())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    go.set()  # the fork happens after its requester left
    await eventually(lambda: pool.live() == 0 and not live_children())
    lease = await pool.acquire()  # the slot is free again
    assert lease.alive()


async def test_a_requester_gone_in_the_step_its_child_arrives_leaves_no_child(pools):
    # The spawn finishes and its requester is cancelled in one step of the loop, the
    # spawn first: once seen in CI as a gateway client's mid-start exit that left a child.
    go = asyncio.get_running_loop().create_future()

    async def spawn():
        child = await StdioChild.spawn(PID_SERVER, name="t")
        await go
        return child

    pool = pools(max_children=1, wait=0, spawn=spawn)
    task = asyncio.ensure_future(pool.acquire())
    await eventually(lambda: len(live_children()) == 1)
    go.set_result(None)  # the spawn's last step is queued first ...
    task.cancel()  # ... its requester's cancellation right behind it
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: pool.live() == 0 and not live_children(), 10)
    assert (await pool.acquire()).alive()  # the slot is free again


async def test_an_abandoned_wait_frees_nothing_it_did_not_hold(pools):
    pool = pools(max_children=1, wait=30)
    first = await pool.acquire()
    waiting = asyncio.ensure_future(pool.acquire())
    await eventually(lambda: pool.stats()["waiting"] == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pool.stats()["waiting"] == 0 and live_children() == {first.pid}


async def test_at_the_cap_the_least_recently_active_idle_child_is_reclaimed(pools):
    pool = pools(max_children=2, wait=0)
    gave: list[int] = []
    older, newer = await pool.acquire(), await pool.acquire()
    giving(gave, older, newer)
    newer.last_active, older.last_active = 2.0, 1.0  # older is the least recently active
    third = await pool.acquire()
    assert gave == [older.pid] and live_children() == {newer.pid, third.pid}


async def test_under_pressure_a_bare_handshake_is_reclaimed_sooner_than_a_used_child(pools):
    """fresh_idle for a lease that carried only its handshake, pressure_idle for the others;
    the request at the cap waits for the one that becomes reclaimable first."""
    pool = pools(max_children=2, wait=0, pressure_idle=3600.0, fresh_idle=0.3)
    used, fresh = await pool.acquire(), await pool.acquire()
    await ask_pid(used)  # initialize and a call: two requests
    await fresh.send(request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
    await asyncio.wait_for(fresh.receive(), 15)
    gave: list[int] = []
    giving(gave, used, fresh)
    used.last_active = fresh.last_active - 1.0  # the least recently active, but past its handshake
    third = await pool.acquire()
    assert gave == [fresh.pid] and live_children() == {used.pid, third.pid}


async def test_under_pressure_a_child_nobody_listens_on_is_reclaimed_sooner(pools):
    """absent_idle for a lease whose owner says no client holds a stream open on it."""
    pool = pools(max_children=2, wait=0, pressure_idle=3600.0, fresh_idle=3600.0, absent_idle=0.3)
    heard, left = await pool.acquire(), await pool.acquire()
    await ask_pid(heard)
    await ask_pid(left)
    gave: list[int] = []
    giving(gave, heard, left)
    heard.listening, left.listening = (lambda: True), (lambda: False)
    heard.last_active = left.last_active - 1.0  # the least recently active, but listened on
    third = await pool.acquire()
    assert gave == [left.pid] and live_children() == {heard.pid, third.pid}


async def test_at_the_cap_a_lease_that_will_not_become_reclaimable_soon_is_not_waited_for(pools):
    pool = pools(max_children=1, wait=0, pressure_idle=3600.0, fresh_idle=3600.0)
    lease = await pool.acquire()
    lease.reclaim = lambda: asyncio.sleep(0, True)
    with pytest.raises(AtCapacity):
        await asyncio.wait_for(pool.acquire(), 1.0)
    assert lease.alive()


async def test_a_busy_child_is_not_reclaimed(pools):
    pool = pools(max_children=1, wait=0)
    lease = await pool.acquire()
    asked: list[bool] = []

    async def give() -> bool:
        asked.append(True)
        await lease.aclose()
        return True

    lease.reclaim = give
    await lease.send(Message({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow", "arguments": {"ms": 60000}}}))
    assert lease.busy() and lease.idle_for() is None
    with pytest.raises(AtCapacity):
        await pool.acquire()
    assert not asked and lease.alive()


async def test_the_idle_sweeper_offers_idle_children_back(pools):
    pool = pools(max_children=2, idle_timeout=0.2)
    lease = await pool.acquire()
    closed = asyncio.Event()

    async def give() -> bool:
        await lease.aclose()
        closed.set()
        return True

    lease.reclaim = give
    await asyncio.wait_for(closed.wait(), 15)
    await eventually(lambda: not live_children())


async def test_aclose_reaps_leased_spare_and_starting_children(pools):
    go = asyncio.Event()
    calls = 0

    async def spawn():
        nonlocal calls
        calls += 1
        if calls == 3:
            await go.wait()  # the third spawn is still under way at aclose
        return await StdioChild.spawn(PID_SERVER, name="t")

    pool = pools(max_children=4, prewarm=1, spawn=spawn)
    await pool.acquire()
    await eventually(lambda: pool.stats()["spare"] == 1)
    starting = asyncio.ensure_future(pool.acquire())  # takes the spare; its replacement waits on `go`
    await starting
    await eventually(lambda: pool.stats()["starting"] == 1)
    closing = asyncio.ensure_future(pool.aclose())
    await asyncio.sleep(0)
    go.set()
    await asyncio.wait_for(closing, 20)
    await eventually(lambda: not live_children())
    with pytest.raises(ChannelClosed):
        await pool.acquire()
