"""A hostile stdio MCP server (issue 35): each tool tries something a confined server must not manage.

Plain newline-delimited JSON-RPC over stdin/stdout (no SDK: nothing to import but the standard
library). Every tool answers with a text ``OK: ...`` when the attempt succeeded and
``DENIED: <error>`` when the system refused it, so a test reads the outcome, never a traceback.

Tools: read(path), write(path), connect(host, port), fork_bomb(limit), allocate(mib),
kill(pid), environ(pid), whoami(), tunnel(host, port, message) (through the HTTPS_PROXY it was given),
spin(seconds) (CPU), die_allocating(mib) (dies of MemoryError).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time


def read(path: str) -> str:
    with open(path, "rb") as f:
        return "OK: " + f.read(200).decode("utf-8", "replace")


def write(path: str) -> str:
    with open(path, "w") as f:
        f.write("written by a hostile server\n")
    return f"OK: wrote {path}"


def connect(host: str, port: int) -> str:
    with socket.create_connection((host, int(port)), timeout=3):
        return f"OK: connected to {host}:{port}"


def tunnel(host: str, port: int, message: str) -> str:
    """An HTTP CONNECT through the proxy in HTTPS_PROXY (the sandbox's egress), then ``message`` and
    the destination's first answer back: OK with it, or DENIED with the proxy's status line and reason."""
    proxy = os.environ.get("HTTPS_PROXY")
    if not proxy:
        return "DENIED: no HTTPS_PROXY"
    where, _, port_text = proxy.rpartition("/")[2].rpartition(":")
    with socket.create_connection((where, int(port_text)), timeout=5) as s:
        s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        status, _, rest = head.partition(b"\r\n\r\n")
        first = status.split(b"\r\n", 1)[0].decode()
        if " 200 " not in first + " ":
            return f"DENIED: {first} {rest.decode(errors='replace').strip()}"
        s.sendall(message.encode())
        return "OK: " + s.recv(4096).decode()


def spin(seconds: float) -> str:
    """Burn CPU for ``seconds`` (a profile's cpu_seconds kills it first)."""
    end = time.process_time() + float(seconds)
    while time.process_time() < end:
        pass
    return f"OK: spun {seconds}s"


def die_allocating(mib: int) -> str:
    """Allocate ``mib`` MiB; on failure die as an uncaught MemoryError does (its name on stderr, status 1)."""
    try:
        block = bytearray(int(mib) * 1024 * 1024)
    except MemoryError:
        sys.stderr.write("Traceback (most recent call last):\nMemoryError\n")
        sys.stderr.flush()
        os._exit(1)
    return f"OK: allocated {len(block) >> 20} MiB"


def fork_bomb(limit: int) -> str:
    """Forks children that sleep until ``limit`` or the first refusal; then reaps them all."""
    pids: list[int] = []
    error = None
    try:
        for _ in range(int(limit)):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            pids.append(pid)
    except OSError as exc:
        error = exc
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if error is not None:
        return f"DENIED: {error} after {len(pids)} forks"
    return f"OK: {len(pids)} forks"


def allocate(mib: int) -> str:
    block = bytearray(int(mib) * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])  # touch every page
    return f"OK: {len(block) >> 20} MiB"


def kill(pid: int) -> str:
    os.kill(int(pid), signal.SIGKILL)
    return f"OK: killed {pid}"


def environ(pid: int) -> str:
    return read(f"/proc/{int(pid)}/environ")


def whoami() -> str:
    return f"OK: uid {os.getuid()} pid {os.getpid()} ppid {os.getppid()}"


TOOLS = {
    f.__name__: f
    for f in (read, write, connect, fork_bomb, allocate, kill, environ, whoami, tunnel, spin, die_allocating)
}


def answer(msg_id, result=None, error=None) -> None:
    body = {"jsonrpc": "2.0", "id": msg_id}
    body.update({"error": error} if error else {"result": result})
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def handle(msg: dict) -> None:
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        return
    if method == "initialize":
        version = (msg.get("params") or {}).get("protocolVersion", "2025-06-18")
        answer(
            msg_id,
            {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            },
        )
    elif method == "ping":
        answer(msg_id, {})
    elif method == "tools/list":
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
        answer(msg_id, {"tools": tools})
    elif method == "tools/call":
        params = msg.get("params") or {}
        tool = TOOLS.get(params.get("name"))
        if tool is None:
            answer(msg_id, error={"code": -32602, "message": "unknown tool"})
            return
        try:
            text = tool(**(params.get("arguments") or {}))
        except (OSError, MemoryError) as exc:
            text = f"DENIED: {type(exc).__name__}: {exc}"
        answer(msg_id, {"content": [{"type": "text", "text": text}], "isError": False})
    else:
        answer(msg_id, error={"code": -32601, "message": f"no method {method}"})


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))


if __name__ == "__main__":
    main()
