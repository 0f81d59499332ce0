"""Issue 5's "done when", end to end through `hopline serve`: two callers with different
JWT claims hit the same endpoint and see two catalogues built from the same backends;
each is refused exactly what it cannot see, in every tool mode; the audit log shows the
decisions; the HTTP backend gets the gateway's injected credential, never a caller's token.

Peers: the official SDK client (with a Bearer token), a local JWKS server, the built-in
demo server over stdio and the recording SDK server over HTTP.
"""

from __future__ import annotations

import json

import pytest
import yaml
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.conftest import PY
from tests.peers import bounded, client, stop, text_of
from tests.servers import oauth_server, recorder_server
from tests.servers.oauth_server import ISSUER, RESOURCE, SigningKeys

RULES = [
    'has(jwt.roles) && "admin" in jwt.roles',  # admins see everything
    'mcp.backend == "demo" && mcp.tool.name in ["echo", "whoami"]',  # everyone: two demo tools
]


@pytest.fixture(scope="module")
def keys() -> SigningKeys:
    return SigningKeys()


@pytest.fixture
def world(tmp_path, keys):
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(keys.jwks()))
    record = tmp_path / "backend.jsonl"
    auth_proc, auth_base = oauth_server.start(jwks)
    backend_proc, backend_url = recorder_server.start(record)
    try:
        yield auth_base, backend_url, record
    finally:
        stop(backend_proc)
        stop(auth_proc)


def gateway_config(tmp_path, auth_base: str, backend_url: str, mode: str) -> tuple[str, str]:
    audit = tmp_path / f"audit-{mode}.jsonl"
    conf = {
        "backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}, "rec": {"url": backend_url, "transport": "streamable-http"}},
        "auth": {
            "resource": RESOURCE,
            "issuers": [{"issuer": ISSUER, "jwks_url": auth_base + "/jwks"}],
            "backends": {"rec": {"mode": "inject", "secret": "${REC_SECRET}"}},
        },
        "policy": {"rules": RULES, "audit": {"sink": str(audit)}},
        "tools": {"mode": mode},
    }
    path = tmp_path / f"gateway-{mode}.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path), str(audit)


def as_caller(url: str, token: str):
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return client(streamable_http_client(url, http_client=http), "legacy"), http


async def visible(c, mode: str) -> set[str]:
    """The tools this caller can find, whatever the mode shows up front."""
    if mode == "standard":
        return {t.name for t in (await bounded(c.list_tools())).tools}
    if mode == "search":
        found = await bounded(c.call_tool("get_tool", {"name": "nothing-by-this-name"}))
        return set(json.loads(found.content[0].text)["available_tools"])
    out = await bounded(c.call_tool("run_code", {"code": "list_tools()"}))
    return set(json.loads(out.content[0].text)["result"])


async def invoke(c, mode: str, name: str, arguments: dict) -> str:
    """Call a tool through the mode's own entry point; the refusal text if refused."""
    try:
        if mode == "standard":
            return text_of(await bounded(c.call_tool(name, arguments)))
        if mode == "search":
            return text_of(await bounded(c.call_tool("invoke_tool", {"name": name, "arguments": arguments})))
        out = await bounded(c.call_tool("run_code", {"code": f"call_tool({name!r}, {arguments!r})"}))
        return out.content[0].text if out.is_error else str(json.loads(out.content[0].text)["result"])
    except MCPError as exc:
        return exc.error.message


@pytest.mark.parametrize("mode", ["standard", "search", "code"])
@pytest.mark.req("POLICY-LIST-CALL")
async def test_two_callers_two_catalogues_one_decision_in_every_mode(tmp_path, world, keys, hopline_serve, monkeypatch, mode):
    auth_base, backend_url, record = world
    monkeypatch.setenv("REC_SECRET", "gateway-own-secret")
    path, audit = gateway_config(tmp_path, auth_base, backend_url, mode)
    gw = hopline_serve(path)
    admin, viewer = keys.mint(sub="alice", roles=["admin"]), keys.mint(sub="bob", roles=["viewer"])

    seen: dict[str, set[str]] = {}
    for who, token in (("alice", admin), ("bob", viewer)):
        c, http = as_caller(gw.url, token)
        try:
            async with c:
                seen[who] = await visible(c, mode)
                if who == "alice":
                    assert "echo" in await invoke(c, mode, "rec__echo", {"text": "echo"})
                else:
                    for hidden in ("rec__echo", "demo__add"):
                        refused = await invoke(c, mode, hidden, {"text": "x"} if hidden == "rec__echo" else {"a": 1, "b": 2})
                        absent = await invoke(c, mode, hidden.replace("__", "__no_such_"), {})
                        assert f"Unknown tool: {hidden!r}" in refused
                        last = lambda text: text.strip().splitlines()[-1]  # noqa: E731 (code mode: the error line of a traceback)
                        assert last(refused).replace(hidden, "X") == last(absent).replace(hidden.replace("__", "__no_such_"), "X")
                    assert await invoke(c, mode, "demo__echo", {"text": "allowed"}) == "allowed"
        finally:
            await http.aclose()
    assert {"rec__echo", "demo__add", "demo__echo"} <= seen["alice"]
    assert seen["bob"] == {"demo__echo", "demo__whoami"}

    # The backend got the gateway's own credential, never a caller's token.
    raw = record.read_text()
    headers = [dict((k.lower(), v) for k, v in json.loads(line)["headers"]) for line in raw.splitlines()]
    assert headers and all(h.get("authorization") == "Bearer gateway-own-secret" for h in headers)
    for token in (admin, viewer):
        assert token.split(".")[2] not in raw

    # Every refused invoke is in the audit log, with who and what; no token in it.
    lines = [json.loads(line) for line in open(audit)]
    text = json.dumps(lines)
    denied = [entry for entry in lines if entry.get("decision") in ("deny", "reject", "refused")]
    assert any(entry.get("principal") == "bob" for entry in denied), lines[-5:]
    assert admin.split(".")[2] not in text and viewer.split(".")[2] not in text
