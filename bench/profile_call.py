"""Deterministic cost of one proxied ``tools/call`` through ``hopline serve`` (issue 14 item 6).

    PYTHONPATH=src .venv/bin/python bench/profile_call.py                 # 500 calls, JSON backend
    PYTHONPATH=src .venv/bin/python bench/profile_call.py --sse -n 1000   # the backend answers SSE
    PYTHONPATH=src .venv/bin/python bench/profile_call.py --top 40 --sort tottime

Independent of machine load: it counts, it does not time. Setup as in
``bench/run_gateway.py --parts calls`` (target ``hopline``): the SDK echo backend
(bench/echo_server.py http, stateful; JSON responses, or SSE with ``--sse``) and ``hopline
serve`` with one ``url`` backend ``e`` at ``--log-level warning`` (``--log-level info``
turns the request log line on). hopline runs as a child of this script under a small
wrapper that switches ``cProfile`` on at SIGUSR1 and off (writing the stats) at SIGUSR2,
so only the measured calls are profiled and the client's own cost is not in them.
``--cpu`` runs the same calls without the profiler and prints hopline's CPU-ms per call
(``/proc/self/task/*/schedstat``): a quick orientation, but that one depends on machine load.
``--src`` runs other sources, e.g. ``git archive <commit> src | tar -x -C /tmp/old`` then
``--src /tmp/old/src``, for a before/after comparison on the same machine state.

The client is bench/loadgen.py's own ``Client`` (one session, one keep-alive connection,
handshake-era, sequential calls): ``--warmup`` calls, then profiling on, ``-n`` calls,
profiling off. Printed: Python function calls per request (cProfile's total, builtins
included; uvloop's own methods are Cython and invisible to it), a few counters per request
(tasks created, through a counting task factory; ``asyncio.timeout`` contexts; ``select()``
probes; log records; read and write syscalls from ``/proc/self/io``), and the top ``--top`` entries by cumulative time
(time under cProfile is inflated; the counts are the figure to compare). The per-request
figures vary by a call or two with event-loop wake-ups; compare them over several hundred calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable

# (label, predicate on a pstats key (file, line, name)) counted per request
# uvloop's own methods (Cython) are invisible to cProfile, hence the task factory and /proc/self/io.
COUNTERS = {
    "asyncio.timeout contexts": lambda f, n: n == "__aenter__" and f.endswith("asyncio/timeouts.py"),
    "select() probes": lambda f, n: n == "<built-in method select.select>",
    "log records made": lambda f, n: n == "makeRecord" and f.endswith("logging/__init__.py") or n == "_record" and f.endswith("observability/logs.py"),
}
FACTORY = "_counting_task_factory"


def _serve_child(stats_path: str, ready_path: str, argv: list[str]) -> int:
    """The hopline process: its CLI, with cProfile switched by SIGUSR1/SIGUSR2."""
    import cProfile

    import asyncio

    prof = cProfile.Profile()
    io: dict[str, int] = {}
    tasks = [0]

    def _counting_task_factory(loop, coro, **kw):  # noqa: ANN001  (named FACTORY: its calls are subtracted)
        tasks[0] += 1
        return asyncio.Task(coro, loop=loop, **kw)

    def proc_io() -> dict[str, int]:
        return {k: int(v) for k, v in (line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())}

    profiling = os.environ.get("HOPLINE_PROFILE_CPU_ONLY") != "1"

    def cpu_ns() -> int:  # this process's threads, user + system, from the scheduler
        return sum(int((t / "schedstat").read_text().split()[0]) for t in Path("/proc/self/task").iterdir())

    def ticks() -> tuple[int, int]:  # user, system (clock ticks)
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        return int(fields[11]), int(fields[12])

    def on(_sig, _frm) -> None:
        asyncio.get_running_loop().set_task_factory(_counting_task_factory)  # the handler runs inside the loop
        io.update(proc_io())
        io["utime"], io["stime"] = ticks()
        tasks[0] = 0
        io["cpu"] = cpu_ns()
        if profiling:
            prof.enable()
        Path(ready_path).write_text("on")

    def off(_sig, _frm) -> None:
        prof.disable()
        cpu = cpu_ns() - io["cpu"]
        utime, stime = ticks()
        after = proc_io()
        asyncio.get_running_loop().set_task_factory(None)
        prof.dump_stats(stats_path)
        extra = {"tasks": tasks[0], "read_syscalls": after["syscr"] - io["syscr"], "write_syscalls": after["syscw"] - io["syscw"], "cpu_ns": cpu, "user_ticks": utime - io["utime"], "system_ticks": stime - io["stime"]}
        Path(stats_path + ".json").write_text(json.dumps(extra))
        Path(ready_path).write_text("off")

    signal.signal(signal.SIGUSR1, on)
    signal.signal(signal.SIGUSR2, off)
    from hopline.cli import main

    sys.argv = ["hopline", *argv]
    return main()


def _wait_file(path: Path, text: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text() == text:
            return
        time.sleep(0.01)
    raise RuntimeError(f"{path} never said {text!r}")


def _wait_port(port: int, timeout: float = 30.0) -> None:
    import socket

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _drive(url: str, n: int, warmup: int, child: subprocess.Popen, ready: Path, strace: Path | None = None) -> None:
    sys.path.insert(0, str(BENCH))
    import loadgen

    stats = loadgen.Stats()
    cl = loadgen.Client(0, url, "legacy", stats, 16, tool="e__echo")
    await cl.conn.connect()
    await cl.handshake()
    for _ in range(warmup):
        if not await cl.call_once(False):
            raise RuntimeError(f"warm-up call failed: {stats.errors}")
    tracer = None
    if strace is not None:  # counts every syscall of hopline's process during the calls (slows it, counts stay)
        tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(strace), "-p", str(child.pid)], stderr=subprocess.DEVNULL)
        await asyncio.sleep(1.0)  # strace attaches asynchronously; a bench, not a test
    child.send_signal(signal.SIGUSR1)
    await asyncio.to_thread(_wait_file, ready, "on")
    for _ in range(n):
        if not await cl.call_once(True):
            raise RuntimeError(f"call failed: {stats.errors}")
    if tracer is not None:
        tracer.send_signal(signal.SIGINT)
        await asyncio.to_thread(tracer.wait, 30)
    child.send_signal(signal.SIGUSR2)
    await asyncio.to_thread(_wait_file, ready, "off")
    await cl.goodbye()
    await cl.conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=500, help="profiled calls (default 500)")
    p.add_argument("--warmup", type=int, default=200, help="calls before profiling (default 200)")
    p.add_argument("--sse", action="store_true", help="the backend answers with text/event-stream")
    p.add_argument("--log-level", default="warning", help="hopline's --log-level (info: request log lines on)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--sort", default="cumulative", help="pstats sort key (cumulative, tottime, ncalls)")
    p.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    p.add_argument("--src", default=str(REPO / "src"), help="the hopline sources to run (default: this checkout's src), e.g. an older commit's, exported")
    p.add_argument("--strace", action="store_true", help="also count hopline's syscalls per call with strace -c (needs strace)")
    p.add_argument("--cpu", action="store_true", help="no profiler: print hopline's CPU-ms per call instead (schedstat; depends on machine load)")
    args = p.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="hopline-profile-"))
    bport, gport = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(args.src).resolve()), os.environ.get("PYTHONPATH", "")])}
    if args.cpu:
        env["HOPLINE_PROFILE_CPU_ONLY"] = "1"
    backend_cmd = [PY, str(BENCH / "echo_server.py"), "http", "--port", str(bport)] + (["--sse"] if args.sse else [])
    cfg = {"version": 1, "name": "bench-gateway", "listen": {"host": "127.0.0.1", "port": gport, "max_sessions": 10000},
           "backends": {"e": {"url": f"http://127.0.0.1:{bport}/mcp"}}}  # fmt: skip
    (tmp / "hopline.json").write_text(json.dumps(cfg))
    stats_path, ready = tmp / "calls.pstats", tmp / "ready"
    hopline_argv = ["--log-level", args.log_level, "serve", str(tmp / "hopline.json"), "--port", str(gport), "--host", "127.0.0.1"]
    procs: list[subprocess.Popen] = []
    try:
        with open(tmp / "backend.log", "wb") as blog, open(tmp / "hopline.log", "wb") as hlog:
            procs.append(subprocess.Popen(backend_cmd, cwd=REPO, env=env, stdout=blog, stderr=subprocess.STDOUT))
            _wait_port(bport)
            child = subprocess.Popen([PY, __file__, "_serve", str(stats_path), str(ready), *hopline_argv], cwd=REPO, env=env, stdout=hlog, stderr=subprocess.STDOUT)
            procs.append(child)
            _wait_port(gport)
            asyncio.run(_drive(f"http://127.0.0.1:{gport}/mcp", args.n, args.warmup, child, ready, tmp / "strace.txt" if args.strace else None))
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()

    n = args.n
    extra = json.loads(Path(str(stats_path) + ".json").read_text())
    if args.cpu:
        print(f"{n} proxied tools/call (backend answers {'sse' if args.sse else 'json'}): hopline CPU {extra['cpu_ns'] / n / 1e6:.3f} ms per call, "
              f"({100 * extra['system_ticks'] / max(1, extra['user_ticks'] + extra['system_ticks']):.0f}% of it in the kernel), "
              f"{extra['tasks'] / n:.2f} tasks, {extra['write_syscalls'] / n:.2f} write / {extra['read_syscalls'] / n:.2f} read syscalls per call")  # fmt: skip
        return 0
    st = pstats.Stats(str(stats_path))
    own = sum(v[1] for (_f, _line, name), v in st.stats.items() if name == FACTORY)
    figures = {"calls": n, "backend": "sse" if args.sse else "json", "log_level": args.log_level,
               "function_calls_per_request": round((st.total_calls - own) / n, 1), "primitive_calls_per_request": round((st.prim_calls - own) / n, 1),
               "tasks created": round(extra["tasks"] / n, 2)}  # fmt: skip
    for label, pred in COUNTERS.items():
        count = sum(v[1] for (f, _line, name), v in st.stats.items() if pred(f, name))
        figures[label] = round(count / n, 2)
    figures["write syscalls (/proc/self/io syscw)"] = round(extra["write_syscalls"] / n, 2)
    figures["read syscalls (/proc/self/io syscr)"] = round(extra["read_syscalls"] / n, 2)
    print(f"{n} proxied tools/call (backend answers {figures['backend']}, hopline --log-level {args.log_level}):")
    print(f"  function calls per request: {figures['function_calls_per_request']} (primitive {figures['primitive_calls_per_request']};"
          " cProfile counts every resumption of a coroutine as a call)")  # fmt: skip
    for label in ["tasks created", *COUNTERS, "write syscalls (/proc/self/io syscw)", "read syscalls (/proc/self/io syscr)"]:
        print(f"  {label} per request: {figures[label]}")
    if args.strace:
        print("  syscalls per request (strace -c):")
        for line in (tmp / "strace.txt").read_text().splitlines():
            f = line.split()
            if len(f) >= 5 and f[3].isdigit() and f[-1] != "total":
                calls = int(f[3])
                print(f"    {f[-1]:<16} {calls / n:6.2f}")
                figures[f"syscall {f[-1]}"] = round(calls / n, 2)
    print()
    st.sort_stats(args.sort).print_stats(args.top)
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        sys.exit(_serve_child(sys.argv[2], sys.argv[3], sys.argv[4:]))
    sys.exit(main())
