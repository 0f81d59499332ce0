"""How components start (src/hopline/acp/launch.py): commands as processes with their own env
and cwd, built-ins in process behind a channel that behaves like a process's."""

from __future__ import annotations

import asyncio

import pytest
from acp_harness import PY

from hopline.acp.chain import GATEWAY, Component, build
from hopline.acp.launch import InProcess, Launcher, spawn_stdio
from hopline.jsonrpc import Message
from hopline.layers.transport.channel import ChannelClosed

PING = Message({"jsonrpc": "2.0", "method": "ping"})
REPORT = "import json, os, sys; sys.stdin.readline(); print(json.dumps({'jsonrpc': '2.0', 'method': 'env', 'params': {'X': os.environ.get('X'), 'Y': os.environ.get('Y'), 'cwd': os.getcwd()}}), flush=True)"


async def test_a_command_gets_the_chains_and_its_own_environment_and_cwd(tmp_path):
    component = Component(name="report", argv=(PY, "-c", REPORT), proxy=False, env={"X": "own"}, cwd=str(tmp_path))
    channel = await spawn_stdio(component, {"X": "chain", "Y": "chain"})
    try:
        await channel.send(PING)
        message = await asyncio.wait_for(channel.receive(), 10)
    finally:
        await channel.aclose()
    assert message.params == {"X": "own", "Y": "chain", "cwd": str(tmp_path)}


async def test_a_failing_builtin_looks_like_a_process_that_exited():
    async def serve(channel) -> None:
        await channel.receive()
        raise RuntimeError("boom")

    component = InProcess("builtin", serve)
    await component.send(PING)
    with pytest.raises(ChannelClosed, match="builtin: failed: RuntimeError: boom"):
        await asyncio.wait_for(component.receive(), 5)
    await component.aclose()
    assert component.is_closed()


async def test_closing_a_builtin_ends_its_input_and_waits_for_what_it_still_sends():
    async def serve(channel) -> None:
        seen = 0
        while True:
            try:
                await channel.receive()
            except ChannelClosed:
                return
            seen += 1
            await channel.send(Message({"jsonrpc": "2.0", "method": "seen", "params": {"n": seen}}))

    component = InProcess("echo", serve)
    await component.send(PING)
    assert (await asyncio.wait_for(component.receive(), 5)).params == {"n": 1}
    await asyncio.wait_for(component.aclose(), 5)
    with pytest.raises(ChannelClosed):
        await component.send(PING)


async def test_the_gateway_builtin_needs_a_configuration():
    chain = build([Component(name="", argv=(), proxy=True, builtin=GATEWAY), "agent"])
    launcher = Launcher(chain)
    with pytest.raises(ChannelClosed, match="needs a configuration file with `backends`"):
        await launcher(chain.components[0])
    await launcher.aclose()
