"""Resource links inside results (reference/mcp-wire.md §9, "Be careful with
``resource_link`` and embedded ``resource`` items").

Decision: the draft's "results are not namespaced" (§8) holds for everything a result
*contains*, but a ``resource_link`` is not content: it is an address the client is
expected to follow next (``resources/read`` it, subscribe to it), and behind an
aggregating gateway only the rewritten form routes. So hopline rewrites the ``uri`` of
every ``resource_link`` item in a ``tools/call`` result (``content``) and a
``prompts/get`` result (``messages[].content``) with the same reversible mapping as
``resources/list``. Embedded ``resource`` items are contents, like a
``resources/read`` result, and keep the backend's URI (a ``resources/read`` of an MCP
App names the ``ui://`` URI asked for: ``apps.py``); so does everything else
(``structuredContent`` is the tool's own data). Reverse mode presents the single
backend unchanged and does not call this.

``expose_links(value, backend, uris)`` returns a new result if anything changed, else
``None`` (the caller then forwards the original bytes). Pure; copies only the path
it changes.
"""

from __future__ import annotations

from typing import Any

from hopline.layers.routing.uris import UriMapper


def _content(item: Any, backend: str, uris: UriMapper) -> Any:
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "resource_link" and isinstance(item.get("uri"), str):
        return {**item, "uri": uris.expose(backend, item["uri"])}
    return None


def _items(items: Any, backend: str, uris: UriMapper) -> list[Any] | None:
    if not isinstance(items, list):
        return None
    out: list[Any] | None = None
    for i, item in enumerate(items):
        changed = _content(item, backend, uris)
        if changed is not None:
            if out is None:
                out = list(items)
            out[i] = changed
    return out


def expose_links(method: str, value: Any, backend: str, uris: UriMapper) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    if method == "tools/call":
        items = value.get("content")
        if items.__class__ is list:  # the common answer, no link in it: one pass, no call per item
            for item in items:
                if item.__class__ is not dict or item.get("type") == "resource_link":
                    break
            else:
                return None
        content = _items(items, backend, uris)
        return None if content is None else {**value, "content": content}
    if method == "prompts/get" and isinstance(value.get("messages"), list):
        messages: list[Any] | None = None
        for i, message in enumerate(value["messages"]):
            changed = _content(message.get("content"), backend, uris) if isinstance(message, dict) else None
            if changed is not None:
                if messages is None:
                    messages = list(value["messages"])
                messages[i] = {**message, "content": changed}
        return None if messages is None else {**value, "messages": messages}
    return None
