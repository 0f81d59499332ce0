"""ACP conductor benchmark: per-message routing cost through a chain of proxies.

    python bench/acp/run_acp_bench.py [--prompts 1000] [--updates 10] [--proxies 3] [--out FILE]

Three runs over the same echo agent (each prompt answered by UPDATES
``session/update`` notifications and a result), driven by one client that sends
prompts one at a time and waits for each result:

- ``direct``: client → agent, no conductor (the baseline);
- ``conductor-0``: client → ``hopline acp`` → agent;
- ``conductor-N``: client → ``hopline acp`` → N pass-through D5 proxies → agent.

Reported: the conductor's CPU time (user+sys, from the OS, measured over the
timed prompts only) divided by the messages it routed, and the latency it adds
per hop. A routed message is one message the conductor delivered on one hop:
per prompt, (N+1) request hops + (N+1) × UPDATES update hops + (N+1) result
hops. Target (issue 7): ≤ 50 µs CPU per routed message.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import orjson
import psutil

HERE = Path(__file__).resolve().parent
PY = sys.executable


class Client:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0

    @classmethod
    async def start(cls, argv: list[str], env: dict[str, str]) -> Client:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env={**os.environ, **env}, limit=1 << 24
        )
        return cls(process)

    async def call(self, method: str, params: dict) -> tuple[dict, int]:
        self.next_id += 1
        my_id = self.next_id
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params}) + b"\n")
        await self.process.stdin.drain()
        notes = 0
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), 30)
            if not line:
                raise RuntimeError("the peer closed its stdout")
            msg = orjson.loads(line)
            if msg.get("id") == my_id and "method" not in msg:
                return msg, notes
            notes += 1

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except asyncio.TimeoutError:
            self.process.kill()
            await self.process.wait()


async def run(argv: list[str], prompts: int, updates: int, measure_cpu: bool) -> dict:
    client = await Client.start(argv, {"ACP_BENCH_UPDATES": str(updates)})
    try:
        await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        sid = (await client.call("session/new", {"cwd": str(HERE), "mcpServers": []}))[0]["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "bench"}]}
        for _ in range(min(100, prompts)):  # warm-up
            await client.call("session/prompt", prompt)
        proc = psutil.Process(client.process.pid)
        cpu0 = proc.cpu_times()
        rtts = []
        for _ in range(prompts):
            t0 = time.perf_counter()
            answer, notes = await client.call("session/prompt", prompt)
            rtts.append(time.perf_counter() - t0)
            assert notes == updates and answer["result"]["stopReason"] == "end_turn", (notes, answer)
        cpu1 = proc.cpu_times()
    finally:
        await client.close()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {"prompts": prompts, "rtt_median_us": statistics.median(rtts) * 1e6, "rtt_p99_us": sorted(rtts)[int(len(rtts) * 0.99) - 1] * 1e6, "cpu_s": cpu if measure_cpu else None}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--proxies", type=int, default=3)
    parser.add_argument("--out", help="also write the JSON result here")
    args = parser.parse_args()
    agent = f"{PY} {HERE / 'echo_agent.py'}"
    proxies = [f"{PY} {HERE / 'passthrough_proxy.py'}"] * args.proxies
    conductor = [PY, "-m", "hopline.acp", "--dialect", "d5", "--"]
    direct = await run([PY, str(HERE / "echo_agent.py")], args.prompts, args.updates, False)
    zero = await run([*conductor, agent], args.prompts, args.updates, True)
    chain = await run([*conductor, *proxies, agent], args.prompts, args.updates, True)
    hops = args.proxies + 1
    routed = args.prompts * hops * (args.updates + 2)
    routed_zero = args.prompts * (args.updates + 2)
    result = {
        "prompts": args.prompts,
        "updates_per_prompt": args.updates,
        "proxies": args.proxies,
        "routed_messages": routed,
        "cpu_us_per_routed_message": chain["cpu_s"] * 1e6 / routed,
        "cpu_us_per_routed_message_no_proxies": zero["cpu_s"] * 1e6 / routed_zero,
        "rtt_median_us": {"direct": direct["rtt_median_us"], "conductor_0": zero["rtt_median_us"], f"conductor_{args.proxies}": chain["rtt_median_us"]},
        "rtt_p99_us": {"direct": direct["rtt_p99_us"], "conductor_0": zero["rtt_p99_us"], f"conductor_{args.proxies}": chain["rtt_p99_us"]},
        # one conductor traversal is a hop in and a hop out of the conductor, each way
        "added_latency_per_hop_us": (zero["rtt_median_us"] - direct["rtt_median_us"]) / 2,
        "target_cpu_us_per_routed_message": 50,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    asyncio.run(main())
