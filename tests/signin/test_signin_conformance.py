"""The official conformance suite's authorization-server scenarios (``conformance authorization``,
@modelcontextprotocol/conformance pinned in tests/node) against hopline's authorization server (auth.signin).

``authorization-server-metadata-endpoint`` reads the RFC 8414 document; ``authorization-code-grant`` prints an
authorization URL for a person to open, waits for the redirect at its own callback server, then redeems the
code (PKCE S256, RFC 8707 ``resource``) and checks the token response. The person is the test's browser
(tests/signin/harness.py): it signs in at oidc-provider, consents at hopline, and delivers the redirect.

The suite fetches the issuer URL itself, so hopline's public URL must be one it can reach: a TCP forwarder on
a loopback port bound first (port 0) is that URL, and forwards to the gateway, which binds its own port 0.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading

import httpx
import pytest

from tests.conftest import PY, start
from tests.peers import stop
from tests.signin import harness as h

pytestmark = pytest.mark.timeout(180)
SUITE = h.NODE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


class Forwarder:
    """A loopback TCP port, bound now, that forwards each connection to ``target`` once it is set."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.target: int | None = None
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._conn, sock=self.sock))
        self.loop.run_forever()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target)

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except OSError:
                pass
            finally:
                w.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def free_port() -> int:
    """The suite's callback server takes a port number (it binds 127.0.0.1:<port> itself)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    fwd = Forwarder()
    public = f"http://127.0.0.1:{fwd.port}"
    idp, issuer = h.start_idp(public + "/oauth/callback")
    tmp = tmp_path_factory.mktemp("conformance")
    clients = [
        {"client_id": "conformance", "client_name": "Conformance", "redirect_uris": ["http://127.0.0.1/callback"]}
    ]
    path = h.gateway_config(tmp, issuer, resource=public + "/mcp", clients=clients)
    gw = start([PY, "-m", "hopline", "serve", "--port", "0", "--lazy", str(path)], h.ENV)
    try:
        url = gw.wait_line(r"at (http://\S+) \(Streamable HTTP\)").group(1)
        fwd.target = httpx.URL(url).port
        yield public, tmp
    finally:
        gw.stop()
        stop(idp)
        fwd.close()


async def test_the_authorization_server_scenarios_pass(world):
    public, tmp = world
    port = free_port()
    out = tmp / "results"
    proc = subprocess.Popen(
        [str(h.NODE22), str(SUITE), "authorization", "--url", public, "--client-id", "conformance",
         "--resource", public + "/mcp", "--port", str(port), "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        url = None
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith(public + "/oauth/authorize?"):
                url = line.strip()
                break
        assert url, "".join(lines)
        callback = f"http://127.0.0.1:{port}/callback"
        async with httpx.AsyncClient(follow_redirects=False, timeout=20, trust_env=False) as browser:
            params = await h.sign_in(browser, url, "alice", callback)
            assert "code" in params, params
            delivered = await browser.get(callback, params=params)  # the person's browser lands on the suite's page
            assert delivered.status_code == 200
        rest = proc.stdout.read()  # type: ignore[union-attr]
        lines.append(rest)
        assert proc.wait(60) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    checks = {}
    for f in out.rglob("checks.json"):
        for c in json.loads(f.read_text()):
            checks[c["id"]] = c["status"]
    assert checks == {
        "authorization-server-metadata": "SUCCESS",
        "authorization-server-metadata-cimd": "SUCCESS",
        "authorization-code-grant": "SUCCESS",
    }, "".join(lines)
