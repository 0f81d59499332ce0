"""Collision strategies by example: prefix, priority, rename, reject (draft §8; BAD-11)."""

from __future__ import annotations

from hopline.layers.routing.catalog import BackendNames, Catalog, Collision
from hopline.layers.routing.namespace import Namespace

NS = Namespace()
BOTH = {"a": [{"name": "search"}, {"name": "a_only"}], "b": [{"name": "search"}, {"name": "b_only"}]}
FLAT = {"a": BackendNames(prefix=False), "b": BackendNames(prefix=False)}


def table(lists, strategy, options=FLAT, **kw):
    cat = Catalog.build(lists, namespace=NS, strategy=strategy, options=options, **kw)
    return {(e.backend, e.original): e.exposed for e in cat.entries}, cat.diagnostics


def test_prefix_falls_back_for_both_colliding_names():
    got, diags = table(BOTH, Collision.PREFIX)
    assert got == {("a", "search"): "a__search", ("a", "a_only"): "a_only", ("b", "search"): "b__search", ("b", "b_only"): "b_only"}
    assert len(diags) == 2 and all("falls back" in d and "[prefix]" in d for d in diags)


def test_prefix_keeps_a_prefixed_name_against_a_rename_into_it():
    options = {"a": BackendNames(rename={"y": "a__x"})}
    got, diags = table({"a": [{"name": "y"}, {"name": "x"}]}, Collision.PREFIX, options)
    assert got == {("a", "y"): "a__y", ("a", "x"): "a__x"}


def test_priority_higher_keeps_the_name():
    options = {"a": BackendNames(prefix=False), "b": BackendNames(prefix=False, priority=5)}
    got, diags = table(BOTH, Collision.PRIORITY, options)
    assert got[("b", "search")] == "search" and got[("a", "search")] == "a__search"
    assert diags == ["a:'search': 'search' collides (a:'search', b:'search'); falls back to 'a__search' [priority]"]


def test_priority_ties_go_to_order_then_id():
    got, _ = table(BOTH, Collision.PRIORITY)
    assert got[("a", "search")] == "search" and got[("b", "search")] == "b__search"
    got, _ = table(BOTH, Collision.PRIORITY, order=["b", "a"])
    assert got[("b", "search")] == "search" and got[("a", "search")] == "a__search"


def test_priority_loser_falling_onto_a_taken_prefixed_name_is_refused():
    # b's unprefixed "search" loses to a; its fallback b__search is taken by b's own literal "b__search".
    lists = {"a": [{"name": "search"}], "b": [{"name": "search"}, {"name": "b__search"}]}
    options = {"a": BackendNames(prefix=False, priority=1), "b": BackendNames(prefix=False)}
    got, diags = table(lists, Collision.PRIORITY, options)
    assert got[("a", "search")] == "search"
    assert got[("b", "b__search")] == "b__search"
    assert ("b", "search") not in got and any("refused" in d for d in diags)


def test_rename_refuses_until_the_operator_renames():
    got, diags = table(BOTH, Collision.RENAME)
    assert ("a", "search") not in got and ("b", "search") not in got
    assert got[("a", "a_only")] == "a_only" and sum("refused [rename]" in d for d in diags) == 2
    options = {"a": BackendNames(prefix=False), "b": BackendNames(prefix=False, rename={"search": "web_search"})}
    got, diags = table(BOTH, Collision.RENAME, options)
    assert got[("a", "search")] == "search" and got[("b", "search")] == "web_search" and diags == []


def test_rename_an_explicit_rename_wins_over_an_unrenamed_name():
    options = {"a": BackendNames(prefix=False, rename={"a_only": "search"}), "b": BackendNames(prefix=False)}
    got, _ = table({"a": [{"name": "a_only"}], "b": [{"name": "search"}]}, Collision.RENAME, options)
    assert got == {("a", "a_only"): "search"}
    options["b"] = BackendNames(prefix=False, rename={"search": "search"})
    got, _ = table({"a": [{"name": "a_only"}], "b": [{"name": "search"}]}, Collision.RENAME, options)
    assert got == {}  # two renames onto one name: both refused


def test_reject_refuses_every_colliding_entry():
    got, diags = table(BOTH, Collision.REJECT)
    assert got == {("a", "a_only"): "a_only", ("b", "b_only"): "b_only"}
    assert sorted(diags) == [
        "a:'search': 'search' collides (a:'search', b:'search'); refused [reject]",
        "b:'search': 'search' collides (a:'search', b:'search'); refused [reject]",
    ]


def test_three_way_priority_and_cascade():
    lists = {k: [{"name": "x"}] for k in "abc"}
    options = {k: BackendNames(prefix=False, priority=p) for k, p in zip("abc", (1, 3, 2))}
    got, _ = table(lists, Collision.PRIORITY, options)
    assert got == {("a", "x"): "a__x", ("b", "x"): "x", ("c", "x"): "c__x"}


def test_prefixed_backends_never_collide_across_backends():
    lists = {k: [{"name": "x"}, {"name": "y__z"}] for k in ("a", "b", "a-b", "b_a")}
    for strategy in Collision:
        got, diags = table(lists, strategy, options={})
        assert len(set(got.values())) == 8 and diags == []
