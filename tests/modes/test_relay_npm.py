"""Relay in front of a real third-party server: @modelcontextprotocol/server-everything (npm).

Installed, pinned, by scripts/test into tests/node (``npm ci``). It speaks the
handshake era only (its 2026-07-28 answers lack the required cache fields), so
the relay is proven here with legacy clients: sampling, elicitation, roots and
progress cross the relay in both directions.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.peers import bounded, client, text_of

EVERYTHING = Path(__file__).resolve().parents[1] / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"

if not EVERYTHING.exists() or shutil.which("node") is None:  # pragma: no cover - scripts/test installs it
    pytest.fail(f"server-everything is not installed at {EVERYTHING}; run scripts/test (it runs npm ci in tests/node)", pytrace=False)


@pytest.fixture
def relay(hopline_relay):
    return hopline_relay("--", "node", str(EVERYTHING), "stdio")


async def test_catalogue_and_echo(relay):
    async with client(relay.url, "legacy") as c:
        tools = {t.name for t in (await bounded(c.list_tools())).tools}
        assert {"echo", "trigger-sampling-request", "trigger-elicitation-request", "trigger-long-running-operation"} <= tools
        assert "Echo: through hopline" in text_of(await bounded(c.call_tool("echo", {"message": "through hopline"})))


async def test_sampling_passes_through(relay):
    async with client(relay.url, "legacy") as c:
        result = await bounded(c.call_tool("trigger-sampling-request", {"prompt": "hello", "maxTokens": 10}))
    assert "sampled:" in str(result.content)


async def test_elicitation_passes_through(relay):
    async with client(relay.url, "legacy") as c:
        result = await bounded(c.call_tool("trigger-elicitation-request", {}))
    assert "accept" in str(result.content).lower()


async def test_roots_pass_through(relay):
    async with client(relay.url, "legacy") as c:
        result = await bounded(c.call_tool("get-roots-list", {}))
    assert "file:///tmp/project" in str(result.content)


async def test_progress_passes_through(relay):
    seen: list[float] = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with client(relay.url, "legacy") as c:
        await bounded(c.call_tool("trigger-long-running-operation", {"duration": 0.5, "steps": 4}, progress_callback=on_progress))
    assert len(seen) == 4 and seen == sorted(seen)
