"""Transparent mode's TLS termination (``tls: terminate``) keeps the front door's bounds
during the handshake (issue 29 item 4): a connection that sends nothing, or half a
ClientHello, holds a place under ``max_connections`` / ``max_connections_per_source`` like a
plaintext one and is closed at the header deadline (the TLS handshake ran outside the caps,
60 s each: 200 stalled connections took 200 descriptors). A client from another address,
with a real TLS handshake (the ``ssl`` module), is served meanwhile."""

from __future__ import annotations

import asyncio
import socket
import ssl

import psutil
import pytest
import yaml

from tests.conftest import PY, start
from tests.modes.test_transparent_intercept import _ca, _pem
from tests.peers import bounded

PER_SOURCE = 8
STALLED = 40


def client_hello() -> bytes:
    """The first flight of a real TLS client (ssl module, in memory), SNI tools.test."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="tools.test")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


@pytest.fixture
def terminating(tmp_path):
    """``hopline serve`` terminating TLS with a minting CA: (its process, port, the CA file)."""
    ca, ca_key = _ca("operator test CA")
    (tmp_path / "ca.pem").write_bytes(_pem(ca))
    (tmp_path / "ca-key.pem").write_bytes(_pem(key=ca_key))
    config = {
        "mode": "transparent",
        "listen": {"host": "127.0.0.1", "port": 0,
                   "limits": {"max_connections_per_source": PER_SOURCE, "header_timeout": 1.0}},
        "transparent": {"level": 1, "destination": "host", "destinations": {"tools.test:8443": "https://127.0.0.1:9"},
                        "tls": "terminate", "ca": {"cert": str(tmp_path / "ca.pem"), "key": str(tmp_path / "ca-key.pem")}},
    }  # fmt: skip
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = start([PY, "-m", "hopline", "serve", str(path)])
    try:
        port = int(proc.wait_line(r"at https://127\.0\.0\.1:(\d+)").group(1))
        yield proc, port, str(tmp_path / "ca.pem")
    finally:
        proc.stop()


def healthz(port: int, cafile: str) -> bytes:
    """A real TLS client from 127.0.0.2 (another source): GET /healthz, the answer's status line."""
    context = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.2", 0)) as raw:
        with context.wrap_socket(raw, server_hostname="tools.test") as tls:
            tls.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
    return answer.split(b"\r\n", 1)[0]


async def until_closed(reader: asyncio.StreamReader) -> None:
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass


async def test_stalled_tls_handshakes_count_under_the_caps_and_end_at_the_header_deadline(terminating):
    proc, port, cafile = terminating
    hopline = psutil.Process(proc.popen.pid)
    assert healthz(port, cafile).startswith(b"HTTP/1.1 200")
    before = hopline.num_fds()
    hello = client_hello()
    stalled = []
    try:
        for n in range(STALLED):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            if n % 2:
                writer.write(hello[: len(hello) // 2])  # half a ClientHello
            stalled.append((reader, writer))
        await asyncio.sleep(0.3)  # let hopline accept them all
        held = hopline.num_fds() - before
        assert held <= PER_SOURCE + 2, f"{held} descriptors for {STALLED} stalled handshakes (cap {PER_SOURCE})"
        assert (await asyncio.to_thread(healthz, port, cafile)).startswith(b"HTTP/1.1 200")  # another source is served
        # Past the cap closed at once, the others at the 1 s header deadline (not asyncio's 60 s):
        await bounded(asyncio.gather(*(until_closed(reader) for reader, _ in stalled)), 20)
    finally:
        for _, writer in stalled:
            writer.close()
    assert (await asyncio.to_thread(healthz, port, cafile)).startswith(b"HTTP/1.1 200")
    assert hopline.num_fds() <= before + 2
