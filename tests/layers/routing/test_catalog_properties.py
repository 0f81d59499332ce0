"""Catalog properties over random backends x names x options x strategies (hypothesis; BAD-10..12).

For every input: exposed names are unique, valid and route back to exactly the
(backend, original) they came from; a name with the delimiter always carries its
own backend's prefix; every dropped name has a diagnostic; and the result does not
depend on mapping iteration order or item positions.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from hopline.layers.routing.catalog import BackendNames, Catalog, Collision
from hopline.layers.routing.collide import show
from hopline.layers.routing.namespace import Namespace

NAMESPACES = [Namespace(), Namespace(delimiter="--", max_length=40)]
BACKENDS = ["a", "b", "c", "zz", "my", "my_db", "b-a"]
POOL = ["x", "y", "search", "a__x", "b__x", "zz__q", "my__db", "x.y", "get.weather", "é", "q" * 70,
        "__x", "x__", "a--x", "b-x", "a_", "", "gеt"]
COMMON = st.sampled_from(["x", "y", "search", "a__x", "b--x"])  # so that collisions are frequent
names = st.one_of(COMMON, COMMON, st.sampled_from(POOL), st.text(alphabet="ab_-.x", max_size=6), st.sampled_from([None, 3]))
targets = st.one_of(st.sampled_from(POOL + ["search", "a__new", "b--new", "bad name", "w" * 80]), st.text(alphabet="ab_-x", min_size=1, max_size=4))
options_st = st.builds(BackendNames, prefix=st.sampled_from([False, False, True]), priority=st.integers(0, 2),
                        rename=st.dictionaries(st.sampled_from(POOL[:10]), st.one_of(COMMON, targets), max_size=3))


@st.composite
def inputs(draw):
    ns = draw(st.sampled_from(NAMESPACES))
    usable = [b for b in BACKENDS if _ok(ns, b)]
    backends = draw(st.lists(st.sampled_from(usable), min_size=2, max_size=4, unique=True))
    lists = {b: [{"name": n, "i": i} for i, n in enumerate(draw(st.lists(names, max_size=8)))] for b in backends}
    options = {b: draw(options_st) for b in backends if draw(st.integers(0, 3))}
    order = draw(st.one_of(st.none(), st.permutations(backends + ["ghost"])))
    return ns, lists, options, order, draw(st.sampled_from(list(Collision))), draw(st.randoms(use_true_random=False))


def _ok(ns, backend):
    try:
        ns.check_backend_id(backend)
        return True
    except ValueError:
        return False


def preferred(ns, backend, original, opts):
    """Reference model of rules 2-4: the name an entry gets when nothing collides."""
    realize = lambda w: w if ns.is_valid_name(w) else ns.alias(w, backend, original)  # noqa: E731
    mine = lambda x: ns.delimiter not in x or (ns.split(x) or ("",))[0] == backend  # noqa: E731
    target = opts.rename.get(original)
    if ns.is_valid_name(target) and mine(target):
        return target
    if not opts.prefix and mine(realize(original)):
        return realize(original)
    return realize(ns.join(backend, original))


def build(ns, lists, options, order, strategy):
    return Catalog.build(lists, namespace=ns, strategy=strategy, options=options, order=order)


def table(cat):
    return {(e.backend, e.original): e.exposed for e in cat.entries}


@settings(max_examples=500, deadline=None)
@given(inputs())
def test_surface_is_unique_valid_owned_and_reversible(case):
    ns, lists, options, order, strategy, _ = case
    cat = build(ns, lists, options, order, strategy)
    exposed = [e.exposed for e in cat.entries]
    assert len(set(exposed)) == len(exposed)
    given_names = {(b, i["name"]) for b, items in lists.items() for i in items if isinstance(i["name"], str) and i["name"]}
    for item, entry in zip(cat.items, cat.entries, strict=True):
        assert item["name"] == entry.exposed and ns.is_valid_name(entry.exposed)
        assert (entry.backend, entry.original) in given_names
        assert cat.resolve(entry.exposed) == entry
        assert cat.exposed_for(entry.backend, entry.original) == entry.exposed
        assert ns.delimiter not in entry.exposed or ns.split(entry.exposed)[0] == entry.backend  # BAD-12
        source = next(i for i in lists[entry.backend] if i["name"] == entry.original)
        assert item["i"] == source["i"]
    for backend, original in given_names - set(table(cat)):
        assert any(d.startswith(f"{backend}:{show(original)}") and "refused" in d for d in cat.diagnostics)
    if strategy is Collision.PREFIX:
        assert set(table(cat)) == given_names  # prefixed forms never collide: nothing refused
    if strategy is Collision.REJECT:
        want = {k: preferred(ns, *k, options.get(k[0], BackendNames())) for k in given_names}
        unique = {k: n for k, n in want.items() if list(want.values()).count(n) == 1}
        assert table(cat) == unique


@settings(max_examples=300, deadline=None)
@given(inputs())
@pytest.mark.req("COLLISION-DETERMINISTIC")
def test_build_is_deterministic_and_order_independent(case):
    ns, lists, options, order, strategy, rnd = case
    cat = build(ns, lists, options, order, strategy)
    keys = list(lists)
    rnd.shuffle(keys)
    again = build(ns, {k: lists[k] for k in keys}, dict(reversed(list(options.items()))), order, strategy)
    assert (again.items, again.entries, again.diagnostics, again.version) == (cat.items, cat.entries, cat.diagnostics, cat.version)
    shuffled = {k: rnd.sample(v, len(v)) for k, v in lists.items()}
    assert table(build(ns, shuffled, options, order, strategy)) == table(cat)  # BAD-11: positions never decide names


def test_bad11_collisions_detected_on_injected_duplicates():
    """Every injected cross-backend duplicate of an unprefixed name is detected (rate 1.0)."""
    rng = random.Random(7)
    ns = Namespace()
    for _ in range(200):
        shared = "".join(rng.choices("abcxyz", k=5))
        lists = {b: [{"name": shared}, {"name": f"{b}-own"}] for b in ("p", "q", "r")}
        cat = Catalog.build(lists, namespace=ns, strategy=Collision.REJECT, options={b: BackendNames(prefix=False) for b in lists})
        assert cat.resolve(shared) is None and len(cat.entries) == 3
        assert sum("collides" in d for d in cat.diagnostics) == 3
