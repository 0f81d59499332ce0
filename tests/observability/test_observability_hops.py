"""Hop metadata (draft §12.2): appended, never overwritten; loops and depth refused."""

from __future__ import annotations

import copy

import pytest

from hopline import jsonrpc as j
from hopline.binding import MCP_HANDSHAKE, MCP_MODERN
from hopline.observability.hops import Hops, LoopDetected, TooManyHops

KEY = MCP_HANDSHAKE.hop_key


def hops(instance: str = "me", max_depth: int = 4, now: float = 1_760_000_000.25) -> Hops:
    return Hops(key=KEY, name="gw", mode="forward", version="0.1.0", instance=instance, max_depth=max_depth, clock=lambda: now)


def test_the_key_is_the_bindings():
    assert KEY == MCP_MODERN.hop_key == "io.modelcontextprotocol/proxy-hops"


@pytest.mark.req("HOPS-APPEND")
def test_an_entry_is_appended_with_name_mode_version_timestamp_and_identity():
    out = hops().stamp({})
    assert out[KEY] == [{"name": "gw", "mode": "forward", "version": "0.1.0", "timestamp": "2025-10-09T08:53:20.250Z", "instance": "me"}]


def test_earlier_hops_are_kept_exactly_and_the_order_is_the_path():
    upstream = [{"name": "edge", "mode": "forward", "version": "9", "timestamp": "t", "instance": "edge-1", "vendor": {"x": 1}}, "not even a dict"]
    meta = {KEY: upstream, "traceparent": "keep"}
    before = copy.deepcopy(meta)
    out = hops().stamp(meta)
    assert meta == before  # the incoming list is not appended to in place
    assert out[KEY][:2] == upstream and out[KEY][2]["instance"] == "me" and out["traceparent"] == "keep"


def test_a_request_carrying_our_own_identity_is_refused_as_a_loop():
    meta = {KEY: [{"instance": "me", "name": "gw"}, {"instance": "team-proxy"}]}
    with pytest.raises(LoopDetected) as err:
        hops().stamp(meta)
    assert err.value.code == -32600 and err.value.data == {"reason": "loop", "instance": "me"}
    assert "2 hop(s) ago" in err.value.message
    hops(instance="someone-else").stamp(meta)  # another hopline with the same name passes


def test_depth_is_capped_counting_this_hop():
    h = hops(max_depth=3)
    h.stamp({KEY: [{}, {}]})
    with pytest.raises(TooManyHops) as err:
        h.stamp({KEY: [{}, {}, {}]})
    assert err.value.code == -32600 and err.value.data["limit"] == 3


def test_ten_thousand_forged_hops_are_refused_without_scanning_them():
    forged = [{"instance": "me"}] * 10_000
    with pytest.raises(TooManyHops):
        hops().stamp({KEY: forged})


@pytest.mark.parametrize("value", [{"name": "x"}, "a string", 7])
def test_a_hop_value_that_is_not_an_array_is_refused_not_replaced(value):
    with pytest.raises(j.InvalidParams):
        hops().stamp({KEY: value})


def test_the_default_identity_differs_per_process_instance():
    a = Hops(key=KEY, name="gw", mode="forward", version="1")
    b = Hops(key=KEY, name="gw", mode="forward", version="1")
    assert a.instance != b.instance and len(a.instance) == 16
    a.stamp(b.stamp({}))  # two hoplines with the same configuration chain without a false loop


def test_timestamps_advance_within_and_across_seconds():
    now = [100.999]
    h = Hops(key=KEY, name="gw", mode="forward", version="1", clock=lambda: now[0])
    first = h.timestamp()
    now[0] = 101.0
    assert first == "1970-01-01T00:01:40.999Z" and h.timestamp() == "1970-01-01T00:01:41.000Z"
