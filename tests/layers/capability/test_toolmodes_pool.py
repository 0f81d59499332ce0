"""Code mode's sandbox workers as a bounded pool (``transports/sandbox_pool.py``): at most
``max_workers`` alive, a bounded queue answered with a clear busy error, one run per
worker, spares reaped when idle, nothing left behind by cancelled or killed runs or by
a gateway that shuts down.

The ground truth is the OS: the live ``monty`` processes below this test process,
sampled by a thread with psutil while the runs go on. Conditions on them are waited for
with a bounded timeout, never with a fixed sleep.
"""

from __future__ import annotations

import asyncio
import threading

import psutil
import pytest

from hopline.layers.capability.toolmodes import CodeMode, Limits, sandbox
from hopline.transports.sandbox_pool import SandboxPool
from tests.conftest import PY
from tests.layers.capability.toolhosts import FakeHost, real_gateway, tool
from tests.peers import eventually, live

LIMITS = Limits(timeout=10.0, memory=16 * 1024 * 1024, output=4096)


def workers() -> set[int]:
    """Live (not zombie) ``monty`` processes below this process."""
    return live(psutil.Process().children(recursive=True), lambda p: p.name() == "monty")


class Sampler:
    """Samples the workers (beyond those alive at the start) in a thread: the most alive
    at once, and every pid seen."""

    def __init__(self) -> None:
        self.base = workers()
        self.peak = 0
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now(self) -> set[int]:
        return workers() - self.base

    def _run(self) -> None:
        while not self._stop.is_set():
            alive = self.now()
            self.peak = max(self.peak, len(alive))
            self.seen |= alive

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)



async def gone(pids: set[int]) -> bool:
    """Wait (bounded) until none of ``pids`` is a live worker any more."""
    await eventually(lambda: not pids & workers())
    return True


def failed(result: dict) -> str:
    assert result["isError"] is True
    return result["content"][0]["text"]


async def test_twenty_parallel_runs_through_a_real_gateway_keep_to_max_workers():
    pool = sandbox.pool(LIMITS, SandboxPool, max_workers=2, spares=1, idle_timeout=60.0)
    mode = CodeMode(limits=LIMITS, workers=pool)
    code = "s = call_tool('demo__add', a={i}, b=1000)\ne = call_tool('demo__echo', {{'text': 'run {i}'}})\n[s['sum'], e]"
    with Sampler() as sampled:
        async with real_gateway({"demo": [PY, "-m", "hopline.demo"]}, mode=mode) as client:
            answers = await asyncio.gather(*(client.call("run_code", {"code": code.format(i=i)}) for i in range(20)))
            assert [a["result"]["structuredContent"]["result"] for a in answers] == [[1000 + i, f"run {i}"] for i in range(20)]
            await eventually(lambda: len(sampled.now()) == 1 and pool.live == 1)  # the runs' workers are reaped; the spare stays
    assert 1 <= sampled.peak <= 2, sampled.peak
    assert await gone(sampled.seen)  # the gateway's shutdown reaped the spare


async def test_idle_workers_are_reaped_after_the_idle_timeout():
    pool = sandbox.pool(LIMITS, SandboxPool, max_workers=3, spares=2, idle_timeout=0.5)
    with Sampler() as sampled:
        outcomes = await asyncio.gather(*(sandbox.run(f"{i} * 2", {}, LIMITS, pool) for i in range(6)))
        assert [o.value for o in outcomes] == [2 * i for i in range(6)]
        assert sampled.peak <= 3
        await eventually(lambda: not sampled.now() and pool.live == 0)  # the spares, unused for 0.5 s, are gone too
        assert (await sandbox.run("'again'", {}, LIMITS, pool)).value == "again"  # the next run starts a worker
        await pool.aclose()
        assert await gone(sampled.seen)


