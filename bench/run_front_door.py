"""Front-door benchmark (issue 13): what an oversized header and thousands of idle sockets cost the server.

    python bench/run_front_door.py                      # both servers, both attacks
    python bench/run_front_door.py --header-mib 64 --idle 3000 --sources 20
    python bench/run_front_door.py --servers front-door --idle 3000

Two servers, each in its own process, serve the same trivial ASGI app on loopback:

- ``plain``: uvicorn with the httptools parser as hopline ran it before the front door
  (``http="httptools"``, no caps, no request-read deadlines);
- ``front-door``: ``runtime.serve_admin`` (transports/front_door.py) with the default
  ``DoorLimits`` except ``--idle-timeout`` (short, so the run ends soon).

Attack 1, one oversized header: the client sends ``GET / HTTP/1.1``, then one header of
``--header-mib`` MiB in 256 KiB writes until the server cuts it off or all is sent (then ends
the head). Reported: the server's CPU seconds for the attempt (user+system from /proc, before vs
after), how much was sent before the cut, the answer's status line, and the worst latency a
second client saw for ``GET /`` (one every 20 ms) meanwhile.

Attack 2, idle sockets: ``--idle`` connections that send nothing, spread over ``--sources``
loopback addresses (127.0.0.1, 127.0.0.2, ...). Reported: how many the server took and how many
it refused at once (503), the server's open descriptors at the peak and after ``--idle-timeout``
plus a margin, and whether a real client was served while they were open.

Figures are printed as a markdown table; nothing is asserted (bench/, not tests/).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 256 * 1024


# -- the server process ----------------------------------------------------------------------------
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def serve(kind: str, idle_timeout: float) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    import uvicorn

    from hopline import runtime
    from hopline.transports.door_limits import DoorLimits

    def ready(host: str, port: int) -> None:
        print(f"PORT {port}", flush=True)

    async def main() -> None:
        if kind == "front-door":
            await runtime.serve_admin(app, host="127.0.0.1", port=0, on_ready=ready, stop=asyncio.Event(), limits=DoorLimits(idle_timeout=idle_timeout))
            return
        config = uvicorn.Config(app, host="127.0.0.1", port=0, http="httptools", loop="none", lifespan="off", access_log=False, log_level="warning")
        server = uvicorn.Server(config)
        task = asyncio.create_task(server._serve())
        while not server.started:
            await asyncio.sleep(0.01)
        ready("127.0.0.1", server.servers[0].sockets[0].getsockname()[1])
        await task

    runtime.run(main())


# -- the attacks -----------------------------------------------------------------------------------
def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


async def probe(port: int, stop: asyncio.Event) -> float:
    """Worst latency of GET / (a fresh keep-alive connection, one request every 20 ms) until ``stop``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    worst = 0.0
    while not stop.is_set():
        started = time.perf_counter()
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        await reader.readuntil(b"ok")
        worst = max(worst, time.perf_counter() - started)
        await asyncio.sleep(0.02)
    writer.close()
    return worst


async def big_header(port: int, proc: psutil.Process, mib: int) -> dict:
    stop = asyncio.Event()
    prober = asyncio.create_task(probe(port, stop))
    await asyncio.sleep(0.2)
    before = cpu(proc)
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    chunk = b"a" * CHUNK
    with contextlib.suppress(ConnectionError):
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nx-big: ")
        while sent < mib * 1024 * 1024:
            writer.write(chunk)
            await asyncio.wait_for(writer.drain(), 30)
            sent += CHUNK
            if reader.at_eof() or reader._buffer:  # type: ignore[attr-defined]  # the server answered: it cut us off
                break
        else:
            writer.write(b"\r\n\r\n")
            await writer.drain()
    status = bytes(reader._buffer).split(b"\r\n")[0]  # type: ignore[attr-defined]  # what arrived, even if a reset follows
    with contextlib.suppress(ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        status = (await asyncio.wait_for(reader.readuntil(b"\r\n"), 60)).strip()
    wall = time.perf_counter() - started
    writer.close()
    await asyncio.sleep(0.3)  # let the server finish what the attempt cost it before reading its CPU
    spent = cpu(proc) - before
    stop.set()
    worst = await prober
    return {"cpu_s": spent, "wall_s": wall, "sent_mib": sent / 1024 / 1024, "status": status.decode(errors="replace") or "(closed)", "probe_worst_ms": worst * 1000}


async def idle_sockets(port: int, proc: psutil.Process, n: int, sources: int, idle_timeout: float) -> dict:
    base_fds = proc.num_fds()
    conns = []
    refused = 0
    peak = 0
    started = time.perf_counter()
    for i in range(n):
        source = f"127.0.0.{1 + i % sources}"
        try:
            conns.append(await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)))
        except OSError:
            refused += 1
        if i % 100 == 0:
            peak = max(peak, proc.num_fds())
    opening = time.perf_counter() - started
    await asyncio.sleep(0.5)
    peak = max(peak, proc.num_fds())
    # A real client while they are open.
    served = False
    with contextlib.suppress(Exception):
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, local_addr=(f"127.0.1.{1}", 0)), 5)
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        served = (await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)).startswith(b"HTTP/1.1 200")
        writer.close()
    answered_503 = 0
    for reader, _ in conns:
        if reader._buffer.startswith(b"HTTP/1.1 503"):  # type: ignore[attr-defined]
            answered_503 += 1
    await asyncio.sleep(idle_timeout + 1.5)
    after = proc.num_fds()
    for _, writer in conns:
        writer.close()
    return {"opened": len(conns), "open_s": opening, "refused_503": answered_503, "connect_failed": refused, "fds_base": base_fds, "fds_peak": peak, "fds_after_idle": after,
            "real_client_served": served}


async def bench(args: argparse.Namespace) -> None:
    rows = []
    for kind in args.servers.split(","):
        popen = subprocess.Popen([sys.executable, __file__, "--serve", kind, "--idle-timeout", str(args.idle_timeout)], stdout=subprocess.PIPE, text=True)
        try:
            line = popen.stdout.readline()  # type: ignore[union-attr]
            port = int(line.split()[1])
            proc = psutil.Process(popen.pid)
            row = {"server": kind}
            if args.header_mib:
                row.update(await big_header(port, proc, args.header_mib))
            if args.idle:
                row.update(await idle_sockets(port, proc, args.idle, args.sources, args.idle_timeout))
            rows.append(row)
        finally:
            popen.terminate()
            popen.wait(10)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(f"{row[k]:.2f}" if isinstance(row[k], float) else str(row[k]) for k in keys) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="plain,front-door", help="which servers to measure, comma-separated (default: plain,front-door)")
    p.add_argument("--header-mib", type=int, default=64, help="size of the oversized header in MiB; 0 skips attack 1 (default: 64)")
    p.add_argument("--idle", type=int, default=3000, help="idle sockets to open; 0 skips attack 2 (default: 3000)")
    p.add_argument("--sources", type=int, default=20, help="loopback source addresses the idle sockets are spread over (default: 20)")
    p.add_argument("--idle-timeout", type=float, default=2.0, help="the front door's idle_timeout for this run, in seconds (default: 2)")
    p.add_argument("--serve", choices=["plain", "front-door"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve, args.idle_timeout)
        return
    os.nice(0)
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
