"""Shared state fails closed (issue 29, items 1-3), attacked through a real redis-server.

An ended session does not come back: a DELETE whose end Redis cannot record is refused
(503), and a Redis that lost its memory (restarted without persistence) resumes none of
the sessions made before it. Someone who can write to Redis but lacks the session key
cannot make a replica act: a replayed envelope is not served again, an unsigned or
replayed message for a client's GET stream is dropped (and counted), a planted standing
request is not run, and a task record whose owner was rewritten is nobody's. A store
answer hopline did not write is a 503 with a JSON-RPC error, counted, never a 500.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio

from tests import peers
from tests.conftest import PY, SERVERS, Proc
from tests.modes.tasks_peers import call_task, task_rpc, tasks_client
from tests.modes.test_gateway_tasks import KEYS, api_keys, refused, unknown
from tests.scaleout.conftest import Cluster, replica_config
from tests.scaleout.test_shared_held import call as held_call
from tests.scaleout.test_shared_held import held_replicas  # noqa: F401 (a fixture)
from tests.scaleout.test_shared_state import Peer, closed_elsewhere, echo, messages

FAULT_SERVER = str(Path(__file__).resolve().parents[1] / "servers" / "fault_server.py")


def watched_config(c: Cluster, events: Path) -> dict[str, Any]:
    """A replica whose backend supports subscriptions and records each call; metrics served."""
    config = replica_config(c.redis_url, c.key)
    config["backends"] = {"f": {"command": PY, "args": [FAULT_SERVER, "--subscribe", "--events", str(events)]}}
    config["observability"] = {"metrics": {"port": 0}}
    return config


def admin_url(replica: Proc) -> str:
    return next(
        m.group(1) for line in replica.stderr if (m := re.search(r"admin endpoint at (http://\S+)/metrics", line))
    )


async def metric(http: httpx.AsyncClient, replica: Proc, name: str) -> float:
    text = (await http.get(admin_url(replica) + "/metrics")).text
    found = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


async def only_sid(r: redis.asyncio.Redis) -> str:
    """The session id inside the sealed one, as someone reading Redis finds it (its standing hash)."""
    keys = [k async for k in r.scan_iter(match="hopline:s:*")]
    assert len(keys) == 1, keys
    return keys[0].decode()[len("hopline:s:") :]


@pytest.fixture
def pair(tmp_path):
    """Redis and two replicas of the demo server: ``(cluster, replica A, replica B)``."""
    c = Cluster(tmp_path)
    try:
        c.start_redis()
        yield c, c.start_replica(), c.start_replica()
    finally:
        c.close()


@pytest.fixture
def watched(tmp_path):
    """Redis and two replicas of a backend with subscriptions: ``(cluster, A, B, events file)``."""
    events = tmp_path / "events.txt"
    events.touch()
    c = Cluster(tmp_path)
    try:
        c.start_redis()
        config = watched_config(c, events)
        yield c, c.start_replica(config), c.start_replica(config), events
    finally:
        c.close()


# -- 1. an ended session does not come back ---------------------------------------------------------------------
async def test_a_delete_that_redis_cannot_record_is_refused_not_answered_200(pair):
    """Redis unreachable (stopped, keeping its memory): the DELETE is 503 with a JSON-RPC
    error (the client retries), not a 200 for an end no other replica would know. Once
    Redis answers, the retry (here through B) ends it everywhere; whether Redis ran the
    refused attempt's commands when it woke (they were on its socket) only decides between
    200 and 404 for that retry."""
    c, a, b = pair
    async with httpx.AsyncClient(timeout=20) as http:
        peer = Peer(http)
        await peer.initialize(a.url)
        await peer.call(b.url, "tools/call", echo("b holds a copy"))
        headers = {"mcp-session-id": peer.sid}
        with c.frozen_redis():
            resp = await http.delete(a.url, headers=headers)
            assert resp.status_code == 503 and resp.headers["retry-after"] == "1", resp.text
            error = resp.json()["error"]
            assert "could not be ended" in error["message"] and error["data"]["limit"] == "session_store"
            answer = await peer.call(a.url, "tools/call", echo("still on a"))  # not closed here either
            assert answer["result"]["content"][0]["text"] == "still on a"
        assert (await http.delete(b.url, headers=headers)).status_code in (200, 404)
        await closed_elsewhere(a)
        third = c.start_replica()
        for url in (a.url, b.url, third.url):
            resp = await peer.post(url, "tools/call", echo("after"))
            if resp.status_code == 503 and url == a.url:  # A's failed DELETE marked its store down for
                # Retry-After (1 s: state.retry_interval), failing closed meanwhile; a client waits that out
                await asyncio.sleep(float(resp.headers["retry-after"]))
                resp = await peer.post(url, "tools/call", echo("after"))
            assert resp.status_code == 404, url  # never 200: the ended session does not come back


async def test_sessions_made_before_redis_lost_its_memory_are_not_resumed(pair):
    """Redis restarted without persistence forgets the ends: every session sealed under its
    former epoch is refused on a replica that must resume it (404: the client initializes
    again); the replica holding one keeps serving it; a session made afterwards moves."""
    c, a, b = pair
    async with httpx.AsyncClient(timeout=20) as http:
        ended, live = Peer(http), Peer(http)
        await ended.initialize(a.url)
        await live.initialize(a.url)
        assert (await http.delete(a.url, headers={"mcp-session-id": ended.sid})).status_code == 200
        assert (await ended.post(b.url, "tools/call", echo("x"))).status_code == 404
        c.stop_redis()
        c.start_redis()
        deadline = asyncio.get_running_loop().time() + 15
        while (resp := await ended.post(b.url, "tools/call", echo("back?"))).status_code == 503:  # B reconnects
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.1)
        assert resp.status_code == 404 and resp.json()["error"]["message"] == "Session not found"
        assert (await live.post(b.url, "tools/call", echo("x"))).status_code == 404
        assert (await live.call(a.url, "tools/call", echo("held")))["result"]["content"][0]["text"] == "held"
        fresh = Peer(http)
        await fresh.initialize(a.url)
        assert (await fresh.call(b.url, "tools/call", echo("moved")))["result"]["content"][0]["text"] == "moved"


# -- 2. what a replica reads from Redis is authenticated ----------------------------------------------------------
async def test_a_captured_envelope_published_again_is_not_served_again(held_replicas):  # noqa: F811
    c, a, b = held_replicas
    reply = {"role": "assistant", "content": {"type": "text", "text": "by hand"}, "model": "m"}
    r = redis.asyncio.Redis.from_url(c.redis_url)
    spy = r.pubsub()
    try:
        async with httpx.AsyncClient(timeout=20) as http:
            first = (await held_call(http, a.url, {}))["result"]
            ((key, _ask),) = first["inputRequests"].items()
            await spy.psubscribe("hopline:r:*")
            retry = {"requestState": first["requestState"], "inputResponses": {key: reply}}
            assert (await held_call(http, b.url, retry))["result"]["content"][0]["text"] == "m: by hand"
            seen: list[tuple[bytes, bytes]] = []
            while not any(orjson.loads(data[32:])["k"] == "res" for _, data in seen):
                message = await peers.bounded(spy.get_message(ignore_subscribe_messages=True, timeout=10), 15)
                if message is not None:
                    seen.append((message["channel"], message["data"]))
            ((to_a, request),) = [(ch, data) for ch, data in seen if orjson.loads(data[32:])["k"] == "req"]
            served = sum(1 for _, data in seen if orjson.loads(data[32:])["k"] == "res")
            assert served == 1
            from_b = f"hopline:r:{orjson.loads(request[32:])['from']}".encode()
            assert await r.publish(to_a, request) == 2  # A, and the spy
            assert await r.publish(from_b, request) == 2  # B itself: addressed to another replica
            await peers.eventually(
                lambda: any("already served (a replay)" in line for line in a.stderr), what="A refusing the replay"
            )
            await peers.eventually(
                lambda: any("addressed to another replica" in line for line in b.stderr), what="B refusing it"
            )
            # a fresh handed request is served: the link still works
            second = (await held_call(http, a.url, {}))["result"]
            ((key2, _),) = second["inputRequests"].items()
            again = {"requestState": second["requestState"], "inputResponses": {key2: reply}}
            assert (await held_call(http, b.url, again))["result"]["content"][0]["text"] == "m: by hand"
    finally:
        await spy.aclose()
        await r.aclose()


async def test_unsigned_forged_or_replayed_messages_never_reach_a_clients_get_stream(watched):
    """The client's GET stream is on A, its session copy on B has none: B publishes what its
    backend sends there. Someone writing to Redis publishes an elicitation ("re-enter your API
    key"), a result and a zero-signed message, then replays B's genuine one: the stream gets
    only B's genuine messages, in order, and A counts each dropped one."""
    c, a, b, _events = watched
    r = redis.asyncio.Redis.from_url(c.redis_url)
    spy = r.pubsub()
    try:
        async with httpx.AsyncClient(timeout=20) as http:
            peer = Peer(http)
            await peer.initialize(a.url)
            for uri in ("one", "two"):
                assert "result" in await peer.call(a.url, "resources/subscribe", {"uri": f"hopline://f/demo://{uri}"})
            sid = await only_sid(r)
            channel = f"hopline:n:{sid}"
            await spy.subscribe(channel)
            async with peer.get_stream(a.url) as stream:
                assert "result" in await peer.call(b.url, "tools/list")  # b resumes it (replays the subscribes)
                ask = {"mode": "form", "message": "re-enter your API key", "requestedSchema": {"type": "object"}}
                forged = [
                    orjson.dumps({"jsonrpc": "2.0", "id": "evil", "method": "elicitation/create", "params": ask}),
                    orjson.dumps(
                        {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "forged"}]}}
                    ),
                    b"\0" * 48
                    + orjson.dumps(
                        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "error", "data": "x"}}
                    ),
                ]
                for data in forged:
                    assert await r.publish(channel, data) >= 2  # every replica's pattern subscription, and the spy
                other = Peer(http)
                await other.initialize(b.url)
                await other.call(b.url, "tools/call", {"name": "f__touch", "arguments": {"uri": "demo://one"}})
                note = await peers.bounded(stream.get(), 10)
                assert note == {
                    "jsonrpc": "2.0",
                    "method": "notifications/resources/updated",
                    "params": {"uri": "hopline://f/demo://one"},
                }
                genuine = None
                while genuine is None or genuine in forged:
                    genuine = (
                        await peers.bounded(spy.get_message(ignore_subscribe_messages=True, timeout=10), 15) or {}
                    ).get("data")
                assert await r.publish(channel, genuine) >= 2  # the replay
                await other.call(b.url, "tools/call", {"name": "f__touch", "arguments": {"uri": "demo://two"}})
                note = await peers.bounded(stream.get(), 10)
                assert note["params"]["uri"] == "hopline://f/demo://two", note
                assert stream.empty()
            assert await metric(http, a, "hopline_shared_messages_forged_total") == 4
    finally:
        await spy.aclose()
        await r.aclose()


