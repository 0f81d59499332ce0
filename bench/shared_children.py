"""Children and memory behind `hopline serve` for N abandoned handshake-era sessions on
three stdio backends (issue 12), per `share` setting.

    PYTHONPATH=src python bench/shared_children.py [--sessions 100] [--share shared|isolated]

Starts the gateway with three `python -m hopline.demo` backends, opens N Streamable HTTP
sessions (initialize + initialized + tools/list, never closed), then prints the number of
backend children and their total RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import psutil
import yaml

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def open_sessions(url: str, n: int) -> None:
    async with httpx.AsyncClient(timeout=120) as http:
        async def one() -> None:
            r = await http.post(url, json=INIT, headers=HEADERS)
            sid = {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**HEADERS, **sid})
            await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers={**HEADERS, **sid})

        for start in range(0, n, 10):
            await asyncio.gather(*(one() for _ in range(min(10, n - start))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--share", choices=["shared", "isolated"], default="shared")
    args = parser.parse_args()
    demo = {"command": sys.executable, "args": ["-m", "hopline.demo"], "share": args.share}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gw.yaml"
        path.write_text(yaml.safe_dump({"backends": {"a": demo, "b": demo, "c": demo}}))
        gw = subprocess.Popen([sys.executable, "-m", "hopline", "serve", "--port", "0", str(path)], stderr=subprocess.PIPE, text=True)
        try:
            assert gw.stderr is not None
            while not (m := re.search(r"at (http://\S+) \(Streamable HTTP\)", gw.stderr.readline())):
                pass
            asyncio.run(open_sessions(m.group(1), args.sessions))
            kids = psutil.Process(gw.pid).children(recursive=True)
            rss = sum(k.memory_info().rss for k in kids)
            print(f"share={args.share} sessions={args.sessions}: {len(kids)} backend children, {rss / 2**20:.0f} MiB RSS")
        finally:
            gw.terminate()
            try:
                gw.wait(120)  # hundreds of children take a while to stop
            except subprocess.TimeoutExpired:
                gw.kill()
                gw.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
