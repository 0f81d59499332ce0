"""Catalog: naming rules, aliases, shadowing and stability, by example (draft §8; F13, BAD-10..12)."""

from __future__ import annotations

import random

import pytest

from hopline.layers.routing.catalog import BackendNames, Catalog, Collision, Entry
from hopline.layers.routing.namespace import Namespace

NS = Namespace()


def build(lists, strategy=Collision.PREFIX, **kw):
    return Catalog.build(lists, namespace=NS, strategy=strategy, **kw)


def names(cat):
    return [i["name"] for i in cat.items]


def table(cat):
    return {(e.backend, e.original): e.exposed for e in cat.entries}


def test_prefixes_by_default_and_routes_back():
    cat = build({"jira": [{"name": "create_issue"}], "github": [{"name": "create_issue", "description": "d"}]})
    assert names(cat) == ["github__create_issue", "jira__create_issue"]  # sorted backend ids
    assert cat.resolve("github__create_issue") == Entry("github__create_issue", "github", "create_issue")
    assert cat.exposed_for("jira", "create_issue") == "jira__create_issue"
    assert cat.resolve("create_issue") is None and cat.resolve("nope__x") is None and cat.resolve(None) is None
    assert cat.exposed_for("jira", "nope") is None
    assert cat.diagnostics == []
    assert len(cat) == 2 and "2 names" in repr(cat)


def test_items_are_shallow_copies_with_only_the_name_replaced():
    schema = {"type": "object"}
    original = {"name": "t", "description": "d", "inputSchema": schema, "_meta": {"k": 1}}
    cat = build({"b": [original]})
    assert cat.items == [{"name": "b__t", "description": "d", "inputSchema": schema, "_meta": {"k": 1}}]
    assert cat.items[0]["inputSchema"] is schema
    assert original["name"] == "t"  # the backend's item is untouched


def test_order_puts_backends_first_then_the_rest_sorted():
    lists = {"c": [{"name": "1"}], "a": [{"name": "2"}], "b": [{"name": "3"}, {"name": "0"}]}
    assert names(build(lists, order=["c", "ghost", "c"])) == ["c__1", "a__2", "b__3", "b__0"]
    assert names(build(lists)) == ["a__2", "b__3", "b__0", "c__1"]


def test_unprefixed_and_renamed_names():
    cat = build(
        {"fs": [{"name": "read"}, {"name": "write"}], "gh": [{"name": "create_issue"}]},
        options={"fs": BackendNames(prefix=False), "gh": BackendNames(rename={"create_issue": "new_issue"})},
    )
    assert table(cat) == {("fs", "read"): "read", ("fs", "write"): "write", ("gh", "create_issue"): "new_issue"}
    assert cat.resolve("new_issue").original == "create_issue"


def test_rename_is_final_even_on_an_unprefixed_backend_and_bad_renames_are_ignored():
    cat = build(
        {"a": [{"name": "x"}, {"name": "y"}, {"name": "z"}, {"name": "w"}]},
        options={"a": BackendNames(prefix=False, rename={"x": "a__own", "y": "b__theirs", "z": "has space", "w": 7})},
    )
    assert table(cat) == {("a", "x"): "a__own", ("a", "y"): "y", ("a", "z"): "z", ("a", "w"): "w"}
    joined = "\n".join(cat.diagnostics)
    assert "'b__theirs'" in joined and "not the prefix 'a__'" in joined and "'has space'" in joined and "not a valid name" in joined


def test_invalid_backend_id_is_a_config_error():
    with pytest.raises(ValueError, match="delimiter"):
        build({"a__b": [{"name": "x"}]})
    with pytest.raises(ValueError, match="runs into"):
        build({"acme_": [{"name": "status"}]})  # F13: acme_ + status vs acme + _status


def test_f13_acme_status_cannot_collide():
    cat = build({"acme": [{"name": "_status"}], "acm": [{"name": "e__status"}]})
    assert table(cat) == {("acme", "_status"): "acme___status", ("acm", "e__status"): "acm__e__status"}


@pytest.mark.parametrize("strategy", list(Collision))
@pytest.mark.req("NS-OPERATOR-PREFIX")
def test_bad11_a_tool_named_like_another_backends_tool_never_shadows_it(strategy):
    """Backend a (even unprefixed) lists 'b__x'; backend b lists 'x'. b keeps b__x in every strategy."""
    for a_opts in (BackendNames(), BackendNames(prefix=False), BackendNames(prefix=False, priority=99)):
        cat = build({"a": [{"name": "b__x"}], "b": [{"name": "x"}]}, strategy=strategy, options={"a": a_opts})
        assert cat.resolve("b__x") == Entry("b__x", "b", "x")
        assert cat.exposed_for("a", "b__x") == "a__b__x"


