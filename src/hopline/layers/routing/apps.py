"""MCP Apps references (the ``io.modelcontextprotocol/ui`` extension, SEP-1865).

A tool links its interface with ``_meta.ui.resourceUri`` (older servers, and current
SDKs alongside, with the flat ``_meta["ui/resourceUri"]``); the host reads that
``ui://`` resource with ``resources/read`` and renders its
``text/html;profile=mcp-app`` contents. Behind an aggregating gateway the link must
name the URI the gateway routes, and stay ``ui://`` (``uris.py``: ``ui://{backend}
{delimiter}{rest}``).

Contract
- ``expose_tool(tool, backend, uris)``: a tool definition from ``backend`` with every
  ``ui://`` link in its ``_meta`` rewritten (both keys); a value that is not a
  ``ui://`` URI is left as it is (a host refuses it, as it would directly).
- ``expose_read(result, backend, uris)``: a ``resources/read`` result whose
  ``ui://`` contents name the URI the host asked for (the App's own address, not an
  embedded copy); other contents keep the backend's URI (``links.py``).
- ``hide_links(tool, shown)``: the tool without the UI links whose exposed URI
  ``shown`` refuses (a caller who may not read the App is not told it exists, as the
  visibility layer answers a hidden item like a missing one); the rest of ``_meta.ui``
  (``visibility``: who may call the tool) stays.
- They return a new value if anything changed, else ``None``; pure, copying only the
  path they change. Reverse and sidecar modes present the backend unchanged and do
  not call them. Tool results carry no UI link in the extension (the host renders
  the tool's own ``resourceUri``), so nothing else is rewritten.
"""

from __future__ import annotations

from typing import Any, Callable

from hopline.layers.routing.uris import UriMapper, is_ui

UI_META = "ui"  # _meta.ui: {resourceUri, visibility, ...}
RESOURCE_URI = "resourceUri"
FLAT_RESOURCE_URI = "ui/resourceUri"  # the deprecated flat key (ext-apps RESOURCE_URI_META_KEY)


def expose_tool(tool: Any, backend: str, uris: UriMapper) -> dict[str, Any] | None:
    meta = tool.get("_meta") if isinstance(tool, dict) else None
    if not isinstance(meta, dict):
        return None
    changed: dict[str, Any] = {}
    ui = meta.get(UI_META)
    if isinstance(ui, dict) and is_ui(ui.get(RESOURCE_URI)):
        changed[UI_META] = {**ui, RESOURCE_URI: uris.expose(backend, ui[RESOURCE_URI])}
    if is_ui(meta.get(FLAT_RESOURCE_URI)):
        changed[FLAT_RESOURCE_URI] = uris.expose(backend, meta[FLAT_RESOURCE_URI])
    return {**tool, "_meta": {**meta, **changed}} if changed else None


def expose_tools(tools: list[Any], backend: str, uris: UriMapper) -> list[Any]:
    """``tools`` with :func:`expose_tool` applied (the same list if nothing changed)."""
    out: list[Any] | None = None
    for i, tool in enumerate(tools):
        changed = expose_tool(tool, backend, uris)
        if changed is not None:
            if out is None:
                out = list(tools)
            out[i] = changed
    return tools if out is None else out


def expose_read(result: Any, backend: str, uris: UriMapper) -> dict[str, Any] | None:
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list):
        return None
    out: list[Any] | None = None
    for i, item in enumerate(contents):
        if isinstance(item, dict) and is_ui(item.get("uri")):
            if out is None:
                out = list(contents)
            out[i] = {**item, "uri": uris.expose(backend, item["uri"])}
    return None if out is None else {**result, "contents": out}


def hide_links(tool: Any, shown: Callable[[str], bool]) -> dict[str, Any] | None:
    meta = tool.get("_meta") if isinstance(tool, dict) else None
    if not isinstance(meta, dict):
        return None
    out = dict(meta)
    ui = meta.get(UI_META)
    if isinstance(ui, dict) and is_ui(ui.get(RESOURCE_URI)) and not shown(ui[RESOURCE_URI]):
        rest = {k: v for k, v in ui.items() if k != RESOURCE_URI}
        if rest:
            out[UI_META] = rest
        else:
            del out[UI_META]
    if is_ui(meta.get(FLAT_RESOURCE_URI)) and not shown(meta[FLAT_RESOURCE_URI]):
        del out[FLAT_RESOURCE_URI]
    if out == meta:
        return None
    if out:
        return {**tool, "_meta": out}
    return {k: v for k, v in tool.items() if k != "_meta"}
