"""SEP-2243: a tool whose x-mcp-header annotation is invalid is left out of the catalogue
(a client MUST exclude it), with a diagnostic; a valid one stays."""

from __future__ import annotations

import pytest

from hopline.layers.routing.catalog import Catalog
from hopline.layers.routing.collide import Collision
from hopline.layers.routing.namespace import Namespace


def tool(name: str, prop: dict) -> dict:
    return {"name": name, "inputSchema": {"type": "object", "properties": {"x": prop}}}


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "x-mcp-header": ""},
        {"type": "string", "x-mcp-header": "not a token"},
        {"type": "object", "x-mcp-header": "Region"},
    ],
)
def test_an_invalid_annotation_leaves_the_tool_out(prop):
    lists = {"b": [tool("bad", prop), tool("good", {"type": "string", "x-mcp-header": "Region"})]}
    catalog = Catalog.build(lists, namespace=Namespace(), strategy=Collision("prefix"))
    assert [item["name"] for item in catalog.items] == ["b__good"]
    assert any("b:'bad'" in d or "b:bad" in d for d in catalog.diagnostics)