def test_names_in_an_unconfigured_namespace_do_not_move_when_that_backend_appears():
    """F13: adding a backend must not silently reroute another backend's names."""
    opts = {"u": BackendNames(prefix=False), "my": BackendNames(prefix=False)}
    before = build({"u": [{"name": "zz__q"}], "my": [{"name": "db__q"}]}, options=opts)
    after = build({"u": [{"name": "zz__q"}], "my": [{"name": "db__q"}], "zz": [{"name": "q"}], "my_db": [{"name": "q"}]}, options=opts)
    for key in table(before):
        assert table(after)[key] == table(before)[key]
    assert after.resolve("zz__q").backend == "zz" and after.resolve("my_db__q").backend == "my_db"
    assert before.resolve("zz__q") is None  # never handed to u


@pytest.mark.parametrize("name", ["get.weather", "gеt", "a\u200bb", "x" * 300, "tool/with/slashes", "名前"])
@pytest.mark.parametrize("prefix", [True, False])
def test_names_outside_the_charset_or_too_long_get_a_reversible_alias(name, prefix):
    cat = build({"svc": [{"name": name}, {"name": "ok"}]}, options={"svc": BackendNames(prefix=prefix)})
    exposed = cat.exposed_for("svc", name)
    assert NS.is_valid_name(exposed) and exposed not in ("get", "ab")  # homoglyphs do not pass as ASCII names
    assert cat.resolve(exposed) == Entry(exposed, "svc", name)
    assert any("alias" in d and exposed in d for d in cat.diagnostics)
    assert exposed == build({"svc": [{"name": name}]}, options={"svc": BackendNames(prefix=prefix)}).exposed_for("svc", name)


def test_alias_of_an_unprefixed_name_that_would_land_in_a_namespace_is_prefixed():
    cat = build({"u": [{"name": "zz..q"}]}, options={"u": BackendNames(prefix=False)})
    (exposed,) = names(cat)
    assert exposed.startswith("u__zz__q_")


def test_empty_non_string_and_non_mapping_items_are_skipped_with_a_diagnostic():
    cat = build({"b": [{"name": ""}, {"name": None}, {"name": 3}, {}, "junk", {"name": "ok"}], "c": None})
    assert names(cat) == ["b__ok"]
    assert len(cat.diagnostics) == 5 and all("skipped" in d for d in cat.diagnostics)


def test_a_repeated_name_keeps_its_first_item():
    cat = build({"b": [{"name": "x", "v": 1}, {"name": "x", "v": 2}]})
    assert cat.items == [{"name": "b__x", "v": 1}]
    assert "more than once" in cat.diagnostics[0]


def test_bad11_names_stable_across_100_shuffled_relists():
    rng = random.Random(11)
    pool = ["search", "x", "b__x", "get.weather", "read", "a__x", "q" * 70]
    lists = {b: [{"name": n} for n in rng.sample(pool, 5)] for b in ("a", "b", "c", "d")}
    options = {"a": BackendNames(prefix=False, priority=1), "b": BackendNames(prefix=False), "c": BackendNames(prefix=False, rename={"read": "search"})}
    for strategy in Collision:
        reference = build(lists, strategy, options=options)
        for _ in range(100):
            shuffled = {b: rng.sample(lists[b], len(lists[b])) for b in rng.sample(sorted(lists), len(lists))}
            assert table(build(shuffled, strategy, options=options)) == table(reference)


def test_version_is_stable_and_tracks_the_surface():
    lists = {"a": [{"name": "x", "description": "one"}], "b": [{"name": "y"}]}
    v = build(lists).version
    assert v == build(dict(reversed(list(lists.items())))).version
    assert v != build({"a": [{"name": "x", "description": "two"}], "b": [{"name": "y"}]}).version
    assert v != build(lists, options={"a": BackendNames(rename={"x": "z"})}).version
    assert v != build({"a": [{"name": "y"}], "b": [{"name": "x", "description": "one"}]}).version


def test_empty_input():
    cat = build({})
    assert cat.items == [] and cat.entries == [] and cat.diagnostics == [] and isinstance(cat.version, str)
