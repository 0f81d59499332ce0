"""The only way out of a sandbox with an allow-list (``sandbox.allow``, issue 35): an HTTP CONNECT proxy.

A child with ``network: none`` has its own network namespace with nothing but its own loopback, so it
cannot reach anything by itself. With an allow-list, hopline runs one :class:`EgressProxy` per backend
on a Unix socket in a private directory, and the child's command is wrapped in :data:`SHIM` (stdlib
Python run inside the sandbox, after the uid switch): it listens on the sandbox's own
``127.0.0.1:PROXY_PORT``, pipes each connection to that socket, and runs the command with
``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` pointing at it. The proxy, outside, decides:

- only ``CONNECT host:port`` is relayed (a tunnel: TLS to the destination stays end to end); a
  plain-http request through the proxy is refused (one connection could carry requests for several
  hosts, each of which would have to be parsed and checked);
- the host and port must match an entry of the allow-list (:mod:`hopline.allowlist`), then every
  address the name resolves to must be allowed (public, or named by an entry as an address): the
  connection goes to a checked address, never resolved again (no DNS rebinding);
- bounds: request head size and time, tunnels at once per backend, connect time.

A refusal is answered ``403`` with a one-line reason (the child sees why), logged once per
(host, port) a minute, and counted (``refused``) for /status. Nothing of hopline's own network
configuration is exposed: the child never learns an address it was refused.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from typing import Any, Sequence

from hopline.allowlist import Rule, address_allowed, canonical_host, matching

log = logging.getLogger("hopline.sandbox")

PROXY_PORT = 3128  # inside the sandbox's own network namespace: nobody else's loopback
SOCKET_DIR = "/run/hopline-egress"  # where the proxy's socket directory is bound inside
MAX_HEAD = 8192
HEAD_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10.0
MAX_TUNNELS = 64
_LOG_EVERY = 60.0

#: Run inside the sandbox by the system's Python (isolated, no site):
#: ``python3 -I -S -c SHIM socket port limit -- argv``.
#: Threads, not asyncio (it must start fast and stay small); bounded to MAX_TUNNELS connections at once.
SHIM = r"""
import os, signal, socket, subprocess, sys, threading
path, port, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
argv = sys.argv[5:]
gate = threading.BoundedSemaphore(limit)
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(limit)
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(c):
    try:
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            u.connect(path)
        except OSError:
            return
        t = threading.Thread(target=pipe, args=(u, c), daemon=True)
        t.start()
        pipe(c, u)
        t.join()
        u.close()
    finally:
        c.close()
        gate.release()
