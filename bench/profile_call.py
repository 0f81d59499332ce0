"""Deterministic cost of one proxied ``tools/call`` through ``hopline serve`` (issue 14 item 6).

    PYTHONPATH=src .venv/bin/python bench/profile_call.py                 # 500 calls, JSON backend
    PYTHONPATH=src .venv/bin/python bench/profile_call.py --sse -n 1000   # the backend answers SSE
    PYTHONPATH=src .venv/bin/python bench/profile_call.py --era 2026 --sse   # 2026-07-28 requests, no handshake
    PYTHONPATH=src .venv/bin/python bench/profile_call.py --top 40 --sort tottime

Independent of machine load: it counts, it does not time. Setup as in
``bench/run_gateway.py --parts calls`` (target ``hopline``): the SDK echo backend
(bench/echo_server.py http, stateful; JSON responses, or SSE with ``--sse``) and ``hopline
serve`` with one ``url`` backend ``e`` at ``--log-level warning`` (``--log-level info``
turns the request log line on). hopline runs as a child of this script under a small
wrapper that switches ``cProfile`` on at SIGUSR1 and off (writing the stats) at SIGUSR2,
so only the measured calls are profiled and the client's own cost is not in them.
``--by-module`` runs them under a plain profile hook instead of cProfile and charges every call
(Python and builtin) to the innermost hopline module on the stack: which module's code, with the
stdlib and library calls it makes, costs what share of a request (``modes`` vs ``transports`` ...).
``--critical`` counts only what a client waits through (the latency path, not the CPU total):
the Python and builtin calls from the request's bytes read to the upstream write, and from the
backend's last bytes read to the client write, with the task hand-offs (loop turns) on each.
``--relay`` profiles ``hopline relay --stdio URL`` instead (one stdio client, this script,
relayed to the same backend). ``--cpu`` runs the same calls without the profiler and prints hopline's CPU-ms per call
(``/proc/self/task/*/schedstat``): a quick orientation, but that one depends on machine load.
``--callgrind`` runs hopline under valgrind's callgrind (no profiler) and prints the machine
instructions it ran per call: like the call counts, independent of load, but counting everything
(interpreter, uvloop, parsers); slow under valgrind, so ``-n 200 --warmup 50``.
``--src`` runs other sources, e.g. ``git archive <commit> src | tar -x -C /tmp/old`` then
``--src /tmp/old/src``, for a before/after comparison on the same machine state.

The client is bench/loadgen.py's own ``Client`` (one session, one keep-alive connection,
handshake-era by default or ``--era 2026``, sequential calls): ``--warmup`` calls, then profiling on, ``-n`` calls,
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
from typing import Any

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
    by_module = os.environ.get("HOPLINE_PROFILE_BY_MODULE") in ("1", "function")
    by_function = os.environ.get("HOPLINE_PROFILE_BY_MODULE") == "function"
    owners: dict[str, int] = {}
    if by_module:  # every call (Python and builtin), charged to the innermost hopline frame on the stack
        profiling = False
        marker = os.sep + "hopline" + os.sep
        own: dict[object, str | None] = {}

        def owner_of(code) -> str | None:  # noqa: ANN001
            name = own.get(code, 0)
            if name == 0:
                f = code.co_filename
                i = f.rfind(marker)
                name = own[code] = f[i + len(marker) :].removesuffix(".py") if i >= 0 and os.sep + "bench" + os.sep not in f else None
                if name is not None and by_function:
                    name = own[code] = f"{name}:{code.co_name}"
            return name

        def tracer(frame, event, _arg) -> None:  # noqa: ANN001
            if event != "call" and event != "c_call":
                return
            f = frame
            while f is not None:
                name = owner_of(f.f_code)
                if name is not None:
                    break
                f = f.f_back
            key = name or "(outside hopline)"
            owners[key] = owners.get(key, 0) + 1

    critical = os.environ.get("HOPLINE_PROFILE_CRITICAL") == "1"
    stretch: dict[str, Any] = {"mode": None, "n": 0, "task": None, "turns": 0, "in": [], "out": []}
    if critical:  # calls (and task hand-offs) on the two stretches a client waits through
        profiling = False
        from hopline.transports import front_door, h1client

        # A transport's write is Cython (no profile event): a stretch ends as the Python function
        # that wrote returns (the upstream's _send_once first suspends after its write; the front
        # door's OneWrite.whole/write return after theirs).
        door_code = front_door.FrontDoorProtocol.data_received.__code__
        upstream_code = h1client._Connection.data_received.__code__
        sent_code = h1client.LeanClient._send_once.__code__
        answered = {front_door.OneWrite.whole.__code__, front_door.OneWrite.write.__code__}
        current_task = asyncio.current_task

        def critical_tracer(frame, event, _arg) -> None:  # noqa: ANN001
            mode = stretch["mode"]
            if event == "call":
                code = frame.f_code
                if code is door_code:  # a request's bytes arrive: the inbound stretch starts
                    stretch.update(mode="in", n=0, turns=0, task=None)
                    mode = "in"
                elif code is upstream_code and mode != "in":  # the backend's bytes carrying the answer start it
                    data = frame.f_locals.get("data") or b""
                    if b'"result"' in data or b'"error"' in data:
                        stretch.update(mode="out", n=0, turns=0, task=None)
                        mode = "out"
            elif event == "return" and mode is not None:
                code = frame.f_code
                if mode == "in" and code is sent_code or mode == "out" and code in answered:
                    stretch[mode].append((stretch["n"], stretch["turns"]))
                    stretch["mode"] = None
                return
            elif event != "c_call":
                return
            if mode is not None:
                stretch["n"] += 1
                try:
                    task = current_task()
                except RuntimeError:
                    task = None
                if task is not stretch["task"]:
                    if stretch["task"] is not None:
                        stretch["turns"] += 1
                    stretch["task"] = task

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
        elif by_module:
            owners.clear()
            sys.setprofile(tracer)
        elif critical:
            stretch.update(mode=None, n=0, turns=0, task=None)
            stretch["in"].clear()
            stretch["out"].clear()
            sys.setprofile(critical_tracer)
        Path(ready_path).write_text("on")

    def off(_sig, _frm) -> None:
        prof.disable()
        if by_module or critical:
            sys.setprofile(None)
        cpu = cpu_ns() - io["cpu"]
        utime, stime = ticks()
        after = proc_io()
        asyncio.get_running_loop().set_task_factory(None)
        prof.dump_stats(stats_path)
        extra = {"tasks": tasks[0], "read_syscalls": after["syscr"] - io["syscr"], "write_syscalls": after["syscw"] - io["syscw"], "cpu_ns": cpu, "user_ticks": utime - io["utime"], "system_ticks": stime - io["stime"], "owners": owners,
                 "critical": {"in": stretch["in"], "out": stretch["out"]}}
        Path(stats_path + ".json").write_text(json.dumps(extra))
        Path(ready_path).write_text("off")

    signal.signal(signal.SIGUSR1, on)
    signal.signal(signal.SIGUSR2, off)
    from hopline.cli import main

    sys.argv = ["hopline", *argv]
    return main()


WAIT = 30.0  # seconds to wait for the child (much longer under --callgrind)
CALLGRIND: dict[str, str] = {}  # --callgrind: {"out": the dump file}


def _callgrind(pid: int, *commands: str) -> None:
    """Instrumentation of the hopline child under valgrind on or off, counters zeroed, dumped."""
    for command in commands:
        subprocess.run(["callgrind_control", command, str(pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_file(path: Path, text: str, timeout: float | None = None) -> None:
    timeout = WAIT if timeout is None else timeout
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text() == text:
            return
        time.sleep(0.01)
    raise RuntimeError(f"{path} never said {text!r}")


def _wait_port(port: int, timeout: float | None = None) -> None:
    import socket

    timeout = WAIT if timeout is None else timeout
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


async def _drive(url: str, n: int, warmup: int, child: subprocess.Popen, ready: Path, strace: Path | None = None, era: str = "legacy") -> None:
    sys.path.insert(0, str(BENCH))
    import loadgen

    stats = loadgen.Stats()
    cl = loadgen.Client(0, url, era, stats, 16, tool="e__echo")
    await cl.conn.connect()
    await cl.handshake()
    for _ in range(warmup):
        if not await cl.call_once(False):
            raise RuntimeError(f"warm-up call failed: {stats.errors}")
    tracer = None
    if strace is not None:  # counts every syscall of hopline's process during the calls (slows it, counts stay)
        tracer = await asyncio.to_thread(_strace, child.pid, strace)
    child.send_signal(signal.SIGUSR1)
    await asyncio.to_thread(_wait_file, ready, "on")
    if CALLGRIND:
        await asyncio.to_thread(_callgrind, child.pid, "-z", "--instr=on")
    for _ in range(n):
        if not await cl.call_once(True):
            raise RuntimeError(f"call failed: {stats.errors}")
    if CALLGRIND:
        await asyncio.to_thread(_callgrind, child.pid, "--instr=off", "-d")
    if tracer is not None:
        tracer.send_signal(signal.SIGINT)
        await asyncio.to_thread(tracer.wait, 30)
    child.send_signal(signal.SIGUSR2)
    await asyncio.to_thread(_wait_file, ready, "off")
    await cl.goodbye()
    await cl.conn.close()


def _strace(pid: int, out: Path) -> subprocess.Popen:
    """strace -c on hopline's process (counts every syscall; slows it, the counts stay)."""
    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(pid)], stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # strace attaches asynchronously; a bench, not a test
    return tracer


