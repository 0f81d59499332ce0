"""The response writer's state table (transports/response_state.py): every edge it allows,
every move it refuses, and the writer's own path through it for a JSON answer, a stream,
a stream resumed elsewhere and a client that left."""

from __future__ import annotations

import itertools

import pytest

from hopline.transports.response_state import (
    CUT,
    DONE,
    FINAL,
    JSON_SENT,
    RESUMED,
    STREAMING,
    TRANSITIONS,
    WAITING,
    IllegalTransition,
    ResponseState,
    move,
)

ALLOWED = {
    (WAITING, JSON_SENT),
    (WAITING, STREAMING),
    (WAITING, CUT),
    (WAITING, RESUMED),
    (STREAMING, DONE),
    (STREAMING, CUT),
    (STREAMING, RESUMED),
}


@pytest.mark.parametrize("edge", sorted(ALLOWED), ids=lambda e: f"{e[0].label}->{e[1].label}")
def test_each_edge_of_the_table_is_allowed(edge):
    assert move(*edge) is edge[1]


def test_every_other_move_raises():
    refused = [(a, b) for a, b in itertools.product(ResponseState, repeat=2) if (a, b) not in ALLOWED]
    assert len(refused) == 36 - len(ALLOWED)
    for a, b in refused:
        with pytest.raises(IllegalTransition, match=f"from {a.label} to {b.label}"):
            move(a, b)


def test_the_final_states_are_the_ends_of_a_response():
    assert FINAL == {JSON_SENT, DONE, CUT, RESUMED}
    assert set(TRANSITIONS) == set(ResponseState)


# -- the writer's own path through the table (the MCP listener in process, as in test_fastpath.py) --
async def test_the_writer_moves_a_json_answer_a_stream_and_a_client_that_left_along_the_table(monkeypatch):
    import asyncio

    from hopline.jsonrpc import Message
    from hopline.transports import streamable_http_writer as writer
    from tests.transports.test_fastpath import CALL, BOUND, Exchanges, Recording, mcp_app, post_scope

    moves: list[tuple[ResponseState, ResponseState]] = []

    def recorded(state, to):
        moves.append((state, to))
        return move(state, to)

    monkeypatch.setattr(writer, "move", recorded)

    async def no_receive():
        raise AssertionError("the fast path has the body")

    async def sink(event):
        events.append(event)

    events: list = []
    await asyncio.wait_for(mcp_app(Exchanges({"content": []}))(post_scope(Recording(body=CALL), CALL), no_receive, sink), BOUND)
    assert moves == [(WAITING, JSON_SENT)]

    class Noisy(Exchanges):  # a log line first: the response becomes a stream
        async def open_exchange(self, era):
            end = await super().open_exchange(era)
            end.notify(Message({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}))
            return end

    moves.clear()
    await asyncio.wait_for(mcp_app(Noisy({"content": []}))(post_scope(Recording(body=CALL), CALL), no_receive, sink), BOUND)
    assert moves == [(WAITING, STREAMING), (STREAMING, DONE)]
    assert events[-1]["more_body"] is False and b'"id":7' in events[-1]["body"]

    moves.clear()
    fast = Recording(body=CALL)
    served = asyncio.ensure_future(mcp_app(Exchanges(None))(post_scope(fast, CALL), no_receive, sink))
    while fast.on_lost is None:
        await asyncio.sleep(0)
    fast.on_lost()
    await asyncio.wait_for(served, BOUND)
    assert moves == [(WAITING, CUT)]