def accept():
    while True:
        c, _ = srv.accept()
        if not gate.acquire(blocking=False):
            c.close()
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
child = subprocess.Popen(argv)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda n, f: child.send_signal(n))
code = child.wait()
sys.exit(code if code >= 0 else 128 - code)
"""


def shim_line(python: str, argv: Sequence[str]) -> list[str]:
    return [python, "-I", "-S", "-c", SHIM, f"{SOCKET_DIR}/proxy.sock", str(PROXY_PORT), str(MAX_TUNNELS), "--", *argv]


def proxy_env() -> dict[str, str]:
    url = f"http://127.0.0.1:{PROXY_PORT}"
    out = {name: url for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")}
    out.update({name.lower(): url for name in out})
    return out


def system_python() -> str | None:
    """An interpreter the sandbox shows (the system's): the real file behind hopline's own, if it is
    under /usr; else the first python3 on the system PATH."""
    real = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    if real.startswith("/usr/") and os.access(real, os.X_OK):
        return real
    return shutil.which("python3", path="/usr/bin:/bin")


class EgressProxy:
    """One backend's egress: a CONNECT proxy on a Unix socket that applies ``rules``."""

    def __init__(self, rules: Sequence[Rule], *, name: str, max_tunnels: int = MAX_TUNNELS) -> None:
        self.rules = tuple(rules)
        self.name = name
        self.max_tunnels = max_tunnels
        self.tunnels = 0
        self.allowed = 0
        self.refused = 0
        self.directory: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._open: set[asyncio.Task[Any]] = set()
        self._logged: dict[tuple[str, int], float] = {}

    def describe(self) -> dict[str, Any]:
        return {"allow": [_show(r) for r in self.rules], "tunnels": self.tunnels, "allowed": self.allowed,
                "refused": self.refused}  # fmt: skip

    async def start(self) -> str:
        """Listen; returns the directory to bind into the sandbox (its socket is ``proxy.sock``)."""
        if self._server is not None:
            return self.directory  # type: ignore[return-value]
        self.directory = tempfile.mkdtemp(prefix="hopline-egress-")
        os.chmod(self.directory, 0o711)  # the sandbox's uid passes through to the socket; nobody lists the name
        path = os.path.join(self.directory, "proxy.sock")
        self._server = await asyncio.start_unix_server(self._serve, path, limit=MAX_HEAD)
        os.chmod(path, 0o666)
        return self.directory

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._open):
            task.cancel()
        if self._open:
            await asyncio.gather(*self._open, return_exceptions=True)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open.add(task)
        try:
            await self._tunnel(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self._open.discard(task)
            writer.close()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.tunnels >= self.max_tunnels:
            return await self._refuse(writer, "", 0, f"{self.max_tunnels} tunnels are open already", status=503)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except asyncio.LimitOverrunError:
            return await self._refuse(writer, "", 0, "request head too large", status=431)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError):
            return
        words = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(words) != 3 or words[0] != "CONNECT":
            return await self._refuse(writer, "", 0, "only CONNECT (https and other tunnels) is relayed", status=405)
        host, port = _authority(words[1])
        if host is None:
            return await self._refuse(writer, "", 0, "CONNECT names host:port", status=400)
        if matching(self.rules, host, port) is None:
            return await self._refuse(writer, host, port, "not in this backend's allow-list")
        try:
            infos = await asyncio.wait_for(
                asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM), CONNECT_TIMEOUT
            )
        except (OSError, asyncio.TimeoutError):
            return await self._refuse(writer, host, port, "the name does not resolve", status=502)
        addresses = list(dict.fromkeys(info[4][0] for info in infos))
        if not addresses or not all(address_allowed(a, port, self.rules) for a in addresses):
            return await self._refuse(writer, host, port, "it resolves to an address that is not allowed")
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(addresses[0], port), CONNECT_TIMEOUT
            )  # a checked address: never resolved again
        except (OSError, asyncio.TimeoutError):
            return await self._refuse(writer, host, port, "the destination did not accept the connection", status=502)
        self.allowed += 1
        self.tunnels += 1
        try:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self.tunnels -= 1
            up_writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter, host: str, port: int, why: str, status: int = 403) -> None:
        self.refused += 1
        where = f" to {host}:{port}" if host else ""
        now = time.monotonic()
        if now - self._logged.get((host, port), -_LOG_EVERY) >= _LOG_EVERY:
            self._logged[(host, port)] = now
            while len(self._logged) > 1024:
                self._logged.pop(next(iter(self._logged)))
            log.warning("backend %s: sandbox egress%s refused: %s", self.name, where, why)
        body = f"hopline egress{where} refused: {why}\n".encode()
        reason = _REASONS[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def _authority(text: str) -> tuple[str | None, int]:
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        raw = rest[1:] if sep and rest.startswith(":") else ""
    else:
        host, _, raw = text.rpartition(":")
    if not host or not raw.isdigit() or not 0 < int(raw) < 65536:
        return None, 0
    return canonical_host(host), int(raw)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


def _show(rule: Rule) -> str:
    host = f"[{rule.host}]" if ":" in rule.host else rule.host
    return host if rule.ports == (443, 80) else f"{host}:{rule.ports[0]}"