async def test_a_planted_standing_request_is_not_run_by_the_resuming_replica(watched):
    c, a, b, events = watched
    r = redis.asyncio.Redis.from_url(c.redis_url)
    try:
        async with httpx.AsyncClient(timeout=20) as http:
            peer = Peer(http)
            await peer.initialize(a.url)
            assert "result" in await peer.call(a.url, "resources/subscribe", {"uri": "hopline://f/demo://watched"})
            sid = await only_sid(r)
            planted = {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "as the victim"}}}
            await r.hset(f"hopline:s:{sid}", "sub:demo://evil", orjson.dumps(planted))
            resp = await peer.post(b.url, "tools/list")
            assert resp.status_code == 503, resp.text
            assert "answered what hopline did not write" in resp.json()["error"]["message"]
            assert not [line for line in events.read_text().splitlines() if line.startswith("call")]
            assert await metric(http, b, 'hopline_session_creations_refused_total{limit="session_store_answer"}') == 1
            # the replica that holds the session reads nothing from Redis for it
            assert "result" in await peer.call(a.url, "tools/list")
    finally:
        await r.aclose()


async def test_a_task_record_whose_owner_was_rewritten_is_nobodys(tmp_path):
    proc, port = peers.start_script(str(SERVERS / "sdk_task_server.py"), "http")
    c = Cluster(tmp_path)
    r = None
    try:
        c.start_redis()
        config = replica_config(c.redis_url, c.key)
        config["backends"] = {"jobs": {"url": f"http://127.0.0.1:{port}/mcp"}}
        config["auth"] = api_keys()
        a, b = c.start_replica(config).url, c.start_replica(config).url
        r = redis.asyncio.Redis.from_url(c.redis_url)
        alice_a, _ = tasks_client(a, headers={"x-api-key": KEYS["alice"]})
        alice_b, _ = tasks_client(b, headers={"x-api-key": KEYS["alice"]})
        bob_b, _ = tasks_client(b, headers={"x-api-key": KEYS["bob"]})
        async with alice_a, alice_b, bob_b:
            run = await peers.bounded(call_task(alice_a, "jobs__forever"))
            key = f"hopline:task:{run['taskId']}"
            raw = await r.get(key)
            assert raw is not None and raw.count(b':alice"') == 1
            await r.set(key, raw.replace(b':alice"', b':bob"'), keepttl=True)
            assert await refused(bob_b, "tasks/get", run["taskId"]) == unknown(run["taskId"])
            assert await refused(bob_b, "tasks/cancel", run["taskId"]) == unknown(run["taskId"])
            assert await refused(alice_b, "tasks/get", run["taskId"]) == unknown(run["taskId"])  # nobody's now
            await r.set(key, raw, keepttl=True)  # what hopline wrote is its creator's again
            assert (await peers.bounded(task_rpc(alice_b, "tasks/get", run["taskId"])))["status"] == "working"
    finally:
        if r is not None:
            await r.aclose()
        c.close()
        peers.stop(proc)


