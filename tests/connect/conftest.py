"""Real parts of the per-user upstream tests: oidc-provider (npm, pinned) as the upstream authorization server,
an official-SDK MCP server (tests/servers/protected_server.py) that accepts only its tokens for its resource."""

from __future__ import annotations

import base64
import json
import subprocess

import pytest
import yaml

from tests.conftest import PY, SERVERS, start
from tests.peers import stop
from tests.signin.harness import NODE22, NODE_DIR

PUBLIC = "https://gateway.test"
CALLBACK = PUBLIC + "/connect/callback"
CLIENT_SECRET = "upstream-client-secret-0123456789abcdef"
TOKEN_TTL = 3600
JWT_SECRET = "front-door-hmac-secret-0123456789abcdef"  # the front door's issuer (HS256) in the gateway tests
ISSUER = "https://idp.example"
KEY = base64.urlsafe_b64encode(b"c" * 32).decode()  # auth.connect.secret_key


class Upstream:
    def __init__(self, issuer: str, url: str) -> None:
        self.issuer, self.url = issuer, url


def start_as(resource: str, ttl: int = TOKEN_TTL) -> tuple[subprocess.Popen, str]:
    node = str(NODE22) if NODE22.exists() else "node"
    proc = subprocess.Popen(
        [node, str(NODE_DIR / "oidc_upstream_as.mjs"), CALLBACK, CLIENT_SECRET, resource, str(ttl)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()  # type: ignore[union-attr]
    if not line:
        proc.kill()
        raise RuntimeError("oidc-provider did not start (npm ci --prefix tests/node)")
    return proc, json.loads(line)["issuer"]


@pytest.fixture(scope="module")
def upstream(request):
    """The upstream server and its authorization server: the server binds first and says its URL (the resource
    the AS issues tokens for), then learns the AS's issuer on stdin. A test module's ``TOKEN_TTL`` sets the
    access tokens' lifetime."""
    server = start([PY, str(SERVERS / "protected_server.py")], stdin=subprocess.PIPE)
    as_proc = None
    try:
        url = server.wait_line(r"protected_server: (\S+)").group(1)
        as_proc, issuer = start_as(url, getattr(request.module, "TOKEN_TTL", TOKEN_TTL))
        server.popen.stdin.write(issuer.encode() + b"\n")
        server.popen.stdin.flush()
        yield Upstream(issuer, url)
    finally:
        server.stop()
        if as_proc is not None:
            stop(as_proc)


@pytest.fixture(scope="module")
def gateway(upstream, tmp_path_factory):
    """``hopline serve`` with ``up`` as a user_oauth backend, front-door JWTs of ISSUER (HS256)."""
    tmp = tmp_path_factory.mktemp("connect")
    conf = {
        "backends": {"up": {"url": upstream.url}},
        "listen": {"allowed_hosts": ["gateway.test"]},
        "auth": {
            "resource": PUBLIC + "/mcp",
            "issuers": [{"issuer": ISSUER, "keys": [{"alg": "HS256", "secret": "${JWT_SECRET}"}]}],
            "backends": {"up": {"mode": "user_oauth", "client_id": "hopline", "client_secret": "${UP_SECRET}"}},
            "connect": {"public_url": PUBLIC, "secret_key": "${CONNECT_KEY}", "store": str(tmp / "tokens.sqlite3")},
        },
    }
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(conf))
    env = {"JWT_SECRET": JWT_SECRET, "UP_SECRET": CLIENT_SECRET, "CONNECT_KEY": KEY}
    proc = start([PY, "-m", "hopline", "serve", "--port", "0", "--admin-port", "0", "--lazy", str(path)], env)
    try:
        url, admin = "", ""
        while not (url and admin):  # the two lines, in either order
            line = proc.wait_line(r"(admin endpoint at (http://\S+)/metrics)|(at (http://\S+) \(Streamable HTTP\))")
            admin, url = line.group(2) or admin, line.group(4) or url
        proc.admin = admin
        proc.url, proc.store = url, str(tmp / "tokens.sqlite3")
        yield proc
    finally:
        proc.stop()
