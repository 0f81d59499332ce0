"""Real parts of the per-user upstream tests: oidc-provider (npm, pinned) as the upstream authorization server,
an official-SDK MCP server (tests/servers/protected_server.py) that accepts only its tokens for its resource."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import PY, SERVERS, start
from tests.peers import stop
from tests.signin.harness import NODE22, NODE_DIR

PUBLIC = "https://gateway.test"
CALLBACK = PUBLIC + "/connect/callback"
CLIENT_SECRET = "upstream-client-secret-0123456789abcdef"
TOKEN_TTL = 3600


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
def upstream():
    """The upstream server and its authorization server: the server binds first and says its URL (the resource
    the AS issues tokens for), then learns the AS's issuer on stdin."""
    server = start([PY, str(SERVERS / "protected_server.py")], stdin=subprocess.PIPE)
    as_proc = None
    try:
        url = server.wait_line(r"protected_server: (\S+)").group(1)
        as_proc, issuer = start_as(url)
        server.popen.stdin.write(issuer.encode() + b"\n")
        server.popen.stdin.flush()
        yield Upstream(issuer, url)
    finally:
        server.stop()
        if as_proc is not None:
            stop(as_proc)
