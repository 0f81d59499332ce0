"""The DNS-rebinding Host check (reference/mcp-wire.md §9; transports/http_util.py and
observability/admin.py) is on when a listener binds loopback only, decided by the address it
binds and not by how ``listen.host`` is spelled: ``LOCALHOST`` and ``2130706433`` bind
127.0.0.1 as ``127.0.0.1`` does (issue 29 item 5: they turned the check off)."""

from __future__ import annotations

import httpx
import orjson
import pytest
import yaml

from tests.conftest import PY

JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
SPELLINGS = ["LOCALHOST", "2130706433", "127.1"]


def initialize(url: str, host: str | None = None) -> httpx.Response:
    headers = {**JSON, **({"host": host} if host else {})}
    return httpx.post(url, content=orjson.dumps(INIT), headers=headers, timeout=10)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_gateway_and_its_admin_listener_refuse_a_foreign_host_however_loopback_is_written(tmp_path, hopline_serve, spelling):
    config = {
        "name": "host-check",
        "listen": {"host": spelling},
        "observability": {"metrics": {"host": spelling}},
        "backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}},
    }
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(config))
    gw = hopline_serve(str(path), "--admin-port", "0")
    admin = gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    assert gw.url.startswith("http://127.0.0.1:") and admin.startswith("http://127.0.0.1:")  # bound to loopback
    for host in ("evil.example", "evil.example:80"):
        r = initialize(gw.url, host)
        assert r.status_code == 403 and "Invalid Host header" in r.json()["error"]["message"], r.text
        for view in ("/status", "/config", "/metrics"):
            assert httpx.get(admin + view, headers={"host": host}, timeout=10).status_code == 403
    assert initialize(gw.url).status_code == 200  # a loopback Host is served
    assert httpx.get(admin + "/status", timeout=10).status_code == 200


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_relay_refuses_a_foreign_host_however_loopback_is_written(hopline_relay, spelling):
    relay = hopline_relay("--host", spelling)
    assert relay.url.startswith("http://127.0.0.1:")
    assert initialize(relay.url, "evil.example").status_code == 403
    assert initialize(relay.url).status_code == 200
