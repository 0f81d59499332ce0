"""Issue 15's acceptance: sessions through HAProxy round-robin over replicas sharing Redis."""

from __future__ import annotations

import traceback

import pytest
from mcp import Client

from tests import peers


async def _calls(client: Client, first: int, last: int) -> list[str]:
    out = []
    for i in range(first, last + 1):
        result = await peers.bounded(client.call_tool("demo__echo", {"text": f"call {i}"}))
        out.append(peers.text_of(result))
    return out


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_a_session_moves_between_replicas_and_survives_a_killed_one(cluster, era):
    c = cluster(3)
    async with Client(c.url, mode=era) as client:
        before = await _calls(client, 1, 15)
        c.kill(c.replicas[0])
        after = await _calls(client, 16, 40)
    assert before + after == [f"call {i}" for i in range(1, 41)]
    if era == "legacy":  # made on one replica, resumed on the two others (the 2026 era has no session)
        assert c.resumed() >= 2


async def test_without_shared_state_the_first_call_on_another_replica_fails(cluster):
    """The control: what a handshake-era client gets from replicas that share nothing."""
    c = cluster(3, redis=False, shared=False)
    with pytest.raises(BaseException) as caught:
        async with Client(c.url, mode="legacy") as client:
            await _calls(client, 1, 3)
    assert "Session not found" in "".join(traceback.format_exception(caught.value))
