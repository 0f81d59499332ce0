"""Per-run latency of Code mode's sandbox, three ways, in one process and one run:

- ``fresh``: a new ``AsyncMonty`` per run, the process started on the run's path (before the pool);
- ``pool``: :class:`SandboxPool`, one run per worker, the next run served by the pre-started spare
  (what hopline does);
- ``reuse``: one ``AsyncMonty`` whose worker process serves run after run (not chosen: no isolation
  promise between sessions of one process).

Every run goes through ``sandbox.run`` (the same host loop and result handling); runs are
sequential, ``--gap`` ms apart (the spare needs a moment to start), then ``--parallel`` at once
(``fresh``: unbounded; ``pool``: max_workers 4). Prints medians and p90 in ms, and ratios to ``fresh``.

    python bench/code_pool.py [--runs 200] [--gap 20] [--parallel 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator

import pydantic_monty as monty

from hopline.layers.capability.toolmodes import sandbox
from hopline.transports.sandbox_pool import SandboxPool

LIMITS = sandbox.Limits(timeout=5.0)
CODE = "sum(i * i for i in range(100))"


class Fresh:
    """A new ``AsyncMonty`` per run: the worker starts on the run's path (hopline before the pool)."""

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[object]:
        pool = monty.AsyncMonty(min_processes=1, max_processes=1, max_checkouts_per_worker=1, request_timeout=LIMITS.timeout + 1)
        async with pool, pool.checkout(**sandbox.checkout_options(LIMITS)) as session:
            yield session


class Reuse:
    """One worker process, a new session on it for every run."""

    def __init__(self, pool: monty.AsyncMonty) -> None:
        self.pool = pool

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[object]:
        async with self.pool.checkout(**sandbox.checkout_options(LIMITS)) as session:
            yield session


async def measure(name: str, workers, runs: int, gap: float) -> float:
    times = []
    for _ in range(runs):
        await asyncio.sleep(gap)
        started = time.perf_counter()
        outcome = await sandbox.run(CODE, {}, LIMITS, workers)
        times.append(time.perf_counter() - started)
        assert outcome.ok, outcome.error
    times.sort()
    median = statistics.median(times) * 1000
    print(f"{name:7s} median {median:6.2f} ms   p90 {times[int(len(times) * 0.9)] * 1000:6.2f} ms")
    return median


async def main(runs: int, gap: float, parallel: int) -> None:
    base = await measure("fresh", Fresh(), runs, gap)
    workers = sandbox.pool(LIMITS, SandboxPool, max_workers=4, spares=1)
    pool_ms = await measure("pool", workers, runs, gap)
    reused = monty.AsyncMonty(min_processes=1, max_processes=1, request_timeout=LIMITS.timeout + 1)
    async with reused:
        reuse_ms = await measure("reuse", Reuse(reused), runs, gap)
    print(f"ratios to fresh: pool {pool_ms / base:.2f}, reuse {reuse_ms / base:.2f}")
    for name, source in (("fresh", Fresh()), ("pool", workers)):
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(sandbox.run(CODE, {}, LIMITS, source) for _ in range(parallel)))
        assert all(o.ok for o in outcomes)
        print(f"{parallel} parallel runs, {name}: {(time.perf_counter() - started) * 1000:.1f} ms")
    await workers.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--gap", type=float, default=20.0, help="ms between sequential runs")
    parser.add_argument("--parallel", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.gap / 1000, args.parallel))
