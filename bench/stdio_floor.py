"""The stdio floor: drive bench/echo_server.py over its own stdio, no HTTP and no relay.

    python bench/stdio_floor.py -c 16 --duration 5            # one window, human summary on stderr
    python bench/stdio_floor.py -c 16 --serve --markers --json  # used by run_relay.py --floor
    python bench/stdio_floor.py --command '["hopline", "relay", "--stdio", "http://127.0.0.1:8801/mcp"]'  # a stdio client of a relay

One backend process, ``c`` virtual clients keeping one request each in flight over the same
pipe (what a relay with one shared backend does at best). Its req/s and latency are the ceiling
for any relay that fronts ONE stdio backend, and its backend CPU-ms/req is what the stdio
variant of the SDK server costs by itself. Same window protocol and JSON keys as loadgen.py.

``--command`` (a JSON list) drives another stdio MCP server the same way instead, e.g.
``hopline relay --stdio URL`` (a stdio client's relay to a Streamable HTTP server, which is
how bench/run_gateway.py measures that relay); its pid is in the ``#READY`` line
(``child_pid``) and its stderr goes to ``--child-log``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from loadgen import LEGACY_VERSION, MODERN_VERSION, dumps, loads, summarize  # noqa: E402


class Floor:
    def __init__(self, era: str, payload: int, command: list[str] | None = None, tool: str = "echo", child_log: str | None = None):
        self.era = era
        self.command = command or [sys.executable, str(BENCH / "echo_server.py"), "stdio"]
        self.tool = tool
        self.child_log = child_log
        self.pad = "x" * max(0, payload - 16)
        self.pending: dict[int, asyncio.Future] = {}
        self.next_id = 1
        self.proc: asyncio.subprocess.Process | None = None
        self.reader_task: asyncio.Task | None = None

    async def start(self) -> None:
        err = open(self.child_log, "ab") if self.child_log else None
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err, limit=1 << 22,
            )  # fmt: skip
        finally:
            if err is not None:
                err.close()
        self.reader_task = asyncio.create_task(self._read())
        if self.era == "legacy":
            r = await self.request(
                {"method": "initialize", "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "floor", "version": "1"}}}
            )
            if "result" not in r:
                raise RuntimeError(f"initialize failed: {r}")
            self.proc.stdin.write(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n")

    async def _read(self) -> None:
        out = self.proc.stdout
        while True:
            line = await out.readline()
            if not line:
                break
            msg = loads(line)
            fut = self.pending.pop(msg.get("id"), None) if isinstance(msg, dict) else None
            if fut is not None and not fut.done():
                fut.set_result(msg)
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("backend closed stdout"))

    async def request(self, msg: dict) -> dict:
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, **msg}
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        self.proc.stdin.write(dumps(msg) + b"\n")
        return await fut

    async def close(self) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self.reader_task:
            self.reader_task.cancel()


async def window(fl: Floor, args, warmup: float, duration: float) -> dict:
    st = {"ok": 0, "errors": 0, "lat": [], "samples": [], "record": False, "stop": False}

    async def worker(idx: int) -> None:
        seq = 0
        while not st["stop"]:
            seq += 1
            text = f"c{idx}-{seq}-{fl.pad}"
            params: dict = {"name": fl.tool, "arguments": {"text": text}}
            if fl.era != "legacy":
                params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
            rec = st["record"]
            t0 = time.perf_counter_ns()
            try:
                r = await fl.request({"method": "tools/call", "params": params})
            except ConnectionError as e:
                st["errors"] += 1
                st["samples"].append(str(e))
                return
            t1 = time.perf_counter_ns()
            res = r.get("result") or {}
            ok = not res.get("isError") and (res.get("content") or [{}])[0].get("text") == text
            if rec:
                if ok:
                    st["ok"] += 1
                    st["lat"].append((t1 - t0) // 1000)
                else:
                    st["errors"] += 1
                    if len(st["samples"]) < 5:
                        st["samples"].append(str(r)[:200])

    tasks = [asyncio.create_task(worker(i)) for i in range(args.concurrency)]
    await asyncio.sleep(warmup)
    if args.markers:
        print("#MEASURE_START", flush=True)
    st["lat"].clear()
    t0, c0 = time.perf_counter(), time.process_time()
    st["record"] = True
    await asyncio.sleep(duration)
    st["stop"] = True
    t1, c1 = time.perf_counter(), time.process_time()
    if args.markers:
        print("#MEASURE_END", flush=True)
    n = st["ok"]
    await asyncio.wait(tasks, timeout=30)
    res = summarize(st["lat"], n, t1 - t0)
    res.update(
        {
            "url": "stdio", "era": args.era, "concurrency": args.concurrency, "errors": st["errors"],
            "error_samples": st["samples"], "reconnects": 0, "rehandshakes": 0, "sse_left_open": 0,
            "sse_responses": 0, "json_responses": n, "loadgen_cpu_s": c1 - c0,
            "loadgen_cpu_ms_per_req": (c1 - c0) * 1000 / n if n else None,
            "loadgen_cpu_util": (c1 - c0) / (t1 - t0),
        }
    )  # fmt: skip
    if args.samples:
        res["latencies_us"] = st["lat"]
    return res


async def amain(args) -> int:
    fl = Floor(args.era, args.payload, json.loads(args.command) if args.command else None, args.tool, args.child_log)
    t0 = time.perf_counter()
    await fl.start()
    info = {"setup_s": time.perf_counter() - t0, "child_pid": fl.proc.pid}
    gc.collect()
    gc.freeze()
    try:
        if not args.serve:
            res = await window(fl, args, args.warmup, args.duration)
            res.update(info)
            if args.json:
                print(dumps(res).decode(), flush=True)
            print(
                f"stdio floor: {args.era} c={args.concurrency} {res['rps']:.0f} req/s, p50 {res['p50_ms']:.3f} ms, "
                f"p99 {res['p99_ms']:.3f} ms, errors {res['errors']}",
                file=sys.stderr,
            )
            return 0
        print("#READY " + dumps(info).decode(), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            words = (await loop.run_in_executor(None, sys.stdin.readline)).split()
            if not words or words[0] == "QUIT":
                return 0
            if words[0] == "RUN":
                res = await window(fl, args, float(words[1]), float(words[2]))
                print(dumps(res).decode(), flush=True)
    finally:
        await fl.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--concurrency", type=int, default=1)
    p.add_argument("--era", choices=["legacy", "2026"], default="legacy")
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--payload", type=int, default=32)
    p.add_argument("--serve", action="store_true")
    p.add_argument("--markers", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--samples", action="store_true")
    p.add_argument("--setup-timeout", type=float, default=60.0, help="accepted for loadgen.py compatibility")
    p.add_argument("--url", default=None, help="ignored (loadgen.py compatibility)")
    p.add_argument("--command", default=None, help="the stdio server to drive, as a JSON list (default: bench/echo_server.py stdio)")
    p.add_argument("--tool", default="echo", help="the echo tool's name there (default echo)")
    p.add_argument("--child-log", default=None, help="file for the driven server's stderr (default: inherited)")
    return asyncio.run(amain(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
