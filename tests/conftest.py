"""Shared fixtures: run hopline as a real process and reach it as a real client would.

``hopline_relay(*args)`` starts ``hopline relay --port 0 …`` and waits for the
line it announces on stderr, so tests never guess ports or sleep. Every process
started here is stopped in teardown, and the test fails if it left a child
behind (test-battery F6, FAULT-14).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
PY = sys.executable


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "req(id): the draft requirement (requirements.toml id) this test proves")


@dataclass
class Proc:
    popen: subprocess.Popen
    lines: "queue.Queue[str | None]" = field(default_factory=queue.Queue)  # None: stderr closed
    stderr: list[str] = field(default_factory=list)
    url: str = ""

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    def wait_line(self, pattern: str, timeout: float = 45.0) -> re.Match:
        """The first stderr line matching ``pattern``: it waits for that line (readiness) or for the
        process's end, whichever comes first, as long as a loaded machine makes either take; ``timeout``
        only bounds a process that hangs alive (below pytest's 60 s, so the error says which line)."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no line matching {pattern!r} within {timeout}s; stderr so far:\n" + "".join(self.stderr[-30:]))
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:  # stderr closed: the process is gone, no line will come
                self.lines.put(None)
                self.popen.wait(5)
                raise RuntimeError(f"process exited with {self.popen.returncode}; stderr:\n" + "".join(self.stderr[-30:]))
            m = rx.search(line)
            if m:
                return m
            if self.popen.poll() is not None and self.lines.empty():
                raise RuntimeError(f"process exited with {self.popen.returncode}; stderr:\n" + "".join(self.stderr[-30:]))

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.popen.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        return self.popen.returncode


def start(argv: list[str], env: dict[str, str] | None = None, stdin=None, stdout=None) -> Proc:
    popen = subprocess.Popen(
        argv,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        cwd=ROOT,
    )
    proc = Proc(popen)

    def drain() -> None:
        assert popen.stderr is not None
        for raw in popen.stderr:
            line = raw.decode("utf-8", "replace")
            proc.stderr.append(line)
            proc.lines.put(line)
        proc.lines.put(None)  # end of stderr

    threading.Thread(target=drain, daemon=True).start()
    return proc


def _launcher(command: str, *fixed: str):
    started: list[tuple[Proc, list[psutil.Process]]] = []

    def launch(*args: str, env: dict[str, str] | None = None) -> Proc:
        argv = [PY, "-m", "hopline", command, "--port", "0", *fixed, *args]
        proc = start(argv, env)
        started.append((proc, []))  # before the wait: one that never announces itself is stopped too
        m = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)")
        proc.url = m.group(1)
        return proc

    return launch, started


@pytest.fixture
def hopline_serve_eager():
    """``hopline serve`` as an operator runs it: each backend started at once and reported."""
    launch, started = _launcher("serve")
    yield launch
    _stop_all(started)


@pytest.fixture
def hopline_relay():
    launch, started = _launcher("relay")
    yield launch
    _stop_all(started)


@pytest.fixture
def hopline_serve():
    """``hopline_serve(config_path)`` runs the gateway on a free port, ``--lazy``: no
    backend starts before a test's client needs it (tests count starts and children)."""
    launch, started = _launcher("serve", "--lazy")
    yield launch
    _stop_all(started)


def _stop_all(started) -> None:
    for proc, _ in started:
        children = proc.descendants()
        proc.stop()
        gone, alive = psutil.wait_procs(children, timeout=5)
        for p in alive:
            p.kill()
        assert not alive, f"hopline left children behind: {alive}"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> "Iterator[str]":
    """The session's real ``redis-server`` (no persistence) on a unix socket, started on first
    use and stopped at the end; tests keep apart by key prefixes of their own."""
    from tests import peers

    path = peers.redis_socket(tmp_path_factory.mktemp("redis"))
    stop = peers.start_redis(path)
    try:
        yield peers.redis_url(path)
    finally:
        stop()


def sdk_server_cmd(*extra: str) -> list[str]:
    return [PY, str(SERVERS / "sdk_server.py"), "stdio", *extra]


@pytest.fixture
def recorded(tmp_path):
    """A real SDK backend over Streamable HTTP that records every request it receives:
    ``(its /mcp URL, the record file)`` (read it with ``recorder_server.recorded``)."""
    from tests.peers import stop
    from tests.servers import recorder_server

    record = tmp_path / "backend.jsonl"
    proc, url = recorder_server.start(record)
    try:
        yield url, record
    finally:
        stop(proc)
