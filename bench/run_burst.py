"""Burst of session creations (issue 12): N concurrent `initialize` against a fresh hopline.

    python bench/run_burst.py                          # 500 initializes, against relay and serve
    python bench/run_burst.py -n 200 --targets relay --hopline-arg=--max-pending-sessions=16
    python bench/run_burst.py --targets serve --listen max_pending_sessions=32 --json

Targets (each started fresh, on a free port, from this checkout's src/):
  relay   `hopline relay` in front of `python -m hopline.demo` (a child per session)
  serve   `hopline serve` (forward mode) with three stdio `python -m hopline.demo` backends

For each target the N requests leave at once (one connection each). Every answer is
classified: answered (HTTP 200 with an initialize result), shed (HTTP 503 with
Retry-After: the admission bound), failed (anything else: a JSON-RPC error such as a
handshake timeout, another status, a reset, or no answer within --client-timeout).
Meanwhile /healthz is probed every 0.25 s (its slowest answer and its failures are
reported), and the target's process tree is sampled (the peak number of processes).
After the burst, one fresh client initializes and lists tools; its time is reported.
The figures depend on the machine; compare targets and settings in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import orjson
import psutil

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def init_body(msg_id: int) -> bytes:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "burst", "version": "1"}}
    return orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params})


@dataclass
class Result:
    target: str
    n: int
    answered: int = 0
    shed: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    first_answer_s: float | None = None
    last_answer_s: float | None = None
    healthz_worst_s: float = 0.0
    healthz_failures: int = 0
    peak_processes: int = 0
    fresh_client_s: float | None = None
    fresh_client: str = ""


def start(target: str, args: argparse.Namespace, workdir: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    if target == "relay":
        argv = [PY, "-m", "hopline", "relay", "--port", "0", *args.hopline_arg]
    else:
        listen: dict[str, object] = {"port": 0}
        for item in args.listen:
            key, _, value = item.partition("=")
            listen[key] = json.loads(value)
        demo = {"command": PY, "args": ["-m", "hopline.demo"]}
        config = {"listen": listen, "backends": {name: dict(demo) for name in ("one", "two", "three")}}
        path = workdir / "burst.json"
        path.write_text(json.dumps(config))
        argv = [PY, "-m", "hopline", "serve", str(path), *args.hopline_arg]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)


def wait_url(proc: subprocess.Popen, timeout: float = 60.0) -> str:
    found: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            m = re.search(r"at (http://\S+) \(Streamable HTTP\)", raw.decode("utf-8", "replace"))
            if m and not found:
                found.append(m.group(1))
                ready.set()

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(timeout):
        raise SystemExit(f"the target did not announce its URL within {timeout:g} s")
    return found[0]


def classify(r: httpx.Response) -> str:
    if r.status_code == 503 and "retry-after" in r.headers:
        return "shed"
    if r.status_code == 200:
        try:
            body = r.json()
        except ValueError:
            return "failed:200 not JSON"
        if "result" in body:
            return "answered"
        return f"failed:JSON-RPC {body.get('error', {}).get('code')}"
    return f"failed:HTTP {r.status_code}"


async def one(http: httpx.AsyncClient, url: str, msg_id: int, t0: float, out: Result, timeout: float) -> None:
    try:
        r = await http.post(url, content=init_body(msg_id), headers=HEADERS, timeout=timeout)
        kind = classify(r)
    except httpx.TimeoutException:
        kind = f"failed:no answer in {timeout:g} s"
    except httpx.HTTPError as exc:
        kind = f"failed:{type(exc).__name__}"
    now = time.perf_counter() - t0
    if not kind.startswith("failed:no answer"):
        out.first_answer_s = now if out.first_answer_s is None else min(out.first_answer_s, now)
        out.last_answer_s = now if out.last_answer_s is None else max(out.last_answer_s, now)
    if kind == "answered":
        out.answered += 1
    elif kind == "shed":
        out.shed += 1
    else:
        out.failed += 1
        reason = kind.split(":", 1)[1]
        out.failures[reason] = out.failures.get(reason, 0) + 1


async def probe(base: str, out: Result, stop: asyncio.Event) -> None:
    async with httpx.AsyncClient() as http:
        while not stop.is_set():
            t = time.perf_counter()
            try:
                r = await http.get(base + "/healthz", timeout=10)
                ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            out.healthz_worst_s = max(out.healthz_worst_s, time.perf_counter() - t)
            out.healthz_failures += not ok
            with_timeout = asyncio.ensure_future(stop.wait())
            await asyncio.wait([with_timeout], timeout=0.25)
            with_timeout.cancel()


async def sample(pid: int, out: Result, stop: asyncio.Event) -> None:
    root = psutil.Process(pid)
    while not stop.is_set():
        try:
            out.peak_processes = max(out.peak_processes, 1 + len(root.children(recursive=True)))
        except psutil.Error:
            pass
        await asyncio.sleep(0.1)


async def fresh(url: str, out: Result, timeout: float) -> None:
    t = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=timeout) as http:
            r = await http.post(url, content=init_body(1), headers=HEADERS)
            if classify(r) != "answered":
                out.fresh_client = classify(r)
                return
            sid = r.headers["mcp-session-id"]
            h = {**HEADERS, "mcp-session-id": sid}
            await http.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=h)
            listed = await http.post(url, content=b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}', headers=h)
            tools = listed.json().get("result", {}).get("tools", [])
            out.fresh_client = f"ok ({len(tools)} tools)"
            out.fresh_client_s = time.perf_counter() - t
    except (httpx.HTTPError, ValueError) as exc:
        out.fresh_client = f"failed: {type(exc).__name__}"


async def run_target(target: str, args: argparse.Namespace) -> Result:
    out = Result(target, args.n)
    with tempfile.TemporaryDirectory() as tmp:
        proc = start(target, args, Path(tmp))
        try:
            url = wait_url(proc)
            base = url.rsplit("/", 1)[0]
            stop = asyncio.Event()
            watchers = [asyncio.ensure_future(probe(base, out, stop)), asyncio.ensure_future(sample(proc.pid, out, stop))]
            limits = httpx.Limits(max_connections=args.n, max_keepalive_connections=0)
            async with httpx.AsyncClient(limits=limits) as http:
                t0 = time.perf_counter()
                await asyncio.gather(*(one(http, url, i, t0, out, args.client_timeout) for i in range(args.n)))
            await fresh(url, out, args.client_timeout)
            stop.set()
            await asyncio.gather(*watchers)
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    return out


def show(results: list[Result]) -> None:
    def s(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    head = f"{'target':<7} {'n':>5} {'answered':>8} {'shed':>5} {'failed':>6} {'first s':>8} {'last s':>7} "
    print(head + f"{'healthz worst s':>15} {'healthz fails':>13} {'peak procs':>10} {'fresh s':>8}  fresh / failures")
    for r in results:
        print(
            f"{r.target:<7} {r.n:>5} {r.answered:>8} {r.shed:>5} {r.failed:>6} {s(r.first_answer_s):>8} {s(r.last_answer_s):>7} {r.healthz_worst_s:>15.2f} "
            f"{r.healthz_failures:>13} {r.peak_processes:>10} {s(r.fresh_client_s):>8}  {r.fresh_client}; {r.failures or ''}"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=500, help="concurrent initialize requests (default: 500)")
    p.add_argument("--targets", default="relay,serve", help="comma-separated: relay, serve (default: both)")
    p.add_argument("--client-timeout", type=float, default=30.0, metavar="S", help="a request unanswered this long counts as failed (default: 30)")
    p.add_argument("--hopline-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for the hopline command (repeatable), e.g. --hopline-arg=--max-pending-sessions=16")
    p.add_argument("--listen", action="append", default=[], metavar="KEY=JSON",
                   help="serve: a listen: setting (repeatable), e.g. --listen max_pending_sessions=32")
    p.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = p.parse_args()
    results = [asyncio.run(run_target(t.strip(), args)) for t in args.targets.split(",") if t.strip()]
    show(results)
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
