"""Long-lived tasks have a structured owner (issue 30): :class:`hopline.runtime.TaskOwner` runs
them in one ``asyncio.TaskGroup``; a failing one is logged and its siblings keep running;
``aclose`` cancels every one and returns only once each has finished (its ``finally`` ran).
A gateway's tasks (breaker trials, health probes, a replaced pipeline's release) are its
runtime's (compose/gateway_runtime.py), built without starting anything."""

from __future__ import annotations

import asyncio
import logging

from hopline.runtime import TaskOwner


async def test_tasks_run_together_a_failure_stays_its_own_and_close_awaits_every_one(caplog):
    owner = TaskOwner("t")
    ticks: list[str] = []
    ended: list[str] = []

    async def forever(name: str) -> None:
        try:
            while True:
                ticks.append(name)
                await asyncio.sleep(0)
        finally:
            await asyncio.sleep(0)  # a clean-up that itself awaits
            ended.append(name)

    async def broken() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    owner.spawn(forever("a"), "a")
    owner.spawn(broken(), "broken")
    owner.spawn(forever("b"), "b")
    with caplog.at_level(logging.ERROR, logger="hopline.runtime"):
        while ticks.count("a") < 5 or ticks.count("b") < 5:  # both still run after `broken` failed
            await asyncio.sleep(0)
    assert "task broken failed" in caplog.text and "boom" in caplog.text
    await owner.aclose()
    assert sorted(ended) == ["a", "b"]  # cancelled and awaited: their clean-up ran before aclose returned
    late = forever("late")
    owner.spawn(late, "late")  # after close: not started, and the coroutine is closed (no warning)
    assert late.cr_frame is None and "late" not in ticks
    await owner.aclose()  # twice is fine


async def test_close_before_the_group_ran_starts_nothing():
    owner = TaskOwner("t")
    ran: list[int] = []

    async def job() -> None:
        ran.append(1)

    owner.spawn(job(), "job")
    await owner.aclose()
    await asyncio.sleep(0)
    assert ran == []


async def test_a_gateway_starts_nothing_when_built_and_its_runtime_owns_what_it_starts():
    from hopline.config.load import parse_config
    from hopline.modes import forward

    ours = {"gateway-tasks", "breaker-trials", "health-probes"}
    gateway = forward.build(parse_config("routing: {health_interval: 30}\nbackends:\n  demo: {command: python, args: [-m, hopline.demo]}\n"))
    try:
        assert not [t for t in asyncio.all_tasks() if t.get_name() in ours]  # pure construction
        gateway.start()
        gateway.start()  # idempotent
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        names = sorted(t.get_name() for t in asyncio.all_tasks() if t.get_name() in ours)
        assert names == sorted(ours)  # one owner, two tasks
    finally:
        await gateway.aclose()
    assert not [t for t in asyncio.all_tasks() if t.get_name() in ours]  # every one finished before aclose returned
