"""A conductor inside a chain (proxy mode, two levels) and ``--trace`` output."""

from __future__ import annotations

import json
import shlex

import pytest
from acp_harness import PY, peer, proxy, text_of


def inner_conductor(*components: str, options: tuple[str, ...] = ()) -> str:
    return shlex.join([PY, "-m", "hopline.acp", "--proxy", *options, "--", *components])


@pytest.mark.parametrize("outer_dialect", ["auto", "d1", "d4"])
async def test_two_level_nested_chain(conductor, outer_dialect):
    c = await conductor(
        proxy("d1", "outer"),
        inner_conductor(proxy("d5", "in1"), proxy("d4", "in2")),
        peer("raw_agent.py"),
        options=("--dialect", f"2={outer_dialect}"),
    )
    init = await c.initialize()
    assert init["result"]["agentInfo"]["name"] == "raw-agent" and "_meta" not in init["result"]
    sid = await c.new_session()
    answer, before = await c.prompt(sid, "deep")
    assert answer["result"] == {"stopReason": "end_turn"}
    assert [text_of(m) for m in before] == ["[outer] [in1] [in2] echo: deep"]


async def test_proxy_mode_conductor_without_proxies_is_transparent(conductor):
    c = await conductor(inner_conductor(), peer("raw_agent.py"))
    assert "result" in await c.initialize()
    sid = await c.new_session()
    answer, before = await c.prompt(sid, "thin")
    assert [text_of(m) for m in before] == ["echo: thin"]


async def test_trace_writes_one_line_per_routed_message(conductor, tmp_path):
    trace = tmp_path / "trace.jsonl"
    c = await conductor(proxy("d1", "A"), proxy("d4", "B"), proxy("d5", "C"), peer("raw_agent.py"), options=("--trace", str(trace)))
    await c.initialize()
    sid = await c.new_session()
    await c.prompt(sid, "traced")
    assert await c.close() == 0
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert all({"ts", "from", "to", "kind", "method", "id", "dialect"} <= r.keys() for r in records)
    # the agent's update crossed three proxies, each in its own dialect's envelope
    update_hops = [(r["from"], r["to"], r["dialect"]) for r in records if r["method"] == "session/update"]
    assert update_hops == [
        ("raw_agent.py", "proxy.py#3", "d5"),
        ("proxy.py#3", "proxy.py#2", "d4"),
        ("proxy.py#2", "proxy.py", "d1"),
        ("proxy.py", "client", None),
    ]
    prompt_hops = [(r["from"], r["to"], r["kind"]) for r in records if r["method"] == "session/prompt"]
    assert prompt_hops[:4] == [("client", "proxy.py", "request"), ("proxy.py", "proxy.py#2", "request"), ("proxy.py#2", "proxy.py#3", "request"), ("proxy.py#3", "raw_agent.py", "request")]
    assert prompt_hops[-1] == ("proxy.py", "client", "result")


async def test_regular_files_as_stdin_and_stdout(tmp_path):
    """``hopline acp -- ... < script.jsonl > out.jsonl``: asyncio pipes refuse files; we do not."""
    import asyncio

    script = tmp_path / "in.jsonl"
    script.write_text(
        "\n".join(
            json.dumps({"jsonrpc": "2.0", **m})
            for m in (
                {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
                {"id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}},
                {"id": 3, "method": "session/prompt", "params": {"sessionId": "raw-1", "prompt": [{"type": "text", "text": "f"}]}},
            )
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    with script.open("rb") as stdin, out.open("wb") as stdout:
        process = await asyncio.create_subprocess_exec(PY, "-m", "hopline", "acp", "--", proxy("d4", "F"), peer("raw_agent.py"), stdin=stdin, stdout=stdout, stderr=asyncio.subprocess.DEVNULL)
        try:
            assert await asyncio.wait_for(process.wait(), 12) == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [m.get("id") for m in lines] == [1, 2, None, 3]
    assert text_of(lines[2]) == "[F] echo: f"
