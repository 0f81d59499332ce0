"""Child processes under abandoned and concurrent sessions (issue 12).

    python bench/run_children.py                      # every target: default, shared, isolated, relay, relay-shared
    python bench/run_children.py --targets isolated --abandoned 100 --concurrent 60
    python bench/run_children.py --targets default,shared --abandoned 0 --concurrent 100 --principals 10

Against ``hopline serve`` with 3 stdio backends (``python -m hopline.demo``), and against
``hopline relay`` over one: first ``--abandoned`` handshake-era sessions that initialize,
list tools and leave without DELETE (what a one-shot Inspector call does), then
``--concurrent`` new sessions at once, each initializing and calling ``echo`` on every
backend. A thread samples the target's process tree with psutil every 20 ms: the peak
number of children and the peak RSS of the target plus its children. Reported per target:
those peaks, the p50/p95 of ``initialize`` in the concurrent phase (warm: the backends
were used before), and how many of the calls succeeded (and the first error otherwise).

Targets: ``default`` (no ``share`` set: ``share: principal``, a child per backend, principal and
client-capability set, shared by that principal's sessions), ``shared`` (``stateless: true`` backends: one child per backend serves every
session), ``everyone`` (``share: shared``, the default before issue 28: one child per backend
and capability set for every principal), ``isolated`` (``share: isolated``: a child per session from a pool of at most
8, 1 spare, idle sessions parked), ``relay`` (``hopline relay -- CMD``: a child per session,
at most 8) and ``relay-shared`` (``--shared``). The goals: peak <= 24 children and <= 600
MB, warm initialize p50 <= 0.3 s, every session able to call every backend.

``--principals N`` turns on API-key authentication with N keys; session i presents key
``i mod N`` (so 100 sessions of 10 principals is ``--concurrent 100 --principals 10``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import orjson
import psutil

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
BACKENDS = ("a", "b", "c")


def keys(principals: int) -> list[str]:
    return [f"bench-principal-{n:04d}-key" for n in range(principals)]


MAX_CHILDREN = 0  # --max-children: each backend's cap (0: hopline's default)
OPENING = 16  # sessions being initialized at once (hopline's listen.max_pending_sessions)


def config(kind: str, principals: int = 0) -> str:
    extra = {"default": "", "shared": "    stateless: true\n", "everyone": "    share: shared\n", "isolated": "    share: isolated\n"}[kind]
    auth = ""
    if principals:
        auth = "auth:\n  resource: http://127.0.0.1/mcp\n  api_keys:\n" + "".join(f"    - {{name: p{n}, key: {k}}}\n" for n, k in enumerate(keys(principals)))
    if MAX_CHILDREN:
        extra += f"    max_children: {MAX_CHILDREN}\n"
    text = auth + "routing:\n  health_interval: 0\nbackends:\n" + "".join(f"  {b}:\n    command: {PY}\n    args: [-m, hopline.demo]\n{extra}" for b in BACKENDS)
    fd, path = tempfile.mkstemp(suffix=".yaml", prefix=f"children-{kind}-")
    os.write(fd, text.encode())
    os.close(fd)
    return path


def start(target: str, principals: int = 0) -> tuple[subprocess.Popen, str, tuple[str, ...]]:
    if target in ("default", "shared", "everyone", "isolated"):
        argv = [PY, "-m", "hopline", "serve", config(target, principals), "--port", "0"]
        tools = tuple(f"{b}__echo" for b in BACKENDS)
    else:
        argv = [PY, "-m", "hopline", "relay", "--port", "0", *(["--shared"] if target == "relay-shared" else []), "--", PY, "-m", "hopline.demo"]
        tools = ("echo",)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode("utf-8", "replace")
        match = re.search(r"at (http://\S+) \(Streamable HTTP\)", line)
        if match:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # keep draining
            return proc, match.group(1), tools
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit(f"{target}: did not start")


class Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.peak_children = 0
        self.peak_rss = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                kids = [p for p in self.root.children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
                rss = self.root.memory_info().rss
                for p in kids:
                    try:
                        rss += p.memory_info().rss
                    except psutil.NoSuchProcess:
                        pass
            except psutil.NoSuchProcess:
                return
            self.peak_children = max(self.peak_children, len(kids))
            self.peak_rss = max(self.peak_rss, rss)
            self.stop.wait(0.02)


def messages(response: httpx.Response) -> list[dict]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [orjson.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return [response.json()] if response.content else []


async def rpc(http: httpx.AsyncClient, url: str, sid: str | None, msg_id: int, method: str, params: dict, key: str | None = None) -> tuple[dict, httpx.Response]:
    headers = {**HEADERS, **({"mcp-session-id": sid} if sid else {}), **({"x-api-key": key} if key else {})}
    try:
        r = await http.post(url, content=orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}), headers=headers)
    except httpx.HTTPError as exc:  # counted as a failed call, with its kind
        return {"error": {"message": f"{type(exc).__name__} {exc}"}}, httpx.Response(599)
    answer = next((m for m in messages(r) if m.get("id") == msg_id), {"error": {"message": f"HTTP {r.status_code}"}})
    return answer, r


async def open_session(http: httpx.AsyncClient, url: str, key: str | None = None) -> tuple[str | None, float, str | None]:
    t0 = time.perf_counter()
    answer, r = await rpc(http, url, None, 1, "initialize", INIT, key)
    took = time.perf_counter() - t0
    sid = r.headers.get("mcp-session-id")
    if "result" not in answer or sid is None:
        return None, took, str(answer.get("error", {}).get("message"))
    try:
        await http.post(url, content=orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers={**HEADERS, "mcp-session-id": sid, **({"x-api-key": key} if key else {})})
    except httpx.HTTPError as exc:
        return None, took, f"{type(exc).__name__} {exc}"
    return sid, took, None


async def abandoned(http: httpx.AsyncClient, url: str, key: str | None = None) -> None:
    sid, _took, _err = await open_session(http, url, key)
    if sid is not None:
        await rpc(http, url, sid, 2, "tools/list", {}, key)  # and never DELETE


async def working(http: httpx.AsyncClient, url: str, tools: tuple[str, ...], key: str | None = None, gate: asyncio.Semaphore | None = None) -> tuple[float, int, int, str | None]:
    async with gate or contextlib.nullcontext():  # as many initializes at once as hopline admits
        sid, took, err = await open_session(http, url, key)
    if sid is None:
        return took, 0, len(tools), err
    ok, first_error = 0, None
    for n, tool in enumerate(tools):
        answer, _ = await rpc(http, url, sid, 10 + n, "tools/call", {"name": tool, "arguments": {"text": "hi"}}, key)
        if "result" in answer and not answer["result"].get("isError"):
            ok += 1
        elif first_error is None:
            first_error = str(answer.get("error", answer.get("result")))[:160]
    try:
        await http.delete(url, headers={"mcp-session-id": sid, **({"x-api-key": key} if key else {})})
    except httpx.HTTPError:
        pass
    return took, ok, len(tools), first_error


async def run_target(target: str, n_abandoned: int, n_concurrent: int, principals: int = 0) -> dict:
    proc, url, tools = start(target, principals)
    pool = keys(principals) if target in ("default", "shared", "everyone", "isolated") else []

    def key(n: int) -> str | None:
        return pool[n % len(pool)] if pool else None

    sampler = Sampler(proc.pid)
    sampler.start()
    try:
        limits = httpx.Limits(max_connections=n_concurrent + 10, max_keepalive_connections=n_concurrent + 10)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            gate = asyncio.Semaphore(10)

            async def one_abandoned(n: int) -> None:
                async with gate:
                    await abandoned(http, url, key(n))

            t0 = time.perf_counter()
            await asyncio.gather(*(one_abandoned(n) for n in range(n_abandoned)))
            abandoned_s = time.perf_counter() - t0
            after_abandoned = sampler.peak_children
            t0 = time.perf_counter()
            opening = asyncio.Semaphore(OPENING)
            results = await asyncio.gather(*(working(http, url, tools, key(n), opening) for n in range(n_concurrent)))
            concurrent_s = time.perf_counter() - t0
    finally:
        sampler.stop.set()
        sampler.join(2)
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    inits = sorted(r[0] for r in results)
    ok = sum(r[1] for r in results)
    total = sum(r[2] for r in results)
    errors = [r[3] for r in results if r[3]]
    return {
        "target": target, "peak_children": sampler.peak_children, "children_after_abandoned": after_abandoned, "peak_rss_mb": sampler.peak_rss / 2**20,
        "init_p50": statistics.median(inits), "init_p95": inits[int(0.95 * (len(inits) - 1))], "calls_ok": ok, "calls": total,
        "abandoned_s": abandoned_s, "concurrent_s": concurrent_s, "first_error": errors[0] if errors else "",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--targets", default="default,shared,isolated,relay,relay-shared",
                        help="comma-separated: default, shared, isolated, relay, relay-shared (default: all)")
    parser.add_argument("--abandoned", type=int, default=100, help="sessions opened and left without DELETE (default: 100)")
    parser.add_argument("--concurrent", type=int, default=60, help="new sessions at once afterwards, each calling every backend (default: 60)")
    parser.add_argument("--principals", type=int, default=0, help="serve targets: API-key auth with this many keys, sessions spread over them (default: 0, no auth)")
    parser.add_argument("--max-children", type=int, default=0, help="serve targets: each backend's max_children (default: hopline's)")
    args = parser.parse_args()
    global MAX_CHILDREN
    MAX_CHILDREN = args.max_children
    rows = []
    for target in args.targets.split(","):
        rows.append(asyncio.run(run_target(target, args.abandoned, args.concurrent, args.principals)))
        print(f"{target}: done", rows[-1], file=sys.stderr, flush=True)
    print("| target | peak children | children after abandoned | peak RSS MB | warm initialize p50 / p95 s | calls ok | phase times s | first error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['target']} | {r['peak_children']} | {r['children_after_abandoned']} | {r['peak_rss_mb']:.0f} | {r['init_p50']:.3f} / {r['init_p95']:.3f} | "
              f"{r['calls_ok']}/{r['calls']} | {r['abandoned_s']:.1f} + {r['concurrent_s']:.1f} | {r['first_error']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
