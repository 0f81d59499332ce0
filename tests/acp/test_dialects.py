"""Dialect adapters and the lifecycle table (src/hopline/acp/dialects.py, lifecycle.py)."""

from __future__ import annotations

import pytest

from hopline.acp import chain, dialects, lifecycle
from hopline.acp.lifecycle import Event, State
from hopline.jsonrpc import Message


@pytest.mark.parametrize(
    ("name", "handshake", "req_method", "note_method"),
    [
        ("d1", "initialize", "_proxy/successor/request", "_proxy/successor/notification"),
        ("d2", "proxy/initialize", "proxy/successor", "proxy/successor"),
        ("d3", "_proxy/initialize", "_proxy/successor", "_proxy/successor"),
        ("d4", "_proxy/initialize", "_proxy/successor", "_proxy/successor"),
        ("d5", "proxy/initialize", "proxy/successor", "proxy/successor"),
    ],
)
def test_each_dialect_wraps_and_is_unwrapped_by_every_reader(name, handshake, req_method, note_method):
    d = dialects.get(name)
    hs = d.handshake_request(3, {"protocolVersion": 1})
    assert hs.method == handshake and hs.id == 3
    assert dialects.handshake_dialect(hs) in ("d1", "d4", "d5")
    req = d.wrap("session/prompt", {"sessionId": "s"}, 9)
    note = d.wrap("session/update", None, None)
    assert (req.method, req.id, note.method) == (req_method, 9, note_method)
    assert "id" not in note.body and "params" not in note.body["params"]
    assert dialects.unwrap(req) == ("session/prompt", {"sessionId": "s"})
    assert dialects.unwrap(note) == ("session/update", None)


def test_d1_acceptance_needs_the_echo_and_marks_are_hop_local():
    d1 = dialects.get("d1")
    assert d1.handshake_request(1, {"_meta": {"trace": "x"}}).params["_meta"] == {"trace": "x", "proxy": True}
    assert not d1.accepts({"protocolVersion": 1}) and d1.accepts({"_meta": {"proxy": True}})
    assert dialects.get("d5").accepts({"protocolVersion": 1})
    assert dialects.strip_proxy_mark({"a": 1, "_meta": {"proxy": True}}) == {"a": 1}
    assert dialects.strip_proxy_mark({"_meta": {"proxy": True, "k": 2}}) == {"_meta": {"k": 2}}
    assert dialects.mark_proxy({"protocolVersion": 1}) == {"protocolVersion": 1, "_meta": {"proxy": True}}


def test_recognition():
    assert dialects.handshake_dialect(Message({"method": "initialize", "params": {}})) is None
    assert dialects.unwrap(Message({"method": "session/update", "params": {}})) is None
    with pytest.raises(ValueError):
        dialects.unwrap(Message({"method": "_proxy/successor", "params": {"params": {}}}))
    with pytest.raises(ValueError):
        dialects.get("d9")


def test_lifecycle_table():
    s = lifecycle.step(State.IDLE, Event.OFFER)
    assert s is State.PROBING
    assert lifecycle.step(s, Event.REFUSED) is State.PROBING
    assert lifecycle.step(s, Event.FORWARDED) is State.READY
    assert lifecycle.step(State.READY, Event.EXHAUSTED) is State.FAILED
    assert lifecycle.step(State.READY, Event.EXITED) is State.DEAD
    assert lifecycle.step(State.DEAD, Event.BYPASS) is State.BYPASSED
    with pytest.raises(lifecycle.IllegalTransition):
        lifecycle.step(State.READY, Event.OFFER)
    assert set(lifecycle.TRAFFIC) == set(State)


def test_chain_build_roles_names_and_dialect_options():
    c = chain.build(["python proxy.py --dialect d1", "python proxy.py", "my-agent --acp"], dialect_options=["d4", "1=d1"])
    assert [x.name for x in c.components] == ["proxy.py", "proxy.py#2", "my-agent"]
    assert [x.proxy for x in c.components] == [True, True, False]
    assert [x.dialect for x in c.components] == ["d1", "d4", None]
    assert all(x.proxy for x in chain.build(["a", "b"], mode=chain.PROXY_MODE).components)
    for bad in (["9=d1"], ["x=d1"], ["d7"]):
        with pytest.raises(ValueError):
            chain.build(["a", "b"], dialect_options=bad)
    with pytest.raises(ValueError):
        chain.build([])
