"""``--on-crash restart`` (src/hopline/acp/sessions.py, conductor.py, handshake.py): a proxy that
exits is spawned again, re-initialised and given its sessions back with ``session/load``.
"""

from __future__ import annotations

import json

from acp_harness import peer, proxy, text_of
from router_harness import CLIENT, P1, Wire, init

from hopline.acp.lifecycle import State

RESTART = ("--on-crash", "restart")


def received(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_restart_with_load_session_keeps_the_session(conductor, tmp_path):
    log = tmp_path / "proxy.jsonl"
    c = await conductor(proxy("d5", "X", "--crash-on", "boom", "--log", str(log)), peer("sdk_agent.py"), options=RESTART)
    await c.initialize()
    sid = await c.new_session()
    answer, _ = await c.prompt(sid, "boom")
    assert answer["error"]["code"] == -31001 and answer["error"]["data"] == {"backend": "proxy.py", "reason": "exited"}  # in flight: as today
    answer, before = await c.prompt(sid, "after")  # held until the new process has rejoined and reloaded
    assert answer["result"] == {"stopReason": "end_turn"}
    assert [text_of(m) for m in before] == ["[X] echo: after"]  # no replayed "history:" reaches the client
    msgs = received(log)
    handshakes = [m for m in msgs if m.get("method") == "proxy/initialize"]
    loads = [m for m in msgs if m.get("method") == "session/load"]
    assert len(handshakes) == 2 and handshakes[1]["params"] == handshakes[0]["params"]  # offered the role again, same params
    assert [m["params"]["sessionId"] for m in loads] == [sid] and loads[0]["params"]["cwd"]
    assert msgs.index(loads[0]) < next(i for i, m in enumerate(msgs) if m.get("method") == "session/prompt" and "after" in json.dumps(m))
    assert any("restart 1 of at most 3" in line for line in c.stderr)
    sid2 = await c.new_session()
    answer, before = await c.prompt(sid2, "fresh")
    assert [text_of(m) for m in before] == ["[X] echo: fresh"]


async def test_restart_without_load_session_loses_old_sessions_only(conductor):
    c = await conductor(proxy("d4", "X", "--crash-on", "boom"), peer("raw_agent.py"), options=RESTART)
    await c.initialize()
    sid = await c.new_session()
    answer, _ = await c.prompt(sid, "boom")
    assert answer["error"]["data"]["reason"] == "exited"
    answer, _ = await c.prompt(sid, "again")
    assert answer["error"]["code"] == -31001 and answer["error"]["data"] == {"backend": "proxy.py", "reason": "session-lost"}
    assert "does not support session/load" in answer["error"]["message"]
    sid2 = await c.new_session()
    answer, before = await c.prompt(sid2, "new")
    assert answer["result"] == {"stopReason": "end_turn"} and [text_of(m) for m in before] == ["[X] echo: new"]


async def test_restarted_proxy_declares_its_mcp_server_afresh(conductor):
    c = await conductor(peer("mcp_proxy.py", "--dialect", "d4", "--mcp", "d4", "--crash-on", "boom"), peer("mcp_agent.py", "--mcp", "d4", "--load-session"), options=RESTART)
    await c.initialize()
    sid = await c.new_session()

    async def whoami() -> dict:
        answer, before = await c.prompt(sid, "call whoami")
        assert answer["result"] == {"stopReason": "end_turn"}, answer
        return json.loads(text_of(before[-1]))["results"][0]

    first = await whoami()
    answer, _ = await c.prompt(sid, "boom")
    assert answer["error"]["data"]["reason"] == "exited"
    second = await whoami()
    assert second["server"] != first["server"]  # the new process declared a new server in session/load
    assert second["session"] == second["declaredIn"] == second["connectMeta"] == sid


async def test_restart_attempts_are_bounded_and_nothing_hangs(conductor, tmp_path):
    gate = tmp_path / "broken"
    c = await conductor(proxy("d5", "X", "--crash-on", "boom", "--exit-if-exists", str(gate)), peer("sdk_agent.py"), options=RESTART)
    await c.initialize()
    sid = await c.new_session()
    gate.touch()  # from now on the proxy dies at start-up
    answer, _ = await c.prompt(sid, "boom")
    assert answer["error"]["data"]["reason"] == "exited"
    answer, _ = await c.prompt(sid, "waits")  # held through the failed restarts (or sent after them), then refused
    assert answer["error"]["code"] == -31001 and answer["error"]["data"]["reason"] == "exited"
    assert "not restarted again after 3 attempt(s)" in answer["error"]["message"]
    assert sum("restart" in line and "of at most 3" in line for line in c.stderr) == 3


def test_rejoin_in_the_routing_core():
    """The sans-io sequence: hold, offer the role again, answer its initialize from the cache,
    reload its session (replayed history muted), then deliver what waited."""
    agent = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
    wire = Wire(["p1", "agent"], on_crash="restart")
    init(wire, 1, agent_result=agent)
    _, to_p1 = wire.one(CLIENT, {"id": "n", "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}})
    _, to_agent = wire.one(P1, {"id": 5, "method": "proxy/successor", "params": {"method": "session/new", "params": to_p1["params"]}})
    wire.one(2, {"id": to_agent["id"], "result": {"sessionId": "s1"}})
    wire.one(P1, {"id": to_p1["id"], "result": {"sessionId": "s1"}})
    assert wire.lost(P1) == [] and wire.router.state[P1] is State.RESTARTING
    assert wire.feed(CLIENT, {"id": "q", "method": "session/prompt", "params": {"sessionId": "s1"}}) == []  # held
    ((conn, offer),) = [(c, m.body) for c, m in wire.router.rejoin(P1)]
    assert (conn, offer["method"], offer["params"]) == (P1, "proxy/initialize", {"protocolVersion": 1})
    assert wire.one(P1, {"id": 1, "method": "proxy/successor", "params": {"method": "initialize", "params": {"protocolVersion": 1}}}) == (
        P1,
        {"jsonrpc": "2.0", "id": 1, "result": agent},  # from the cache: the agent is not initialised twice
    )
    conn, load = wire.one(P1, {"id": offer["id"], "result": agent})
    assert (conn, load["method"], load["params"]) == (P1, "session/load", {"cwd": "/w", "mcpServers": [], "sessionId": "s1"})
    conn, to_agent = wire.one(P1, {"id": 2, "method": "proxy/successor", "params": {"method": "session/load", "params": load["params"]}})
    assert conn == 2
    history = {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk"}}
    assert wire.one(2, {"method": "session/update", "params": history})[0] == P1  # the proxy sees the replay
    assert wire.feed(P1, {"method": "session/update", "params": history}) == []  # the client does not
    assert wire.one(2, {"id": to_agent["id"], "result": {}}) == (P1, {"jsonrpc": "2.0", "id": 2, "result": {}})
    out = wire.feed(P1, {"id": load["id"], "result": {}})
    assert [(c, m["method"]) for c, m in out] == [(P1, "session/prompt")] and wire.router.state[P1] is State.READY
    assert wire.feed(P1, {"method": "session/update", "params": history})[0][0] == CLIENT  # live again


# -- the terminal agent ---------------------------------------------------------------------
async def test_agent_restart_reloads_open_sessions_and_not_closed_ones(conductor, tmp_path):
    log = tmp_path / "agent.jsonl"
    c = await conductor(proxy("d5", "X"), peer("sdk_agent.py", "--log", str(log)), options=RESTART)
    await c.initialize()
    closed, kept = await c.new_session(), await c.new_session()
    answer, _ = await c.call("session/close", {"sessionId": closed})
    assert answer["result"] == {}
    answer, _ = await c.prompt(kept, "crash")
    assert answer["error"]["code"] == -31001 and answer["error"]["data"] == {"backend": "sdk_agent.py", "reason": "exited"}
    answer, before = await c.prompt(kept, "after")  # held until the new agent has loaded the session
    assert answer["result"] == {"stopReason": "end_turn"}
    assert [text_of(m) for m in before] == ["[X] echo: after"]  # the replayed "history:" is not shown again
    events = received(log)
    inits = [e["params"] for e in events if e["method"] == "initialize"]
    assert len(inits) == 2 and inits[0] == inits[1]  # initialised again with what the client sent
    assert [e["sessionId"] for e in events if e["method"] == "session/load"] == [kept]  # the closed one stays closed
    loaded = next(i for i, e in enumerate(events) if e["method"] == "session/load")
    assert events[loaded + 1] == {"method": "session/prompt", "sessionId": kept, "params": {"text": "after"}}
    assert any("'sdk_agent.py': restart 1 of at most 3" in line for line in c.stderr)


async def test_agent_restart_without_load_session_loses_its_sessions_only(conductor):
    c = await conductor(peer("raw_agent.py"), options=RESTART)
    await c.initialize()
    sid = await c.new_session()
    answer, _ = await c.prompt(sid, "crash")
    assert answer["error"]["data"] == {"backend": "raw_agent.py", "reason": "exited"}
    answer, _ = await c.prompt(sid, "again")
    assert answer["error"]["code"] == -31001 and answer["error"]["data"] == {"backend": "raw_agent.py", "reason": "session-lost"}
    assert "does not support session/load" in answer["error"]["message"]
    sid2 = await c.new_session()
    answer, before = await c.prompt(sid2, "new")
    assert answer["result"] == {"stopReason": "end_turn"} and [text_of(m) for m in before] == ["echo: new"]


async def test_agent_restart_limits_from_the_flags(conductor, tmp_path):
    gate = tmp_path / "broken"
    c = await conductor(peer("sdk_agent.py", "--exit-if-exists", str(gate)), options=(*RESTART, "--restart-max", "2", "--restart-backoff", "0.01"))
    await c.initialize()
    sid = await c.new_session()
    gate.touch()  # from now on the agent dies at start-up
    answer, _ = await c.prompt(sid, "crash")
    assert answer["error"]["data"]["reason"] == "exited"
    answer, _ = await c.prompt(sid, "refused")
    assert answer["error"]["code"] == -31001 and "not restarted again after 2 attempt(s)" in answer["error"]["message"]
    assert [line.split("in ")[-1].strip() for line in c.stderr if "of at most 2" in line] == ["0.01 s", "0.02 s"]  # backoff doubles


async def test_a_crashing_agent_answers_every_request_exactly_once(conductor):
    """Requests in flight when the agent dies, and requests sent while it restarts: one answer each."""
    c = await conductor(proxy("d4", "X"), peer("sdk_agent.py"), options=RESTART)
    await c.initialize()
    s1, s2 = await c.new_session(), await c.new_session()

    async def send(msg_id: int, sid: str, text: str) -> None:
        await c.send({"id": msg_id, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}})

    answers: dict[int, list[dict]] = {}

    async def collect(ids: set[int]) -> None:
        while not ids <= answers.keys():
            msg = await c.recv()
            if "method" not in msg:
                answers.setdefault(msg["id"], []).append(msg)

    await send(101, s1, "wait")  # in flight in the agent when it dies
    await send(102, s2, "crash")
    await collect({101, 102})
    for msg_id, sid in ((103, s1), (104, s2), (105, s1)):  # while it restarts: held, then served
        await send(msg_id, sid, f"after {msg_id}")
    await collect({103, 104, 105})
    last, _ = await c.call("_example/ping", {})  # FIFO: a duplicate answer would have come before this one
    assert "result" in last
    assert {k: len(v) for k, v in answers.items()} == {k: 1 for k in range(101, 106)}
    assert [answers[k][0]["error"]["data"]["reason"] for k in (101, 102)] == ["exited", "exited"]
    assert [answers[k][0]["result"] for k in (103, 104, 105)] == [{"stopReason": "end_turn"}] * 3


def test_agent_rejoin_in_the_routing_core():
    """The sans-io sequence for the terminal agent: hold, initialize again with the same params,
    load the open sessions (history muted) but not the closed one, then deliver what waited."""
    agent = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
    wire = Wire(["agent"], on_crash="restart")
    _, to_agent = wire.one(CLIENT, {"id": "i", "method": "initialize", "params": {"protocolVersion": 1, "clientInfo": {"name": "c"}}})
    assert wire.one(1, {"id": to_agent["id"], "result": agent})[0] == CLIENT
    for n, sid in enumerate(("s1", "s2")):
        _, setup = wire.one(CLIENT, {"id": f"n{n}", "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}})
        wire.one(1, {"id": setup["id"], "result": {"sessionId": sid}})
    _, close = wire.one(CLIENT, {"id": "c", "method": "session/close", "params": {"sessionId": "s1"}})
    wire.one(1, {"id": close["id"], "result": {}})
    assert wire.lost(1) == [] and wire.router.state[1] is State.RESTARTING
    assert wire.feed(CLIENT, {"id": "q", "method": "session/prompt", "params": {"sessionId": "s2"}}) == []  # held
    ((conn, init),) = [(c, m.body) for c, m in wire.router.rejoin(1)]
    assert (conn, init["method"], init["params"]) == (1, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "c"}})
    conn, load = wire.one(1, {"id": init["id"], "result": agent})
    assert (conn, load["method"], load["params"]) == (1, "session/load", {"cwd": "/w", "mcpServers": [], "sessionId": "s2"})
    history = {"sessionId": "s2", "update": {"sessionUpdate": "agent_message_chunk"}}
    assert wire.feed(1, {"method": "session/update", "params": history}) == []  # the client has it already
    out = wire.feed(1, {"id": load["id"], "result": {}})
    assert [(c, m["method"], m["params"]) for c, m in out] == [(1, "session/prompt", {"sessionId": "s2"})]
    assert wire.router.state[1] is State.READY and wire.router.restarts[1] == 0
    assert wire.feed(1, {"method": "session/update", "params": history})[0][0] == CLIENT  # live again