def _drive_stdio(child: subprocess.Popen, n: int, warmup: int, ready: Path, era: str, strace: Path | None = None) -> None:
    """``--relay``: one stdio client of ``hopline relay --stdio``, sequential calls."""
    sys.path.insert(0, str(BENCH))
    from loadgen import LEGACY_VERSION, MODERN_VERSION, dumps, loads

    ids = iter(range(1, 1 << 30))

    def call(method: str, params: dict) -> dict:
        rid = next(ids)
        child.stdin.write(dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n")
        child.stdin.flush()
        while True:
            line = child.stdout.readline()
            if not line:
                raise RuntimeError("the relay closed its stdout")
            msg = loads(line)
            if msg.get("id") == rid:
                return msg

    if era == "legacy":
        call("initialize", {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "profile", "version": "1"}})
        child.stdin.write(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n")
        child.stdin.flush()

    def echo(i: int) -> None:
        params: dict = {"name": "echo", "arguments": {"text": f"t{i}"}}
        if era != "legacy":
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
        answer = call("tools/call", params)
        if (answer.get("result") or {}).get("content", [{}])[0].get("text") != f"t{i}":
            raise RuntimeError(f"call failed: {answer}")

    for i in range(warmup):
        echo(i)
    tracer = _strace(child.pid, strace) if strace is not None else None
    child.send_signal(signal.SIGUSR1)
    _wait_file(ready, "on")
    if CALLGRIND:
        _callgrind(child.pid, "-z", "--instr=on")
    for i in range(n):
        echo(i)
    if CALLGRIND:
        _callgrind(child.pid, "--instr=off", "-d")
    if tracer is not None:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(30)
    child.send_signal(signal.SIGUSR2)
    _wait_file(ready, "off")
    child.stdin.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=500, help="profiled calls (default 500)")
    p.add_argument("--warmup", type=int, default=200, help="calls before profiling (default 200)")
    p.add_argument("--sse", action="store_true", help="the backend answers with text/event-stream (the SDK's default)")
    p.add_argument("--era", choices=["legacy", "2026"], default="legacy", help="legacy: initialize handshake, one session; 2026: 2026-07-28 requests, no handshake")
    p.add_argument("--log-level", default="warning", help="hopline's --log-level (info: request log lines on)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--sort", default="cumulative", help="pstats sort key (cumulative, tottime, ncalls)")
    p.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    p.add_argument("--src", default=str(REPO / "src"), help="the hopline sources to run (default: this checkout's src), e.g. an older commit's, exported")
    p.add_argument("--strace", action="store_true", help="also count hopline's syscalls per call with strace -c (needs strace)")
    p.add_argument("--cpu", action="store_true", help="no profiler: print hopline's CPU-ms per call instead (schedstat; depends on machine load)")
    p.add_argument("--relay", action="store_true", help="profile `hopline relay --stdio URL` (a stdio client relayed to the backend) instead of `hopline serve`")
    p.add_argument("--by-module", action="store_true", help="instead of cProfile: every call (Python and builtin) charged to the innermost hopline module on the stack, per request")
    p.add_argument("--callgrind", action="store_true", help="no profiler: run hopline under valgrind's callgrind and print the machine instructions it ran per call (deterministic, independent of load; slow: use -n 200 --warmup 50)")
    p.add_argument(
        "--critical",
        action="store_true",
        help="count the calls on the two stretches a client waits through: its request read -> the upstream "
        "write, the answer's bytes read -> the client write (and the task hand-offs on each)",
    )
    p.add_argument("--by-function", action="store_true", help="the same, charged to the innermost hopline function (module:function)")
    args = p.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="hopline-profile-"))
    bport, gport = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(args.src).resolve()), os.environ.get("PYTHONPATH", "")])}
    if args.cpu or args.callgrind:
        env["HOPLINE_PROFILE_CPU_ONLY"] = "1"
    wrap: list[str] = []
    if args.callgrind:
        global WAIT
        WAIT = 600.0
        CALLGRIND["out"] = str(tmp / "callgrind.out")
        wrap = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={CALLGRIND['out']}"]
    if args.critical:
        if args.relay:
            p.error("--critical measures hopline serve (HTTP both sides), not --relay")
        env["HOPLINE_PROFILE_CRITICAL"] = "1"
    if args.by_module or args.by_function:
        env["HOPLINE_PROFILE_BY_MODULE"] = "function" if args.by_function else "1"
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
            if args.relay:
                relay_argv = ["--log-level", args.log_level, "relay", "--stdio", f"http://127.0.0.1:{bport}/mcp"]
                child = subprocess.Popen([*wrap, PY, __file__, "_serve", str(stats_path), str(ready), *relay_argv], cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=hlog)
                procs.append(child)
                _drive_stdio(child, args.n, args.warmup, ready, args.era, tmp / "strace.txt" if args.strace else None)
            else:
                child = subprocess.Popen([*wrap, PY, __file__, "_serve", str(stats_path), str(ready), *hopline_argv], cwd=REPO, env=env, stdout=hlog, stderr=subprocess.STDOUT)
                procs.append(child)
                _wait_port(gport)
                asyncio.run(_drive(f"http://127.0.0.1:{gport}/mcp", args.n, args.warmup, child, ready, tmp / "strace.txt" if args.strace else None, args.era))
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
    if args.callgrind:
        totals = [line for path in sorted(tmp.glob("callgrind.out*")) for line in Path(path).read_text().splitlines() if line.startswith(("summary:", "totals:"))]
        instructions = max(int(line.split()[1]) for line in totals)
        print(f"{n} {'relayed' if args.relay else 'proxied'} tools/call ({args.era} era, backend answers {'sse' if args.sse else 'json'}): hopline ran {instructions / n / 1e3:.1f} k instructions per call (callgrind Ir)")  # fmt: skip
        return 0
    if args.cpu:
        print(f"{n} {'relayed' if args.relay else 'proxied'} tools/call ({args.era} era, backend answers {'sse' if args.sse else 'json'}): hopline CPU {extra['cpu_ns'] / n / 1e6:.3f} ms per call, "
              f"({100 * extra['system_ticks'] / max(1, extra['user_ticks'] + extra['system_ticks']):.0f}% of it in the kernel), "
              f"{extra['tasks'] / n:.2f} tasks, {extra['write_syscalls'] / n:.2f} write / {extra['read_syscalls'] / n:.2f} read syscalls per call")  # fmt: skip
        return 0
    if args.critical:
        import statistics

        crit = extra["critical"]
        label = f"{n} proxied tools/call ({args.era} era, backend answers {'sse' if args.sse else 'json'})"
        if not crit["in"] or not crit["out"]:
            print(f"{label}: no critical stretch seen (in {len(crit['in'])}, out {len(crit['out'])}")
            return 1
        cin = statistics.median(c for c, _ in crit["in"])
        cout = statistics.median(c for c, _ in crit["out"])
        tin = statistics.median(t for _, t in crit["in"])
        tout = statistics.median(t for _, t in crit["out"])
        print(f"{label}: Python and builtin calls (median of {len(crit['in'])} / {len(crit['out'])} stretches)")
        print(f"  inbound,  request read -> upstream write: {cin:6.0f} calls, {tin:.0f} task hand-offs")
        print(f"  outbound, answer read  -> client write:   {cout:6.0f} calls, {tout:.0f} task hand-offs")
        if args.json:
            figures = {"inbound_calls": cin, "outbound_calls": cout, "inbound_handoffs": tin, "outbound_handoffs": tout}
            print(json.dumps({"calls": n, "era": args.era, "backend": "sse" if args.sse else "json", **figures}))
        return 0
    if args.by_module or args.by_function:
        owners = extra["owners"]
        total = sum(owners.values())
        print(f"{n} {'relayed' if args.relay else 'proxied'} tools/call ({args.era} era, backend answers {'sse' if args.sse else 'json'}): {total / n:.1f} function calls per request "
              f"(Python and builtin), each charged to the innermost hopline {'function' if args.by_function else 'module'} on the stack:")  # fmt: skip
        groups: dict[str, int] = {}
        for name, count in owners.items():
            name = name.partition(":")[0]
            top = name.split(os.sep)[0] if os.sep in name else name
            groups[top] = groups.get(top, 0) + count
        for name, count in sorted(owners.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"  {count / n:7.1f}  {100 * count / total:5.1f}%  {name}")
        print("  by package:")
        for name, count in sorted(groups.items(), key=lambda kv: -kv[1]):
            print(f"  {count / n:7.1f}  {100 * count / total:5.1f}%  {name}/")
        if args.json:
            print(json.dumps({"calls": n, "era": args.era, "backend": "sse" if args.sse else "json", "function_calls_per_request": round(total / n, 1),
                              "by_module": {k: round(v / n, 1) for k, v in sorted(owners.items(), key=lambda kv: -kv[1])}}))  # fmt: skip
        return 0
    st = pstats.Stats(str(stats_path))
    own = sum(v[1] for (_f, _line, name), v in st.stats.items() if name == FACTORY)
    figures = {"calls": n, "era": args.era, "backend": "sse" if args.sse else "json", "log_level": args.log_level,
               "function_calls_per_request": round((st.total_calls - own) / n, 1), "primitive_calls_per_request": round((st.prim_calls - own) / n, 1),
               "tasks created": round(extra["tasks"] / n, 2)}  # fmt: skip
    for label, pred in COUNTERS.items():
        count = sum(v[1] for (f, _line, name), v in st.stats.items() if pred(f, name))
        figures[label] = round(count / n, 2)
    figures["write syscalls (/proc/self/io syscw)"] = round(extra["write_syscalls"] / n, 2)
    figures["read syscalls (/proc/self/io syscr)"] = round(extra["read_syscalls"] / n, 2)
    print(f"{n} {'relayed' if args.relay else 'proxied'} tools/call ({args.era} era, backend answers {figures['backend']}, hopline --log-level {args.log_level}):")
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