async def test_each_run_takes_the_started_spare_and_its_worker_ends_with_it():
    pool = sandbox.pool(LIMITS, SandboxPool, max_workers=2, spares=1, idle_timeout=60.0)
    base = workers()
    try:
        assert (await sandbox.run("1", {}, LIMITS, pool)).ok
        await eventually(lambda: pool.stats() == {"idle": 1, "busy": 0, "starting": 0, "retiring": 0, "waiting": 0} and len(workers() - base) == 1)
        (spare,) = workers() - base
        leaked = await sandbox.run("secret = 'caller one'\nsecret", {}, LIMITS, pool)
        assert leaked.value == "caller one"
        assert await gone({spare})  # the spare ran that code, and ended with the run
        await eventually(lambda: pool.live == 1 and len(workers() - base) == 1)
        assert "NameError" in (await sandbox.run("secret", {}, LIMITS, pool)).error  # a fresh worker
    finally:
        await pool.aclose()
    assert not workers() - base


async def test_a_full_queue_and_a_long_wait_answer_a_busy_error_at_once():
    entered, release = asyncio.Event(), asyncio.Event()

    async def hold(arguments):
        entered.set()
        await release.wait()
        return {"content": [{"type": "text", "text": "held"}], "isError": False}

    host = FakeHost([tool("slow__hold", "holds its worker")], functions={"slow__hold": hold})
    pool = sandbox.pool(LIMITS, SandboxPool, max_workers=1, spares=0, queue=1, queue_wait=0.3)
    mode = CodeMode(limits=LIMITS, workers=pool)
    try:
        holding = asyncio.create_task(mode.call(host, "run_code", {"code": "call_tool('slow__hold')"}))
        await asyncio.wait_for(entered.wait(), 10)  # the only worker is busy
        queued = asyncio.create_task(mode.call(host, "run_code", {"code": "'queued'"}))
        await eventually(lambda: pool.stats()["waiting"] == 1)
        overflow = await mode.call(host, "run_code", {"code": "'one too many'"})
        text = failed(overflow)
        assert text.startswith("RuntimeError: sandbox busy: 2 runs are running or waiting, the most this gateway takes (1 workers, a queue of 1)")
        assert text.endswith("try again shortly") and overflow["structuredContent"] == {"error": text, "output": ""}
        assert not holding.done()  # answered while the queue was still full
        assert "sandbox busy: no worker became free within 0.3 s" in failed(await queued)
        release.set()
        assert (await holding)["structuredContent"]["result"] == "held"
    finally:
        release.set()
        await mode.aclose()


@pytest.mark.parametrize(
    ("code", "error"),
    [("while True:\n    pass", "TimeoutError"), ("x = []\nwhile True:\n    x.append([1] * 10000)", "MemoryError")],
)
async def test_a_run_stopped_by_its_time_or_memory_limit_leaves_no_process(code, error):
    pool = sandbox.pool(LIMITS, SandboxPool, max_workers=2, spares=0)
    with Sampler() as sampled:
        outcome = await sandbox.run(code, {}, Limits(timeout=0.5, memory=16 * 1024 * 1024), pool)
        assert error in outcome.error
        assert sampled.seen  # the worker was there while it ran ...
        await eventually(lambda: not sampled.now() and pool.live == 0)  # ... and was killed and reaped with the run
        await pool.aclose()


async def test_cancelled_runs_leave_no_worker_behind():
    """20 calls cancelled as they start (a client that gives up): each used to leave an
    idle worker alive for good. Their workers are now the pool's, capped and reaped."""
    pool = sandbox.pool(LIMITS, SandboxPool, max_workers=4, spares=1, idle_timeout=0.3)
    mode = CodeMode(limits=LIMITS, workers=pool)
    host = FakeHost([])
    with Sampler() as sampled:
        for _ in range(3):
            calls = [asyncio.create_task(mode.call(host, "run_code", {"code": "while True:\n    pass"})) for _ in range(20)]
            await asyncio.sleep(0)  # each call starts and asks for a worker
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
        await eventually(lambda: not sampled.now())
        assert sampled.peak <= 4
        await mode.aclose()


