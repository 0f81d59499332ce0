"""W3C trace context in _meta (draft §12.1): verbatim, generated when absent, never altered."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopline.observability import trace as t

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


@pytest.mark.parametrize(
    "value,ok",
    [
        (VALID, True),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", True),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", True),  # a later version may add fields
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", False),  # version 00 has four
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", False),  # upper case is invalid
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", False),
        ("garbage", False),
        ("", False),
        (None, False),
        (12, False),
    ],
)
def test_parse_follows_w3c(value, ok):
    assert (t.parse(value) is not None) is ok


def test_a_child_keeps_the_trace_and_flags_with_a_new_span():
    parent = t.parse(VALID)
    child = parent.child()
    assert child.trace_id == parent.trace_id and child.flags == parent.flags and child.span_id != parent.span_id
    assert t.parse(child.header()) == child


@pytest.mark.req("TRACE-VERBATIM")
def test_incoming_trace_context_is_forwarded_verbatim_and_the_hop_span_travels_separately():
    meta = {"traceparent": VALID, "tracestate": STATE, "x-unknown": {"keep": [1, 2]}, "progressToken": 5}
    before = copy.deepcopy(meta)
    parent = t.incoming_parent(meta)
    span = parent.child()
    out = t.outgoing(meta, span)
    assert meta == before  # the client's dict is untouched
    assert out["traceparent"] is meta["traceparent"] and out["tracestate"] is meta["tracestate"]
    assert out["x-unknown"] == {"keep": [1, 2]} and out["progressToken"] == 5
    hop = t.parse(out[t.HOP_PARENT])
    assert hop.trace_id == parent.trace_id and hop.span_id == span.span_id != parent.span_id


@pytest.mark.req("TRACE-VERBATIM")
@pytest.mark.parametrize("bad", ["00-zz-00f067aa0ba902b7-01", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", " " + VALID, VALID.upper()])
def test_a_malformed_traceparent_still_travels_verbatim_while_this_hop_starts_a_fresh_trace(bad):
    meta = {"traceparent": bad, "tracestate": "weird ,,, state"}
    assert t.incoming_parent(meta) is None
    span = t.new_root()
    out = t.outgoing(meta, span)
    assert out["traceparent"] == bad and out["tracestate"] == "weird ,,, state"
    assert t.parse(out[t.HOP_PARENT]) == span


def test_a_traceparent_is_generated_when_absent():
    span = t.new_root()
    out = t.outgoing({"x": 1}, span)
    assert out["traceparent"] == span.header() == out[t.HOP_PARENT] and out["x"] == 1
    assert "traceparent" not in t.outgoing({}, span, generate=False)


def test_the_previous_hops_span_is_the_parent_when_present():
    upstream = t.parse("00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01")
    assert t.incoming_parent({"traceparent": VALID, t.HOP_PARENT: upstream.header()}) == upstream
    assert t.incoming_parent({"traceparent": VALID, t.HOP_PARENT: "junk"}) == t.parse(VALID)


@given(st.dictionaries(st.text(max_size=20), st.one_of(st.none(), st.integers(), st.text(max_size=60)), max_size=8))
def test_outgoing_never_changes_or_drops_what_came_in(meta):
    before = copy.deepcopy(meta)
    out = t.outgoing(meta, t.new_root())
    assert meta == before
    for key, value in meta.items():
        if key != t.HOP_PARENT:
            assert out[key] == value


def test_ids_are_fresh_and_never_zero():
    ids = {t.new_span_id() for _ in range(2000)}
    assert len(ids) == 2000 and all(len(i) == 16 and i != "0" * 16 for i in ids)
    assert len({t.new_trace_id() for _ in range(200)}) == 200
