"""Many users, one gateway (issue 28): a `command` backend's children are one per principal
by default (``share: principal``, layers/session/sharing.py), so nothing a server holds in
process memory reaches another principal; one principal's sessions share its child.

Real parts: server-sequential-thinking (npm, pinned in tests/node), which keeps its thought
history per process, served by ``hopline serve`` with two API keys, and the official SDK
client in both eras.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from mcp import MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.peers import bounded, client

THINKING = Path(__file__).resolve().parents[1] / "node" / "node_modules" / "@modelcontextprotocol" / "server-sequential-thinking" / "dist" / "index.js"
NODE = shutil.which("node")
if NODE is None or not THINKING.exists():  # pragma: no cover - scripts/test installs it
    pytest.fail(f"server-sequential-thinking is not installed at {THINKING}; run scripts/test (npm ci in tests/node)", pytrace=False)

KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789ab"}
MODERN = "2026-07-28"


def write(tmp_path: Path, backend: dict | None = None, **top) -> str:
    conf = {
        "backends": {"think": {"command": NODE, "args": [str(THINKING)], **(backend or {})}},
        "auth": {"resource": "http://127.0.0.1/mcp", "api_keys": [{"name": n, "key": k} for n, k in KEYS.items()]},
        **top,
    }
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path)


def as_(url: str, who: str, mode: str = "legacy"):
    return client(streamable_http_client(url, http_client=create_mcp_http_client(headers={"x-api-key": KEYS[who]})), mode)


async def think(c) -> int:
    """One thought; the history length the server reports (its per-process state)."""
    result = await bounded(c.call_tool("think__sequentialthinking", {"thought": "t", "thoughtNumber": 1, "totalThoughts": 3, "nextThoughtNeeded": True}))
    assert not result.is_error, result
    return json.loads(result.content[0].text)["thoughtHistoryLength"]


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_two_principals_see_independent_state_and_one_principals_sessions_share(tmp_path, hopline_serve, mode):
    gw = hopline_serve(write(tmp_path))
    async with as_(gw.url, "alice", mode) as a1, as_(gw.url, "alice", mode) as a2, as_(gw.url, "bob", mode) as b1:
        assert await think(a1) == 1
        assert await think(b1) == 1  # bob's child is not alice's: her thought is not in his history
        assert await think(a2) == 2  # alice's second session shares her child
        assert await think(b1) == 2
        assert await think(a1) == 3
    async with as_(gw.url, "bob", mode) as b2:
        assert await think(b2) == 3  # a new session of bob's: his child, his history


async def test_share_shared_is_the_explicit_opt_in_to_one_child_for_everyone(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"share": "shared"}))
    async with as_(gw.url, "alice") as a, as_(gw.url, "bob") as b:
        assert await think(a) == 1
        assert await think(b) == 2  # what the operator asked for, and `hopline check` warns about


async def test_at_the_cap_an_idle_principals_child_is_given_back_to_another(tmp_path, hopline_serve):
    """``max_children: 1``: each principal's call takes the one slot from the other's idle child
    (which is reaped), so a history never survives into another principal's hands."""
    gw = hopline_serve(write(tmp_path, {"max_children": 1}))
    async with as_(gw.url, "alice") as a, as_(gw.url, "bob") as b:
        assert await think(a) == 1
        assert await think(b) == 1  # alice's idle child went back to the pool; bob's is new
        assert await think(a) == 1  # and bob's went back for alice: a fresh child, not his
        assert len([p for p in gw.descendants() if p.is_running() and p.status() != "zombie"]) <= 1


def test_anonymous_clients_are_one_principal_on_loopback_and_one_per_session_elsewhere():
    """The sharer of a client session (sharing.Sharing.sharer) under the real configuration."""
    from types import SimpleNamespace

    from hopline.config.schema import GatewayConfig
    from hopline.context import ANONYMOUS, Principal
    from hopline.layers.session.sharing import Sharing

    def sharing(**conf) -> Sharing:
        config = GatewayConfig.model_validate({"backends": {"b": {"command": "x"}}, **conf})
        return Sharing(SimpleNamespace(settings=config, registry=SimpleNamespace(share_key=lambda b, p: b)))

    def session(principal=ANONYMOUS):
        return SimpleNamespace(principal=principal, sharer=None)

    local = sharing()
    one, two = session(), session()
    assert local.sharer(one) == local.sharer(two) == ANONYMOUS
    exposed = sharing(listen={"host": "0.0.0.0"})
    assert exposed.sharer(one) != exposed.sharer(two)
    assert exposed.sharer(one) == exposed.sharer(one)  # stable for the session's life
    assert exposed.base_key("b", exposed.sharer(one)) != exposed.base_key("b", exposed.sharer(two))
    alice = Principal("alice", issuer="api-key")
    assert exposed.sharer(session(alice)) == alice  # an authenticated caller is itself
    opted = sharing(listen={"host": "0.0.0.0"}, routing={"share_anonymous": True})
    assert opted.sharer(session()) == opted.sharer(session()) == ANONYMOUS
    assert sharing(backends={"b": {"command": "x", "share": "shared"}}).base_key("b", alice) == "b"


async def test_a_principal_refused_at_the_cap_gets_a_child_as_soon_as_one_is_free(tmp_path, hopline_serve):
    """``max_children: 1`` and alice's call holds the one child: bob is refused (-31001, the cap),
    and once her call is answered his next call gets a child at once; the refusal is the pool's
    back-pressure, not a failed start held against him for ``routing.retry_after``."""
    import asyncio

    from tests.conftest import PY, SERVERS

    sdk = {"command": PY, "args": [str(SERVERS / "sdk_server.py"), "stdio"], "max_children": 1}
    conf = {
        "backends": {"sdk": sdk},
        "routing": {"retry_after": 60},
        "auth": {"resource": "http://127.0.0.1/mcp", "api_keys": [{"name": n, "key": k} for n, k in KEYS.items()]},
    }
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    async with as_(gw.url, "alice") as a, as_(gw.url, "bob", MODERN) as b:
        assert (await bounded(a.call_tool("sdk__echo", {"text": "a"}))).content[0].text == "a"
        held = asyncio.ensure_future(a.call_tool("sdk__slow", {"ms": 8000}))  # outlasts bob's wait for a slot (5 s)
        with pytest.raises(MCPError) as refused:
            await bounded(b.call_tool("sdk__echo", {"text": "b"}))
        assert refused.value.error.code == -31001 and "at its cap of 1 child process" in refused.value.error.message
        await bounded(held)
        assert (await bounded(b.call_tool("sdk__echo", {"text": "b"}))).content[0].text == "b"
