"""Test harness for the ACP conductor: a raw NDJSON client over a real process.

``RawClient.start(argv)`` launches a process (usually ``python -m hopline.acp
...``), and the test speaks newline-delimited JSON-RPC to it. Every wait is
bounded; ``close()`` ends stdin, waits, then kills, and the process group is
killed in any case so no component outlives a test.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"
ROOT = HERE.parent.parent
PY = sys.executable
NODE_DIR = HERE / "node"
WAIT = 12.0  # seconds: a generous bound for one expected message on a loaded machine


def node_ready() -> bool:
    return shutil.which("node") is not None and (NODE_DIR / "node_modules" / "@agentclientprotocol" / "sdk").is_dir() and (NODE_DIR / "node_modules" / "@thinkwell" / "conductor").is_dir()


def require_node() -> None:
    """The npm peers are part of the suite (scripts/test installs them): missing is a failure, not a skip."""
    if not node_ready():
        pytest.fail("node or tests/acp/node/node_modules missing (run: npm ci --prefix tests/acp/node --ignore-scripts)", pytrace=False)


def peer(script: str, *args: str) -> str:
    """One component command string for ``hopline acp -- ...``."""
    return shlex.join([PY, str(PEERS / script), *args])


def proxy(dialect: str, tag: str = "", *extra: str) -> str:
    return peer("proxy.py", "--dialect", dialect, *(("--tag", tag) if tag else ()), *extra)


def conductor_argv(*components: str, options: tuple[str, ...] = ()) -> list[str]:
    return [PY, "-m", "hopline.acp", *options, "--", *components]


def text_of(note: dict[str, Any]) -> str:
    return note["params"]["update"]["content"]["text"]


class RawClient:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr: list[str] = []
        self.next_id = 0
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._read_stdout()), asyncio.create_task(self._read_stderr())]
        self.raw_lines: list[bytes] = []

    @classmethod
    async def start(cls, argv: list[str], env: dict[str, str] | None = None) -> RawClient:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=ROOT,
            start_new_session=True,  # one process group: the test can always kill all of it
            limit=1 << 24,
        )
        return cls(process)

    async def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.raw_lines.append(line)
            if line.strip():
                await self.inbox.put(json.loads(line))

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.stderr.append(line.decode("utf-8", "replace"))

    # -- speaking -------------------------------------------------------------------
    async def send(self, body: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps({"jsonrpc": "2.0", **body}) + "\n").encode())
        await self.process.stdin.drain()

    async def recv(self, timeout: float = WAIT) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(self.inbox.get(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError("no message within %.0fs; conductor stderr:\n%s" % (timeout, "".join(self.stderr[-40:]))) from None

    async def call(self, method: str, params: dict[str, Any] | None = None, *, msg_id: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Send a request; return (its answer, the messages that arrived before it)."""
        if msg_id is None:
            self.next_id += 1
            msg_id = self.next_id
        await self.send({"id": msg_id, "method": method, **({"params": params} if params is not None else {})})
        return await self.answer(msg_id)

    async def answer(self, msg_id: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        before: list[dict[str, Any]] = []
        while True:
            msg = await self.recv()
            if "method" not in msg and msg.get("id") == msg_id:
                return msg, before
            before.append(msg)

    async def initialize(self) -> dict[str, Any]:
        answer, _ = await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "raw", "version": "1"}})
        return answer

    async def new_session(self) -> str:
        answer, _ = await self.call("session/new", {"cwd": str(ROOT), "mcpServers": []})
        return answer["result"]["sessionId"]

    async def prompt(self, session_id: str, text: str, *, msg_id: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return await self.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, msg_id=msg_id)

    # -- ending -------------------------------------------------------------------------
    async def close(self, timeout: float = 10.0, *, kill_group: bool = True) -> int | None:
        """End stdin and wait for a clean exit; kill the whole group if it does not come."""
        try:
            if self.process.stdin is not None and not self.process.stdin.is_closing():
                self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            return self.process.returncode
        finally:
            if kill_group or self.process.returncode is None:
                self.kill()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
