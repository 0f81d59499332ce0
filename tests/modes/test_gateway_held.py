"""Version mediation, 2026-07-28 client × handshake-only backend (layers/session/held.py,
layers/session/held_invoke.py): the backend's real server→client requests (sampling, elicitation)
reach a 2026-07-28 SDK client as ``input_required`` results; the gateway holds the backend
call open across the client's retries and the tool's result equals the handshake-era one.
A ``requestState`` from another caller, or forged, is refused; a held call the client
abandons is ended."""

from __future__ import annotations

import httpx
import orjson
import pytest
import yaml

from tests.peers import bounded, client, start_sdk_http, stop, text_of

MODERN = "2026-07-28"


@pytest.fixture
def old_backend():
    proc, url = start_sdk_http("--handshake-only")
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture
def gateway(tmp_path, hopline_serve, old_backend):
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump({"backends": {"old": {"url": old_backend}}}))
    return hopline_serve(str(path))


async def test_a_2026_client_answers_a_handshake_backends_requests_through_mrtr(gateway):
    async with client(gateway.url, MODERN) as c:
        assert c.protocol_version == MODERN
        assert text_of(await bounded(c.call_tool("old__sample_direct", {"prompt": "gw"}))) == "test-model: sampled:gw"
        assert "accept" in text_of(await bounded(c.call_tool("old__elicit_direct", {"message": "ok?"})))
        assert text_of(await bounded(c.call_tool("old__echo", {"text": "plain"}))) == "plain"  # no input: no hold
    async with client(gateway.url, "legacy") as c:  # the same tool, handshake era, for comparison
        assert text_of(await bounded(c.call_tool("old__sample_direct", {"prompt": "gw"}))) == "test-model: sampled:gw"


async def test_the_input_required_round_and_a_foreign_or_forged_state(gateway):
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "old__sample_direct"}

    async def call(params: dict) -> dict:
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "old__sample_direct", "arguments": {"prompt": "raw"}, "_meta": meta, **params}}
        r = await http.post(gateway.url, content=orjson.dumps(body), headers=headers)
        return r.json() if r.headers["content-type"].startswith("application/json") else next(orjson.loads(l[5:]) for l in r.text.splitlines() if l.startswith("data:"))

    async with httpx.AsyncClient(timeout=20) as http:
        first = (await call({}))["result"]
        assert first["resultType"] == "input_required"
        ((key, ask),) = first["inputRequests"].items()
        assert ask["method"] == "sampling/createMessage" and ask["params"]["messages"][0]["content"]["text"] == "raw"
        forged = await call({"requestState": "hopline-held:not-a-real-one", "inputResponses": {key: {}}})
        assert forged["error"]["code"] == -32602 and "requestState" in forged["error"]["message"]
        reply = {"role": "assistant", "content": {"type": "text", "text": "by hand"}, "model": "m"}
        done = (await call({"requestState": first["requestState"], "inputResponses": {key: reply}}))["result"]
        assert done["content"][0]["text"] == "m: by hand"
        again = await call({"requestState": first["requestState"], "inputResponses": {key: reply}})
        assert again["error"]["code"] == -32602  # a finished held call is gone


async def test_progress_of_a_held_call_reaches_each_round_of_the_2026_client(gateway):
    """A long-running call that asks for input halfway: its progress before the question
    travels with the first round, the rest with the retry (each round is its own request)."""
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with client(gateway.url, MODERN) as c:
        done = await bounded(c.call_tool("old__progress_elicit", {"steps": 2}, progress_callback=on_progress))
    assert text_of(done) == "accepted: yes"
    assert seen == [(1, "before 1"), (2, "before 2"), (3, "after 3"), (4, "after 4")]