# -- 3. a bad store answer is a 503, counted ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "plant",
    [
        pytest.param(lambda r, key: r.hset(key, "sub:x", b"\xff not json"), id="not-json"),
        pytest.param(lambda r, key: r.hset(key, "sub:x", b"[1, 2]"), id="integer-array"),
        pytest.param(lambda r, key: r.delete(key), id="wrong-type"),  # then a string at the hash's key
    ],
)
async def test_a_store_answer_hopline_did_not_write_is_a_503_never_a_500(watched, plant):
    c, a, b, _events = watched
    r = redis.asyncio.Redis.from_url(c.redis_url)
    try:
        async with httpx.AsyncClient(timeout=20) as http:
            peer = Peer(http)
            await peer.initialize(a.url)
            assert "result" in await peer.call(a.url, "resources/subscribe", {"uri": "hopline://f/demo://watched"})
            key = f"hopline:s:{await only_sid(r)}"
            await plant(r, key)
            if not await r.exists(key):
                await r.set(key, b"a string")
            resp = await peer.post(b.url, "tools/list")
            assert resp.status_code == 503 and resp.headers["content-type"].startswith("application/json"), resp.text
            error = messages(resp)[-1]["error"]
            assert error["data"]["limit"] == "session_store"
            assert "answered what hopline did not write" in error["message"]
            assert await metric(http, b, 'hopline_session_creations_refused_total{limit="session_store_answer"}') == 1
            assert not any("Traceback" in line for line in b.stderr)
            # one session's bad entry is not an outage: B still resumes another session at once
            other = Peer(http)
            await other.initialize(a.url)
            assert "result" in await other.call(b.url, "tools/list")
    finally:
        await r.aclose()
