"""Third-party pieces from npm: the TypeScript SDK (client and agent) and @thinkwell/conductor.

Installed by ``npm ci --prefix tests/acp/node`` (no network at test time). The
differential test runs one scripted session through Thinkwell (the D1 reference
conductor) and through hopline, and compares what the client sees, ids masked.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Any

import pytest
from acp_harness import NODE_DIR, ROOT, RawClient, conductor_argv, peer, proxy, require_node



@pytest.fixture(autouse=True)
def _node_peers_installed() -> None:
    require_node()

TS_AGENT = shlex.join(["node", str(NODE_DIR / "ts_agent.mjs")])


async def run_ts_client(argv: list[str]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        "node", str(NODE_DIR / "ts_client.mjs"), *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, start_new_session=True
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 12)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_ts_client_drives_hopline_with_a_d1_proxy_and_the_ts_agent():
    summary = await run_ts_client(conductor_argv(proxy("d1", "A"), TS_AGENT))
    assert summary["agent"] == "ts-echo-agent" and summary["stops"] == ["end_turn", "end_turn"]
    assert summary["afterFirst"] == [f"[A] echo {i}: from ts" for i in range(3)]  # updates before the result
    assert summary["texts"][-1] == "[A] echo: hello"


async def test_ts_client_drives_hopline_with_the_python_sdk_agent():
    summary = await run_ts_client(conductor_argv(proxy("d5", "P"), peer("sdk_agent.py")))
    assert summary["agent"] == "sdk-echo-agent"
    assert summary["afterFirst"] == [f"[P] echo {i}: from ts" for i in range(3)]


@pytest.mark.parametrize("dialects", [("d4", "d5"), ("d1", "d4")])
async def test_ts_agent_as_terminal_agent_behind_mixed_proxies(conductor, dialects):
    c = await conductor(proxy(dialects[0], "X"), proxy(dialects[1], "Y"), TS_AGENT)
    init = await c.initialize()
    assert init["result"]["agentInfo"]["name"] == "ts-echo-agent"
    sid = await c.new_session()
    answer, before = await c.prompt(sid, "updates 2 ts")
    assert answer["result"] == {"stopReason": "end_turn"}
    assert [m["params"]["update"]["content"]["text"] for m in before] == ["[X] [Y] echo 0: ts", "[X] [Y] echo 1: ts"]
    answer, _ = await c.call("_example/ping", {})
    assert answer["error"]["code"] == -32601  # the TS SDK answers unhandled _ methods itself


# -- differential: Thinkwell vs hopline ------------------------------------------------------
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "diff", "version": "1"}}),
    ("session/new", {"cwd": str(ROOT), "mcpServers": []}),
    ("session/prompt", {"sessionId": "$sid", "prompt": [{"type": "text", "text": "hello"}]}),
    ("session/prompt", {"sessionId": "$sid", "prompt": [{"type": "text", "text": "updates 3 twice"}]}),
    ("_example/ping", {"k": "v"}),
    ("session/prompt", {"sessionId": "$sid", "prompt": [{"type": "text", "text": "bye"}]}),
]


def masked(message: dict[str, Any], labels: dict[Any, str]) -> dict[str, Any]:
    out = dict(message)
    if "id" in out:
        out["id"] = labels.get(out["id"], "<id>")
    result = out.get("result")
    if isinstance(result, dict) and isinstance(result.get("_meta"), dict):
        meta = {k: v for k, v in result["_meta"].items() if k != "proxy"}  # Thinkwell leaks the D1 echo
        out["result"] = {**{k: v for k, v in result.items() if k != "_meta"}, **({"_meta": meta} if meta else {})}
    return out


async def transcript(argv: list[str]) -> list[dict[str, Any]]:
    client = await RawClient.start(argv)
    seen: list[dict[str, Any]] = []
    labels: dict[Any, str] = {}
    sid = None
    try:
        for n, (method, params) in enumerate(SCRIPT):
            params = json.loads(json.dumps(params).replace('"$sid"', json.dumps(sid)))
            label = f"req-{n}"
            labels[1000 + n] = label
            answer, before = await client.call(method, params, msg_id=1000 + n)
            seen += [masked(m, labels) for m in before] + [masked(answer, labels)]
            if method == "session/new":
                sid = answer["result"]["sessionId"]
    finally:
        await client.close()
    return seen


@pytest.mark.parametrize("agent", ["raw_agent.py", "ts_agent"])
async def test_differential_thinkwell_vs_hopline(agent):
    agent_cmd = TS_AGENT if agent == "ts_agent" else peer(agent)
    chain = [proxy("d1", "D1"), agent_cmd]
    thinkwell = await transcript(["node", str(NODE_DIR / "thinkwell_host.mjs"), *chain])
    hopline = await transcript(conductor_argv(*chain))
    assert len(thinkwell) >= len(SCRIPT)
    assert hopline == thinkwell


