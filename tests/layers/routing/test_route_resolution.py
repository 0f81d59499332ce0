"""The router (layers/routing/router.py): an invoke resolved to its Route once, a name on
the caller's catalogue (held, else composed afresh, else what an unlisted name means), a
URI on the URI table and only to a configured backend; unknown is -32602 naming it."""

from __future__ import annotations

import pytest

from hopline.jsonrpc import InvalidParams
from hopline.layers.routing import router
from hopline.layers.routing.catalog import Catalog, Collision, Entry
from hopline.layers.routing.namespace import Namespace
from hopline.layers.routing.router import Route
from hopline.layers.routing.uris import UriMapper

ADD = {"name": "add", "description": "adds", "inputSchema": {"type": "object"}}


def catalog() -> Catalog:
    return Catalog.build({"a": [ADD], "b": [{"name": "rm"}]}, namespace=Namespace("__"), strategy=Collision.PREFIX)


class FakeNames:
    """A caller's catalogue: ``held`` is what it last composed (None: nothing)."""

    def __init__(self, held: Catalog | None) -> None:
        self.held, self.asked = held, []

    def cached(self, list_method, name):
        self.asked.append(("cached", list_method, name))
        entry = self.held.resolve(name) if self.held is not None else None
        return None if entry is None else (entry, self.held)

    async def composed(self, list_method):
        self.asked.append(("composed", list_method))
        return catalog()

    async def unlisted(self, list_method, kind, name, request_id):
        self.asked.append(("unlisted", list_method, kind, name))
        if name == "a__parked":  # found once its backend is reopened
            return Entry(name, "a", "parked"), catalog()
        raise InvalidParams(f"Unknown {kind}: {name!r}", request_id=request_id)


async def test_a_name_in_the_held_catalogue_routes_without_composing():
    names = FakeNames(catalog())
    route = await router.by_name("tools/call", "a__add", 7, names)
    assert route == Route("tool", "a", "add", "a__add", {**ADD, "name": "a__add"})
    assert names.asked == [("cached", "tools/list", "a__add")]


async def test_a_name_not_held_is_looked_up_in_a_catalogue_composed_afresh():
    names = FakeNames(None)
    route = await router.by_name("prompts/get", "b__rm", 7, names)
    assert (route.kind, route.backend, route.target, route.exposed) == ("prompt", "b", "rm", "b__rm")
    assert names.asked == [("cached", "prompts/list", "b__rm"), ("composed", "prompts/list")]


async def test_an_unlisted_name_is_what_the_session_says_it_is():
    names = FakeNames(None)
    route = await router.by_name("tools/call", "a__parked", 7, names)
    assert (route.backend, route.target, route.definition) == ("a", "parked", None)
    with pytest.raises(InvalidParams) as unknown:
        await router.by_name("tools/call", "a__nope", 9, names)
    assert unknown.value.message == "Unknown tool: 'a__nope'" and unknown.value.request_id == 9


def test_a_uri_routes_to_a_configured_backend_only():
    uris = UriMapper("hop", "__")
    exposed = uris.expose("a", "file:///x")
    assert router.by_uri(exposed, uris, {"a"}, 1) == Route("resource", "a", "file:///x", exposed)
    for bad in (uris.expose("gone", "file:///x"), "file:///x", None, 3):
        with pytest.raises(InvalidParams) as unknown:
            router.by_uri(bad, uris, {"a"}, 1)
        assert unknown.value.message == f"Unknown resource: {bad!r}"
