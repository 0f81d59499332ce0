"""MRTR across replicas: a 2026-07-28 client in front of a handshake-only backend answers
the backend's request (sampling) through ``input_required``; its retry reaches the other
replica, which hands it to the one holding the backend call open (transports/replica_link.py)."""

from __future__ import annotations

import httpx
import orjson
import pytest

from tests import peers
from tests.scaleout.conftest import Cluster, replica_config

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "old__sample_direct",
}


@pytest.fixture
def held_replicas(tmp_path):
    proc, backend = peers.start_sdk_http("--handshake-only")
    c = Cluster(tmp_path)
    try:
        c.start_redis()
        config = replica_config(c.redis_url, c.key)
        config["backends"] = {"old": {"url": backend}}
        yield c, c.start_replica(config), c.start_replica(config)
    finally:
        c.close()
        peers.stop(proc)


async def call(http: httpx.AsyncClient, url: str, params: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "old__sample_direct", "arguments": {"prompt": "raw"}, "_meta": META, **params}}
    r = await http.post(url, content=orjson.dumps(body), headers=HEADERS)
    if r.headers["content-type"].startswith("application/json"):
        return r.json()
    return next(orjson.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:"))


async def test_the_retry_of_a_held_call_is_answered_through_another_replica(held_replicas):
    c, a, b = held_replicas
    reply = {"role": "assistant", "content": {"type": "text", "text": "by hand"}, "model": "m"}
    async with httpx.AsyncClient(timeout=20) as http:
        first = (await call(http, a.url, {}))["result"]
        assert first["resultType"] == "input_required"
        ((key, _ask),) = first["inputRequests"].items()
        done = (await call(http, b.url, {"requestState": first["requestState"], "inputResponses": {key: reply}}))["result"]
        assert done["content"][0]["text"] == "m: by hand"
        again = await call(http, b.url, {"requestState": first["requestState"], "inputResponses": {key: reply}})
        assert again["error"]["code"] == -32602  # finished: gone, wherever it is asked

        # the replica holding a call dies: the retry says so, at once
        second = (await call(http, a.url, {}))["result"]
        c.kill(a)
        gone = await call(http, b.url, {"requestState": second["requestState"], "inputResponses": {key: reply}})
        assert "the replica holding this call is gone" in gone["error"]["message"]


async def test_a_request_not_signed_with_the_deployments_key_is_dropped(held_replicas):
    """Whoever can publish on the replicas' Redis cannot hand a replica work without the key."""
    import redis.asyncio

    c, a, b = held_replicas
    async with httpx.AsyncClient(timeout=20) as http:
        await call(http, a.url, {})  # a replica serves: its link listens
    r = redis.asyncio.Redis.from_url(c.redis_url)
    try:
        channels = await r.pubsub_channels("hopline:r:*")
        assert channels
        forged = orjson.dumps({"k": "req", "id": "x", "from": "evil", "t": 0, "body": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, "who": {"subject": "admin"}})
        for channel in channels:
            assert await r.publish(channel, b"\0" * 32 + forged) == 1
    finally:
        await r.aclose()
    await peers.eventually(lambda: sum("not signed with this deployment's key" in line for p in (a, b) for line in p.stderr) >= 1, what="the forged request refused")
