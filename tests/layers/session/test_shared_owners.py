"""``Owners`` (layers/discovery/shared.py): what a shared backend session routes by.
Pure: calls in flight per owner, refcounted subscriptions, the effective log level."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hopline.layers.discovery.shared import LEVELS, Owners


def test_the_sole_owner_is_the_one_with_calls_in_flight():
    o = Owners()
    assert o.sole() is None
    o.enter("a")
    o.enter("a")
    assert o.sole() == "a"
    o.enter("b")
    assert o.sole() is None  # two owners: no single answer
    o.leave("a")
    assert o.sole() is None
    o.leave("a")
    assert o.sole() == "b"
    o.leave("b")
    assert o.sole() is None and o.inflight == {}


@given(st.lists(st.tuples(st.sampled_from(["sub", "unsub", "forget"]), st.sampled_from("abc"), st.sampled_from(["u1", "u2"])), max_size=40))
def test_the_backend_hears_first_subscribe_and_last_unsubscribe_only(steps):
    o = Owners()
    wanted: dict[str, set[str]] = {}
    backend: set[str] = set()  # what the backend is subscribed to, from what Owners says to send
    for op, owner, uri in steps:
        if op == "sub":
            if o.subscribe(uri, owner):
                assert uri not in backend
                backend.add(uri)
            wanted.setdefault(uri, set()).add(owner)
        elif op == "unsub":
            if o.unsubscribe(uri, owner):
                backend.discard(uri)
            wanted.get(uri, set()).discard(owner)
        else:
            last, _level = o.forget(owner)
            backend -= set(last)
            for owners in wanted.values():
                owners.discard(owner)
        assert backend == {u for u, owners in wanted.items() if owners}


def test_the_backend_runs_at_the_most_verbose_level_and_each_owner_gets_its_own():
    o = Owners()
    assert o.set_level("a", "error") == "error"
    assert o.set_level("b", "debug") == "debug"
    assert o.set_level("a", "warning") is None  # still debug for b
    assert o.admits("b", "debug") and not o.admits("a", "info") and o.admits("a", "error")
    assert o.admits("c", "debug")  # no level asked: everything
    assert o.forget("b") == ([], "warning")  # the backend may be quieter now
    new = Owners()
    new.adopt(o)
    assert new.level_change() == "warning" and new.subscribers == {}
    assert LEVELS[0] == "debug" and LEVELS[-1] == "emergency"
