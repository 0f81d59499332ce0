"""The gateway's Catalogue (layers/capability/lists.py) on fakes of its role Protocols:
composed once per backend versions, fail-open fan-out with a fail-closed gate handed in,
per-caller views filtered by the surface and the gates, bounded caches, resolution."""

from __future__ import annotations

import pytest

from hopline.binding import TOOLS_LIST
from hopline.context import Principal
from hopline.jsonrpc import HoplineError, UnavailableError
from hopline.layers.capability import lists
from hopline.layers.capability.lists import Catalogue, tools_in_modes
from hopline.pipeline import Pipeline, ToolPlan

from tests.layers.fakes_lists import FakeBackend, FakeSource, FakeSources, Gate, Hide, tool

ALICE, ADMIN = Principal("alice"), Principal("admin")


def two_backends(**kw) -> tuple[FakeSources, dict[str, FakeBackend]]:
    backends = {"a": FakeBackend("a", [tool("x"), tool("y")]), "b": FakeBackend("b", [tool("z")])}
    return FakeSources("a", "b", **kw), backends


async def test_a_catalogue_is_composed_once_for_every_session_with_the_same_backends():
    sources, backends = two_backends()
    catalogue = Catalogue(sources)
    held_1: dict = {}
    held_2: dict = {}
    items, refs, missing, _key = await catalogue.fan_out(FakeSource(backends), TOOLS_LIST, held_1)
    assert [t["name"] for t in items] == ["a__x", "a__y", "b__z"] and missing == []
    assert refs == [("a", "x"), ("a", "y"), ("b", "z")]
    await catalogue.fan_out(FakeSource(backends), TOOLS_LIST, held_2)
    assert [b.fetches for b in backends.values()] == [1, 1]  # the second session used the cached lists
    assert len(catalogue.catalogs) == 1 and held_1[TOOLS_LIST][1] is held_2[TOOLS_LIST][1]
    assert catalogue.latest[TOOLS_LIST] == held_1[TOOLS_LIST]  # what a stateless request resolves on
    catalogue.clear()
    assert not catalogue.catalogs and not catalogue.latest and not catalogue.views


async def test_a_failing_backend_is_left_out_observed_and_not_asked_again_at_once():
    sources = FakeSources("a", "b")
    backends = {"a": FakeBackend("a", [tool("x")]), "b": FakeBackend("b", UnavailableError("down"))}
    observed, recorded = [], []
    catalogue = Catalogue(
        sources, observe=lambda b, r: observed.append(b), record=lambda b, m, r: recorded.append((b, m))
    )
    source = FakeSource(backends)
    items, _refs, missing, _ = await catalogue.fan_out(source, TOOLS_LIST, {})
    assert [t["name"] for t in items] == ["a__x"] and missing == ["b"]
    assert sorted(observed) == ["a", "b"] and sorted(recorded) == [("a", TOOLS_LIST), ("b", TOOLS_LIST)]
    assert source.started == [5.0]  # the list timeout bounds the wait for backends still starting
    await catalogue.fan_out(source, TOOLS_LIST, {})
    assert backends["b"].fetches == 1  # within retry_after it is not asked (and waited for) again


async def test_the_fail_closed_rule_is_the_callable_handed_in():
    sources = FakeSources("a", "b")
    backends = {"a": FakeBackend("a", [tool("x")]), "b": FakeBackend("b", UnavailableError("down"))}
    seen = []

    def check(method: str, missing: list[str]) -> None:
        seen.append((method, missing))
        if missing:
            raise UnavailableError(f"{method}: missing {missing}")

    catalogue = Catalogue(sources, check=check)
    fanned = await catalogue.fan_out(FakeSource(backends), TOOLS_LIST, {})
    with pytest.raises(HoplineError, match="missing"):
        catalogue.view(TOOLS_LIST, ALICE, fanned)
    assert seen == [(TOOLS_LIST, ["b"])]


async def test_a_view_is_filtered_per_caller_cached_and_dropped_when_a_gate_changes():
    hide, gate = Hide("y"), Gate()
    sources, backends = two_backends(pipeline=Pipeline(surface=[hide], gates=[gate]))
    catalogue = Catalogue(sources)
    fanned = await catalogue.fan_out(FakeSource(backends), TOOLS_LIST, {})
    items, owners, missing = catalogue.view(TOOLS_LIST, ALICE, fanned)
    assert [t["name"] for t in items] == ["a__x", "b__z"] and owners == ["a", "b"] and missing == []
    assert [t["name"] for t in catalogue.view(TOOLS_LIST, ADMIN, fanned)[0]] == ["a__x", "a__y", "b__z"]
    asked = hide.asked
    catalogue.view(TOOLS_LIST, ALICE, fanned)
    assert hide.asked == asked  # cached per (catalogue, gate version, caller)
    gate.down.add("b")
    catalogue.gate_changed()
    items, owners, missing = catalogue.view(TOOLS_LIST, ALICE, fanned)
    assert [t["name"] for t in items] == ["a__x"] and missing == ["b"]  # a withdrawn backend is named


async def test_the_view_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(lists, "MAX_VIEWS", 3)
    sources, backends = two_backends(pipeline=Pipeline(surface=[Hide("y")]))
    catalogue = Catalogue(sources)
    fanned = await catalogue.fan_out(FakeSource(backends), TOOLS_LIST, {})
    for n in range(10):
        catalogue.view(TOOLS_LIST, Principal(f"user-{n}"), fanned)
    assert len(catalogue.views) == 3


async def test_resolution_uses_the_held_catalogue_only_while_its_backend_is_current():
    sources, backends = two_backends()
    catalogue = Catalogue(sources)
    held: dict = {}
    await catalogue.fan_out(FakeSource(backends), TOOLS_LIST, held)
    entry, _catalog = catalogue.resolve_cached(held, TOOLS_LIST, "b__z", backends, stateful=True)
    assert (entry.backend, entry.original) == ("b", "z")
    assert catalogue.resolve_cached({}, TOOLS_LIST, "b__z", backends, stateful=True) is None  # composed nothing
    assert catalogue.resolve_cached({}, TOOLS_LIST, "b__z", backends, stateful=False) is not None  # the latest
    assert catalogue.resolve_cached(held, TOOLS_LIST, "b__z", {"b": OSError("gone")}, stateful=True) is None
    backends["b"].version = 2  # its list changed: compose afresh
    assert catalogue.resolve_cached(held, TOOLS_LIST, "b__z", backends, stateful=True) is None
    assert catalogue.resolve_cached(held, TOOLS_LIST, "nope", backends, stateful=True) is None


async def test_tools_in_modes_stand_in_for_their_backends_and_list_standard_ones_in_full():
    class Mode:
        async def tools(self, host):
            return [tool(f"search-for-{host}")]

    plan = ToolPlan(default="standard", modes={"search": Mode()}, groups={"a": "search"})

    async def entries():
        return [tool("a__x"), tool("b__z")], ["a", "b"], ["c"]

    items, missing = await tools_in_modes(plan, entries, lambda mode: mode)
    assert [t["name"] for t in items] == ["search-for-search", "b__z"] and missing == ["c"]


def test_the_caches_are_off_the_hub_and_the_preview_and_the_session_decide_no_visibility():
    from hopline.compose.surface import _Preview
    from hopline.layers.session.gateway_session import GatewaySession
    from hopline.layers.session.hub import Hub

    assert not {"catalogs", "latest_catalogs", "visible_cache", "gate_version"} & set(Hub.__annotations__)
    assert "catalogue" in Hub.__annotations__
    assert not issubclass(_Preview, GatewaySession) and not hasattr(GatewaySession, "_check_visible")
