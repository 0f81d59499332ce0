"""Real MCP peers for tests: the official SDK client with callbacks, and checks.

``exercise(client)`` runs the same conversation against any target (a relay, a
backend directly) and returns what the client saw, so tests can compare the
relayed result with the direct one.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import psutil
from mcp import Client, types

MODES = ("legacy", "2026-07-28")


async def sampling_cb(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    text = params.messages[0].content.text if params.messages else ""
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=f"sampled:{text}"), model="test-model")


async def elicitation_cb(context, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "yes"})


class ChangeWatcher:
    """An SDK client's message handler that notes ``notifications/tools/list_changed``."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()

    async def __call__(self, message) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(message.root if hasattr(message, "root") else message, types.ToolListChangedNotification):
            self.changed.set()
        elif getattr(message, "method", None) == "notifications/tools/list_changed":
            self.changed.set()


async def roots_cb(context) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project", name="project")])


def client(target: Any, mode: str, **kw: Any) -> Client:
    return Client(target, mode=mode, sampling_callback=sampling_cb, elicitation_callback=elicitation_cb, list_roots_callback=roots_cb, **kw)


def text_of(result: Any) -> str:
    return result.content[0].text


async def exercise(c: Client) -> dict[str, Any]:
    """list/call/read/get on sdk_server.py's surface, as plain data."""
    tools = await c.list_tools()
    echo = await c.call_tool("echo", {"text": "héllo"})
    add = await c.call_tool("add", {"a": 2, "b": 3})
    res = await c.read_resource("test://info")
    prompt = await c.get_prompt("review", {"code": "x = 1"})
    return {
        "tools": sorted(t.name for t in tools.tools),
        "echo": text_of(echo),
        "add": add.structured_content,
        "resource": res.contents[0].text,
        "prompt": prompt.messages[0].content.text,
    }


def free_port() -> int:
    """A loopback port nothing listens on, for a test about a peer that is down. Never a port
    for a server to bind later: another process may take it meanwhile (issue 37); servers bind
    port 0 and say which port they got (start_script, listening_port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_port(pid: int) -> int:
    """The one TCP port process ``pid`` listens on: for a server that binds port 0 and says only
    that it listens, not where (read it once the server said so)."""
    ports = {c.laddr.port for c in psutil.Process(pid).net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    assert len(ports) == 1, f"process {pid} listens on {sorted(ports) or 'no port'}"
    return ports.pop()


def wait_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} not listening after {timeout}s")


async def bounded(coro: Any, seconds: float = 20.0) -> Any:
    return await asyncio.wait_for(coro, seconds)


def start_script(script: str, *args: str) -> tuple[subprocess.Popen, int]:
    """Run a test server script with ``--port 0`` and wait for the ``NAME: URL`` line it prints on
    stderr once it accepts connections (tests/servers/serving.py): (process, the port it bound).
    The server binds the port itself, so no other process can take it between a pick and a bind."""
    import sys

    from tests.conftest import start

    proc = start([sys.executable, script, *args, "--port", "0"])
    try:
        port = int(proc.wait_line(r"^\S+: https?://127\.0\.0\.1:(\d+)").group(1))
    except BaseException:
        stop(proc.popen)
        raise
    return proc.popen, port


def start_sdk_http(*flags: str) -> tuple[subprocess.Popen, str]:
    """tests/servers/sdk_server.py over Streamable HTTP on a free port: (process, /mcp URL)."""
    proc, port = start_script(str(Path(__file__).resolve().parent / "servers" / "sdk_server.py"), "http", *flags)
    return proc, f"http://127.0.0.1:{port}/mcp"


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


async def eventually(check: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll a fact the test cannot be told about (the process table, a file), bounded in time."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} not reached in time"
        await asyncio.sleep(0.02)


def live(processes: Iterable[psutil.Process], match: Callable[[psutil.Process], bool] = lambda p: True) -> set[int]:
    """The pids of ``processes`` that are alive (not zombies) and ``match``; ones that exit meanwhile are skipped."""
    out = set()
    for p in processes:
        try:
            if p.status() != psutil.STATUS_ZOMBIE and match(p):
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def running(needle: str) -> Callable[[psutil.Process], bool]:
    """A ``live`` match: the process's command line names ``needle``."""
    return lambda p: needle in " ".join(p.cmdline())


def below(pid: int) -> list[psutil.Process]:
    """Every process below ``pid`` (none if it is gone)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def redis_url(path: Path) -> str:
    """The URL of the Redis ``start_redis(path)`` serves."""
    return f"unix://{path}?db=0"


def redis_socket(tmp: Path) -> Path:
    """Where a test's Redis listens: a unix socket under ``tmp``, or under a short temporary
    folder when ``tmp`` would make the path longer than a socket address may be (107 bytes)."""
    path = tmp / "redis.sock"
    if len(str(path)) > 100:
        import tempfile

        path = Path(tempfile.mkdtemp(prefix="redis-")) / "redis.sock"
    return path


def start_redis(path: Path, timeout: float = 10.0) -> Callable[[], None]:
    """Debian's ``redis-server`` (no persistence) on the unix socket ``path`` (``redis_url(path)``),
    waited for by its "ready to accept connections" line; the answer stops it. No TCP port: a
    port picked for it to bind later could be taken meanwhile (issue 37), a socket path cannot."""
    import queue
    import shutil
    import threading

    proc = subprocess.Popen(
        [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", "0", "--unixsocket", str(path), "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--logfile", "", "--daemonize", "no"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("redis-server did not start:\n" + "".join(seen[-20:]))
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        seen.append(line)
        if "ready to accept connections" in line.lower():  # "... at PATH" on a unix socket
            break
    return lambda: stop(proc)
