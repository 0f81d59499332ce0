"""Replicas as an operator runs them: Debian's redis-server and HAProxy, and
``hopline serve`` processes sharing them, all on loopback, started per test.

``cluster(n)`` starts Redis, ``n`` replicas of a forward gateway exposing the demo
server as ``demo`` (its ``state:`` section pointing at that Redis, one session key),
and HAProxy balancing each request round-robin over them with no stickiness. Every
process is stopped in teardown; the test fails if a replica left a child behind.
"""

from __future__ import annotations

import base64
import contextlib
import secrets
import shutil
import signal
import socket
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil
import pytest
import yaml

from tests import peers
from tests.conftest import PY, Proc, start

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def session_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def replica_config(redis_url: str | None, key: str, **state: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "version": 1,
        "mode": "forward",
        "name": "replica",
        "reload_interval": 0,
        "listen": {"host": "127.0.0.1", "port": 0},
        "backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}},
    }
    if key:
        config["state"] = {"session_key": key, **state}
        if redis_url is not None:
            config["state"]["redis_url"] = redis_url
    return config


@dataclass
class Cluster:
    tmp: Path
    key: str = field(default_factory=session_key)
    replicas: list[Proc] = field(default_factory=list)
    haproxy: subprocess.Popen | None = None
    url: str = ""
    stop_redis: Callable[[], None] | None = None
    _all: list[Proc] = field(default_factory=list)
    configs: list[Path] = field(default_factory=list)  # each started replica's file, in start order

    def __post_init__(self) -> None:
        self.redis_socket = peers.redis_socket(self.tmp)  # restarts of this cluster's Redis come back here

    @property
    def redis_url(self) -> str:
        return peers.redis_url(self.redis_socket)

    def start_redis(self) -> None:
        self.stop_redis = peers.start_redis(self.redis_socket)

    @contextlib.contextmanager
    def frozen_redis(self) -> Iterator[None]:
        """Redis unreachable but keeping its memory (a hung server, a partition): SIGSTOP, then SIGCONT."""
        (server,) = [
            p
            for p in psutil.process_iter(["name", "cmdline"])
            if p.info["name"] == "redis-server"
            and str(self.redis_socket) in " ".join(p.info["cmdline"] or ())
        ]
        server.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            server.send_signal(signal.SIGCONT)

    def start_replica(self, config: dict[str, Any] | None = None) -> Proc:
        n = len(self._all)
        path = self.tmp / f"replica{n}.yaml"
        path.write_text(yaml.safe_dump(config or replica_config(self.redis_url, self.key)))
        self.configs.append(path)
        proc = start([PY, "-m", "hopline", "serve", str(path), "--lazy", "--log-level", "info"])
        self._all.append(proc)
        proc.url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)").group(1)
        self.replicas.append(proc)
        return proc

    def start_haproxy(self) -> str:
        # HAProxy listens on a socket bound here on port 0 and handed down (bind fd@N), so no port
        # is picked for it to bind later; bound, not listening: wait_port waits for HAProxy itself.
        front = socket.socket()
        front.bind(("127.0.0.1", 0))
        port = front.getsockname()[1]
        servers = "\n".join(
            f"  server r{i} {p.url.split('//')[1].split('/')[0]} check inter 200ms fall 1 rise 2"
            for i, p in enumerate(self.replicas)
        )
        cfg = self.tmp / "haproxy.cfg"
        cfg.write_text(
            textwrap.dedent(
                f"""\
                global
                  maxconn 512
                defaults
                  mode http
                  timeout connect 1s
                  timeout client 60s
                  timeout server 60s
                  retries 3
                  option redispatch 1
                frontend mcp
                  bind fd@{front.fileno()}
                  default_backend replicas
                backend replicas
                  balance roundrobin
                """
            )
            + servers
            + "\n"
        )
        with front:
            self.haproxy = subprocess.Popen(
                [HAPROXY, "-f", str(cfg), "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=[front.fileno()]
            )
        peers.wait_port(port, self.haproxy)
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self.url

    def resumed(self) -> int:
        """Sessions the replicas (the killed ones too) resumed, from their logs."""
        return sum(1 for proc in self._all for line in proc.stderr if "resumed on this replica" in line)

    def kill(self, replica: Proc) -> None:
        """SIGKILL, as a crash or an OOM kill: no clean-up; its children die with it."""
        children = replica.descendants()
        replica.popen.send_signal(signal.SIGKILL)
        replica.popen.wait(10)
        psutil.wait_procs(children, timeout=10)
        self.replicas.remove(replica)

    def close(self) -> None:
        if self.haproxy is not None:
            peers.stop(self.haproxy)
        left = []
        for proc in self._all:
            children = proc.descendants()
            proc.stop()
            _, alive = psutil.wait_procs(children, timeout=5)
            for p in alive:
                p.kill()
            left += alive
        if self.stop_redis is not None:
            self.stop_redis()
        assert not left, f"a replica left children behind: {left}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(n: int = 3, *, redis: bool = True, shared: bool = True) -> Cluster:
        c = Cluster(tmp_path)
        made.append(c)
        if redis:
            c.start_redis()
        for _ in range(n):
            c.start_replica(replica_config(c.redis_url if redis else None, c.key if shared else ""))
        c.start_haproxy()
        return c

    yield make
    for c in made:
        c.close()
