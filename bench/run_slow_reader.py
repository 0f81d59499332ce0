"""Slow reader (issue 13): a client that never reads its POST stream while the backend floods.

    python bench/run_slow_reader.py                       # 200000 notifications of 1 KiB, watch 8 s
    python bench/run_slow_reader.py --count 50000 --bytes 4096 --seconds 5 --relay-arg=--stream-buffer-messages=100

Starts `hopline relay` (this checkout's src/) in front of tests/servers/fault_server.py, opens a
session, sends `tools/call flood` on a raw socket with a 4 KiB receive buffer and never reads.
Every second it prints the relay's RSS growth; at the end whether the relay cut the stream off
(its log line), whether the backend saw `notifications/cancelled`, and whether /healthz answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
H = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CLIENT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": CLIENT}


async def main(args: argparse.Namespace) -> None:
    events = Path(tempfile.mkdtemp()) / "events"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONUNBUFFERED": "1"}
    argv = [PY, "-m", "hopline", "relay", "--port", "0", *args.relay_arg, "--", PY, str(REPO / "tests/servers/fault_server.py"), "--events", str(events)]
    p = subprocess.Popen(argv, stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert p.stderr is not None
    url = None
    while url is None:
        m = re.search(r"at (http://\S+) \(Streamable HTTP\)", p.stderr.readline().decode())
        url = m.group(1) if m else None
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(line.decode() for line in p.stderr), daemon=True).start()  # type: ignore[union-attr]
    try:
        async with httpx.AsyncClient() as http:
            r = await http.post(url, json=INIT, headers=H)
            sid = r.headers["mcp-session-id"]
            await http.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers={**H, "mcp-session-id": sid})
        host, port = re.match(r"http://([^:]+):(\d+)", url).groups()  # type: ignore[union-attr]
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, int(port)))
        call = {"name": "flood", "arguments": {"count": args.count, "bytes": args.bytes}, "_meta": {"progressToken": "t"}}
        body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call}).encode()
        head = f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n"
        s.sendall(f"{head}mcp-session-id: {sid}\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)
        proc = psutil.Process(p.pid)
        base = proc.memory_info().rss
        for i in range(args.seconds):
            await asyncio.sleep(1)
            print(f"t={i + 1}s relay RSS +{(proc.memory_info().rss - base) / 1e6:.1f} MB", flush=True)
        async with httpx.AsyncClient(timeout=5) as http:
            healthz = (await http.get(url.rsplit("/", 1)[0] + "/healthz")).status_code
        cut = any("cut off" in line for line in log)
        cancelled = events.exists() and any(line.startswith("cancelled flood") for line in events.read_text().splitlines())
        print(f"stream cut off: {cut}; backend saw notifications/cancelled: {cancelled}; /healthz: {healthz}")
        s.close()
    finally:
        p.terminate()
        p.wait(15)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200_000, help="notifications the backend sends (default: 200000)")
    ap.add_argument("--bytes", type=int, default=1024, help="text per notification (default: 1024)")
    ap.add_argument("--seconds", type=int, default=8, help="how long to watch (default: 8)")
    ap.add_argument("--relay-arg", action="append", default=[], metavar="ARG", help="extra `hopline relay` argument (repeatable)")
    asyncio.run(main(ap.parse_args()))
