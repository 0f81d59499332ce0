"""Error cases through a real ``hopline acp`` process (reference §2.3, §4.2 item 4).

Each case is answered with the documented error, and none leaves the client
waiting: a crash is an error on the affected request, not a hang.
"""

from __future__ import annotations

import json

import pytest
from acp_harness import peer, proxy, text_of

NOT_A_PROXY = "Proxy component did not accept proxy capability"


async def test_terminal_agent_in_proxy_position_detected(conductor):
    c = await conductor(peer("sdk_agent.py"), peer("raw_agent.py"))
    err = (await c.initialize())["error"]
    assert err["code"] == -32600 and err["message"] == NOT_A_PROXY
    # all three handshakes were offered; the SDK agent even "accepted" _proxy/initialize as
    # an extension method, but never forwarded initialize, so it is not a proxy
    tried = err["data"]["tried"]
    assert [t.split(" ")[0] for t in tried] == ["proxy/initialize", "_proxy/initialize", "initialize"]
    assert "-32601" in tried[0] and "without forwarding" in tried[1]
    answer, _ = await c.call("session/new", {"cwd": "/", "mcpServers": []})
    assert answer["error"]["data"]["reason"] == "not-a-proxy"


async def test_terminal_agent_in_d5_proxy_position_passes_its_refusal_through(conductor):
    c = await conductor(peer("sdk_agent.py"), peer("raw_agent.py"), options=("--dialect", "d5"))
    err = (await c.initialize())["error"]
    assert err["code"] == -32601  # the designed failure: the agent does not know proxy/initialize


async def test_d1_proxy_that_does_not_echo_the_capability(conductor):
    c = await conductor(proxy("d1", "", "--no-echo"), peer("raw_agent.py"))
    err = (await c.initialize())["error"]
    assert err == {"code": -32600, "message": NOT_A_PROXY, "data": {"component": "proxy.py", "dialect": "d1", "tried": ["answered without _meta.proxy"]}}


@pytest.mark.parametrize("method", ["proxy/initialize", "_proxy/initialize"])
async def test_proxy_initialize_from_the_client(conductor, method):
    c = await conductor(peer("raw_agent.py"))
    answer, _ = await c.call(method, {"protocolVersion": 1})
    assert answer["error"] == {"code": -32600, "message": "Invalid request", "data": "initialize/proxy requests are only sent by the conductor"}


async def test_first_message_not_initialize_and_nothing_is_spawned(conductor):
    c = await conductor(peer("raw_agent.py"))
    answer, _ = await c.call("session/new", {"cwd": "/", "mcpServers": []})
    assert answer["error"] == {"code": -32600, "message": "Invalid request", "data": "expected `initialize` request"}
    assert c.descendants() == []  # the chain is built lazily, on the first initialize
    assert "result" in await c.initialize()
    assert len(c.descendants()) == 1


async def test_reentered_initialization(conductor):
    c = await conductor(proxy("d5"), peer("raw_agent.py"))
    assert "result" in await c.initialize()
    answer, _ = await c.call("initialize", {"protocolVersion": 1})
    assert answer["error"] == {"code": -32600, "message": "conductor already initialized"}


async def test_proxy_crash_mid_request_is_an_error_then_the_chain_keeps_answering(conductor):
    c = await conductor(proxy("d4", "X", "--crash-on", "boom"), peer("raw_agent.py"))
    await c.initialize()
    sid = await c.new_session()
    answer, _ = await c.prompt(sid, "boom")
    err = answer["error"]
    assert err["code"] == -31001 and "exited with status 7" in err["message"] and err["data"] == {"backend": "proxy.py", "reason": "exited"}
    answer, _ = await c.prompt(sid, "hello again")
    assert answer["error"]["data"]["reason"] == "exited"  # default policy: fail, never hang
    assert any("is gone" in line for line in c.stderr)


async def test_agent_crash_mid_request(conductor):
    c = await conductor(proxy("d5", "X"), peer("sdk_agent.py"))
    await c.initialize()
    sid = await c.new_session()
    answer, _ = await c.prompt(sid, "crash")
    assert answer["error"]["code"] == -31001 and "exited with status 3" in answer["error"]["message"]


async def test_bypass_policy_routes_around_a_crashed_proxy(conductor):
    c = await conductor(proxy("d1", "A"), proxy("d5", "B", "--crash-on", "boom"), peer("raw_agent.py"), options=("--on-crash", "bypass"))
    await c.initialize()
    sid = await c.new_session()
    answer, before = await c.prompt(sid, "hi")
    assert [text_of(m) for m in before] == ["[A] [B] echo: hi"]
    answer, _ = await c.prompt(sid, "boom")
    assert answer["error"]["code"] == -31001
    answer, before = await c.prompt(sid, "after")
    assert answer["result"] == {"stopReason": "end_turn"}
    assert [text_of(m) for m in before] == ["[A] echo: after"]  # B is bypassed


async def test_cancel_request_is_translated_through_two_hops(conductor, tmp_path):
    logs = [tmp_path / "p1.jsonl", tmp_path / "p2.jsonl", tmp_path / "agent.jsonl"]
    c = await conductor(
        proxy("d5", "", "--log", str(logs[0])),
        proxy("d4", "", "--log", str(logs[1])),
        peer("raw_agent.py", "--log", str(logs[2])),
    )
    await c.initialize()
    sid = await c.new_session()
    await c.send({"id": "c-1", "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}})
    # wait until the prompt has reached the agent, then cancel it
    answer, _ = await c.call("_probe/after", {})  # ordered behind the prompt on every hop
    await c.send({"method": "$/cancel_request", "params": {"requestId": "c-1"}})
    answer, _ = await c.answer("c-1")
    assert answer["error"]["code"] == -32800

    def received(path):
        return [json.loads(line) for line in path.read_text().splitlines()]

    agent_msgs = received(logs[2])
    prompt_id = next(m["id"] for m in agent_msgs if m.get("method") == "session/prompt")
    cancels = [m for m in agent_msgs if m.get("method") == "$/cancel_request"]
    assert cancels == [{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": prompt_id}}]
    for path in logs[:2]:
        msgs = received(path)
        prompt = next(m for m in msgs if m.get("method") == "session/prompt")
        cancel = next(m for m in msgs if m.get("method") == "$/cancel_request")
        assert cancel["params"]["requestId"] == prompt["id"]  # that hop's own id
        assert not any(m.get("params", {}).get("method") == "$/cancel_request" for m in msgs if isinstance(m.get("params"), dict))  # never tunnelled


async def test_stdout_pollution_is_reported_and_survived(conductor):
    c = await conductor(proxy("d5", "P", "--pollute"), peer("raw_agent.py", "--pollute"))
    await c.initialize()
    sid = await c.new_session()
    answer, before = await c.prompt(sid, "clean?")
    assert answer["result"] == {"stopReason": "end_turn"} and [text_of(m) for m in before] == ["[P] echo: clean?"]
    assert all(line.strip().startswith(b"{") for line in c.raw_lines)  # nothing leaked to the client
    reports = "".join(c.stderr)
    assert "'proxy.py' polluted its stdout" in reports or "proxy.py: dropped a frame" in reports
    assert "'raw_agent.py' polluted its stdout" in reports


async def test_missing_component_command_is_an_error_not_a_hang(conductor):
    c = await conductor("/nonexistent/agent --acp")
    err = (await c.initialize())["error"]
    assert err["code"] == -31001 and "cannot start" in err["message"]
