"""Fixtures of the sign-in tests: the identity provider and one gateway in front of it, per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PY, start
from tests.peers import stop
from tests.signin import harness as h


class Gateway(str):
    """The gateway's loopback base URL (a str), with the path of its sign-in store."""

    def __new__(cls, url: str, store: Path) -> "Gateway":
        out = super().__new__(cls, url)
        out.store = store
        return out


@pytest.fixture(scope="module")
def idp():
    proc, issuer = h.start_idp()
    try:
        yield issuer
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def gateway(idp, tmp_path_factory):
    """The gateway's loopback base URL (http://127.0.0.1:P); its public one is https://gateway.test."""
    tmp = tmp_path_factory.mktemp("signin")
    path = h.gateway_config(
        tmp,
        idp,
        client_metadata={"allow_addresses": ["127.0.0.0/8"], "timeout": 1.0, "max_bytes": 4096},
        registration={"enabled": True, "per_minute": 5, "max_clients": 100},
        clients=[
            {"client_id": "static-cli", "client_name": "Static CLI", "redirect_uris": ["http://127.0.0.1/callback"]},
            {
                "client_id": "confidential",
                "client_secret": "confidential-secret-0123456789",
                "redirect_uris": ["https://app.example/cb"],
            },
        ],
    )
    proc = start([PY, "-m", "hopline", "serve", "--port", "0", "--lazy", str(path)], h.ENV)
    try:
        url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)").group(1)
        yield Gateway(url.rsplit("/mcp", 1)[0], tmp / "signin.sqlite3")
    finally:
        proc.stop()
