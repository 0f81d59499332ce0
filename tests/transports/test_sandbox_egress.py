"""A sandboxed stdio backend with an allow-list (issue 35): its only way out is hopline's egress proxy.

The hostile server (tests/servers/hostile.py) runs with ``network: none`` and
``allow: [127.0.0.1:<echo>, localhost:<other>]``. Through the HTTPS_PROXY the sandbox gives it, a
CONNECT to the listed address reaches a real echo server on hopline's loopback; everything else
is refused by the proxy with a reason (an address not listed, a listed *name* that resolves to
loopback, cloud metadata), a connection that skips the proxy finds no network at all, and /status
counts what was let through and refused.
"""

from __future__ import annotations

import os
import socket
import threading

import psutil
import pytest
import yaml

from tests.conftest import PY, SERVERS, start
from tests.peers import bounded, client, text_of


def echo_server() -> socket.socket:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(4096)
                conn.sendall(b"echo:" + data)

    threading.Thread(target=serve, daemon=True).start()
    return listener


def config_text(sandbox: dict) -> str:
    boxed = {"command": PY, "args": [str(SERVERS / "hostile.py")], "sandbox": sandbox}
    return yaml.safe_dump({"backends": {"boxed": boxed}})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("egress")
    echo, other = echo_server(), echo_server()
    port, other_port = echo.getsockname()[1], other.getsockname()[1]
    sandbox = {"profile": "network-off", "allow": [f"127.0.0.1:{port}", f"localhost:{other_port}"]}
    path = tmp / "gateway.yaml"
    path.write_text(config_text(sandbox))
    proc = start([PY, "-m", "hopline", "serve", str(path), "--port", "0", "--admin-port", "0"])
    try:
        url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)", timeout=60).group(1)
        admin = int(proc.wait_line(r"admin endpoint at http://[^:]+:(\d+)/").group(1))
        assert proc.wait_line(r"backend boxed: (.*)", timeout=60).group(1).startswith("up")
        yield {"proc": proc, "url": url, "admin": admin, "port": port, "other": other_port}
    finally:
        children = proc.descendants()
        proc.stop()
        echo.close()
        other.close()
        _, alive = psutil.wait_procs(children, timeout=5)
        for p in alive:
            p.kill()
        assert not alive, f"hopline left children behind: {alive}"


async def call(world, tool: str, **args) -> str:
    async with client(world["url"], "legacy") as c:
        return text_of(await bounded(c.call_tool(f"boxed__{tool}", args)))


async def test_a_listed_address_is_reached_through_the_proxy(world):
    text = await call(world, "tunnel", host="127.0.0.1", port=world["port"], message="hello")
    assert text == "OK: echo:hello"


async def test_without_the_proxy_there_is_no_network(world):
    text = await call(world, "connect", host="127.0.0.1", port=world["port"])
    assert text.startswith("DENIED"), text


async def test_a_port_not_listed_is_refused_with_the_reason(world):
    text = await call(world, "tunnel", host="127.0.0.1", port=world["other"], message="x")
    assert text.startswith("DENIED: HTTP/1.1 403 Forbidden") and "not in this backend's allow-list" in text, text


async def test_a_listed_name_that_resolves_to_loopback_is_refused(world):
    """A name must resolve to public addresses: loopback is reachable only when listed as an address."""
    text = await call(world, "tunnel", host="localhost", port=world["other"], message="x")
    assert text.startswith("DENIED: HTTP/1.1 403") and "resolves to an address that is not allowed" in text, text


async def test_cloud_metadata_is_refused(world):
    text = await call(world, "tunnel", host="169.254.169.254", port=80, message="x")
    assert text.startswith("DENIED: HTTP/1.1 403"), text


async def test_status_counts_what_the_proxy_let_through_and_refused(world):
    import httpx

    await call(world, "tunnel", host="127.0.0.1", port=world["other"], message="x")
    async with httpx.AsyncClient(timeout=20) as http:
        status = (await http.get(f"http://127.0.0.1:{world['admin']}/status")).json()
    boxed = next(b for b in status["backends"] if b["id"] == "boxed")["sandbox"]
    assert boxed["allow"] == [f"127.0.0.1:{world['port']}", f"localhost:{world['other']}"]
    assert boxed["egress"]["refused"] >= 1 and boxed["egress"]["allowed"] >= 0
    assert boxed["egress"]["allow"] == boxed["allow"]
    world["proc"].wait_line(r"sandbox egress to 127\.0\.0\.1:\d+ refused: not in this backend's allow-list")


def test_the_proxy_socket_is_gone_after_hopline_stops(tmp_path):
    """Checked on the directories hopline made: none is left once a gateway with an allow-list exits."""
    before = {d for d in os.listdir("/tmp") if d.startswith("hopline-egress-")}
    path = tmp_path / "gateway.yaml"
    sandbox = {"profile": "network-off", "allow": ["127.0.0.1:9"]}
    path.write_text(config_text(sandbox))
    proc = start([PY, "-m", "hopline", "serve", str(path), "--port", "0"])
    try:
        assert proc.wait_line(r"backend boxed: (.*)", timeout=60).group(1).startswith("up")
        during = {d for d in os.listdir("/tmp") if d.startswith("hopline-egress-")} - before
        assert len(during) == 1
    finally:
        proc.stop()
    assert not ({d for d in os.listdir("/tmp") if d.startswith("hopline-egress-")} - before)
