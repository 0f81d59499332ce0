"""The sandbox's start cost per stdio child, and its per-call cost (issue 35).

    python bench/run_sandbox.py                 # 50 starts each, interleaved, same run
    python bench/run_sandbox.py --starts 100 --calls 500 --command node tests/node/.../server-everything/dist/index.js

For each start, a child of the same command (default: tests/servers/hostile.py, a stdlib-only
MCP server) is spawned unconfined (``StdioChild.spawn``) and confined (``Launcher.spawn`` with the
``network-off`` profile: prlimit + bwrap + setpriv), alternately, and timed from the spawn to its
``initialize`` answer. Then ``--calls`` pings on one child of each, timed one by one. Reported:
p50 and p95 of each, and the difference. The first confined start includes the launcher's probe
(once per backend) and is left out.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hopline.jsonrpc import Message  # noqa: E402
from hopline.transports.confine import Profile  # noqa: E402
from hopline.transports.launcher import Launcher  # noqa: E402
from hopline.transports.stdio import StdioChild  # noqa: E402

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}


def request(msg_id: int, method: str, params: dict | None = None) -> Message:
    return Message({"jsonrpc": "2.0", "id": msg_id, "method": method, **({"params": params} if params else {})})


async def started(spawn) -> tuple[float, StdioChild]:
    t0 = time.perf_counter()
    child = await spawn()
    await child.send(request(1, "initialize", INIT))
    await child.receive()
    return time.perf_counter() - t0, child


async def calls(child: StdioChild, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        await child.send(request(100 + i, "ping"))
        await child.receive()
        out.append(time.perf_counter() - t0)
    return out


def line(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return (
        f"  {name:<10} p50 {statistics.median(ms):7.2f} ms   p95 {ms[int(len(ms) * 0.95) - 1]:7.2f} ms   (n={len(ms)})"
    )


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--starts", type=int, default=50)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--command", nargs="+", default=[sys.executable, str(ROOT / "tests" / "servers" / "hostile.py")])
    args = p.parse_args()
    launcher = Launcher(Profile(), args.command, name="bench")
    await launcher.command_line()  # the probe, once, outside the timings

    def plain():
        return StdioChild.spawn(args.command, name="bench", stderr_prefix=False)

    times: dict[str, list[float]] = {"unconfined": [], "confined": []}
    for _ in range(args.starts):
        for name, spawn in (("unconfined", plain), ("confined", launcher.spawn)):
            took, child = await started(spawn)
            times[name].append(took)
            await child.aclose()
    print(f"start to initialize answer, {' '.join(args.command)}:")
    for name, samples in times.items():
        print(line(name, samples))
    extra = statistics.median(times["confined"]) - statistics.median(times["unconfined"])
    print(f"  difference p50 {extra * 1000:.2f} ms")
    print(f"ping round trip, {args.calls} calls on one child each:")
    for name, spawn in (("unconfined", plain), ("confined", launcher.spawn)):
        _, child = await started(spawn)
        print(line(name, await calls(child, args.calls)))
        await child.aclose()


if __name__ == "__main__":
    asyncio.run(main())