async def test_gateway_shutdown_reaps_the_spare_and_the_runs_in_flight():
    pool = sandbox.pool(LIMITS, SandboxPool, max_workers=2, spares=1, idle_timeout=60.0)
    with Sampler() as sampled:
        async with real_gateway({"demo": [PY, "-m", "hopline.demo"]}, mode=CodeMode(limits=LIMITS, workers=pool)) as client:
            assert (await client.call("run_code", {"code": "1 + 1"}))["result"]["structuredContent"]["result"] == 2
            looping = asyncio.create_task(client.call("run_code", {"code": "while True:\n    pass"}))
            await eventually(lambda: pool.stats()["busy"] == 1 and len(sampled.now()) == 2)  # a run in flight, and the spare
        assert pool.live == 0 and pool.closed
        assert await gone(sampled.seen)
        stopped = await asyncio.wait_for(looping, 5)  # stopped, not left to run out its 10 s
        assert failed(stopped["result"]) == "RuntimeError: sandbox worker stopped: the sandbox is shutting down"
    assert (await sandbox.run("1", {}, LIMITS, pool)).error == "RuntimeError: sandbox unavailable: the sandbox is shutting down"


async def test_a_reload_reaps_the_old_pool_and_the_new_one_serves():
    from hopline.config.schema import GatewayConfig
    from hopline.modes import build
    from hopline.layers.session.gateway_session import GatewaySession
    from tests.layers.capability.toolhosts import GatewayClient

    def conf(max_workers: int) -> GatewayConfig:
        tools = {"mode": "code", "code": {"max_workers": max_workers, "idle_timeout": 60}}
        return GatewayConfig.model_validate({"backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}}, "tools": tools})

    gateway = build(conf(2))
    session = GatewaySession(gateway, stateful=True)
    gateway.sessions.add(session)
    client = GatewayClient(session)
    with Sampler() as sampled:
        try:
            old = gateway.pipeline.tools.modes["code"].workers
            assert (await client.call("run_code", {"code": "1 + 1"}))["result"]["structuredContent"]["result"] == 2
            await eventually(lambda: old.live == 1 and len(sampled.now()) == 1)  # its spare
            await gateway.reload(conf(3))
            new = gateway.pipeline.tools.modes["code"].workers
            assert new is not old and new.max_workers == 3
            await eventually(lambda: old.closed and old.live == 0 and not sampled.now())  # the old spare is reaped
            assert (await client.call("run_code", {"code": "2 + 2"}))["result"]["structuredContent"]["result"] == 4
        finally:
            await session.end.aclose()
            await gateway.aclose()
        assert new.live == 0 and await gone(sampled.seen)


async def test_a_worker_that_cannot_start_is_a_clear_error_and_is_not_retried_in_a_loop():
    pool = sandbox.pool(LIMITS, SandboxPool, binary_path="/nonexistent/monty")
    outcome = await sandbox.run("1", {}, LIMITS, pool)
    assert outcome.error.startswith("RuntimeError: sandbox unavailable: a sandbox worker could not start: ") and "/nonexistent/monty" in outcome.error
    await eventually(lambda: pool.live == 0)
    assert pool.stats() == {"idle": 0, "busy": 0, "starting": 0, "retiring": 0, "waiting": 0}
    await pool.aclose()


async def test_closing_right_after_a_reload_still_reaps_the_replaced_pool():
    """The replaced pipeline's release is the gateway runtime's task: a close that cuts it short
    releases that pipeline again, with no grace, before it returns (issue 30 item 5)."""
    from hopline.config.schema import GatewayConfig
    from hopline.modes import build
    from hopline.layers.session.gateway_session import GatewaySession
    from tests.layers.capability.toolhosts import GatewayClient

    def conf(max_workers: int) -> GatewayConfig:
        tools = {"mode": "code", "code": {"max_workers": max_workers, "idle_timeout": 60}}
        return GatewayConfig.model_validate({"backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}}, "tools": tools})

    gateway = build(conf(2))
    session = GatewaySession(gateway, stateful=True)
    gateway.sessions.add(session)
    client = GatewayClient(session)
    with Sampler() as sampled:
        old = gateway.pipeline.tools.modes["code"].workers
        try:
            assert (await client.call("run_code", {"code": "1 + 1"}))["result"]["structuredContent"]["result"] == 2
            await eventually(lambda: old.live == 1 and len(sampled.now()) == 1)  # its spare
            await gateway.reload(conf(3))
        finally:
            await session.end.aclose()
            await gateway.aclose()  # at once: the old pool's release has had no turn yet
        assert old.closed and old.live == 0  # reaped before aclose returned
        assert await gone(sampled.seen)
