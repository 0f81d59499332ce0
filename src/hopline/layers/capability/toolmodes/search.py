"""Search mode (Layer 7 progressive disclosure): ``get_tool`` + ``invoke_tool``.

Wire-compatible with agentgateway's ``toolMode: Search`` (seed 001): ``tools/list``
shows two tools; ``get_tool``'s description carries the index of the caller's tool
names and nothing else of them; ``get_tool {"name": …}`` answers
``{"results": [{"name", "tool_description", "args"}]}`` or, on a miss,
``{"results": [], "status": "no_match", "available_tools": [...]}``;
``invoke_tool {"name", "arguments"}`` is one ``tools/call`` through the pipeline.
hopline adds ``get_tool {"query": …, "top_k": …}``: the ``top_k`` best tools for a
description fragment or a task in plain words (BM25F with word families, optionally
hybrid with embeddings: ``index.py``), answered in the same shape.

Policy is the host's: everything here starts from ``host.visible_tools()`` (already
filtered for this caller) and every invoke is ``host.call_tool``, so a hidden tool is
absent from the index, from every result and from ``invoke_tool``, whose answer for it
is the host's own "unknown tool" error, word for word.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from hopline.layers.capability.toolmodes.index import IndexCache, ToolIndex
from hopline.pipeline import ToolHost

GET_TOOL = "get_tool"
INVOKE_TOOL = "invoke_tool"

_RESULT_ITEM = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tool_description": {"type": "string"},
        "args": {"type": "object", "description": "The input argument schema for the tool."},
    },
    "required": ["name", "tool_description", "args"],
}
GET_TOOL_OUTPUT = {
    "type": "object",
    "properties": {
        "results": {"type": "array", "items": _RESULT_ITEM},
        "status": {"type": "string", "description": "no_match means the lookup succeeded but found no tool."},
        "available_tools": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["results"],
}
INVOKE_TOOL_DEFINITION = {
    "name": INVOKE_TOOL,
    "description": (
        "Invoke a tool by name with the given arguments. "
        "Use get_tool first to discover available tools and their required arguments."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The name of the tool to invoke."},
            "arguments": {"type": "object", "description": "The arguments to pass to the tool."},
        },
        "required": ["name"],
    },
}


def get_tool_definition(names: list[str], top_k: int) -> dict[str, Any]:
    return {
        "name": GET_TOOL,
        "description": (
            "Get information about available tools. Use 'name' for exact lookup by tool name, or 'query' to search "
            f"by a description fragment or task in plain words (best {top_k} first). "
            'Hits return {"results": [...]}. '
            'Lookup misses return {"results": [], "status": "no_match", "available_tools": [...]}. '
            f"Available tools: [{', '.join(names)}]"
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": (
                        "Exact tool name. Use a name you have already seen from this server in the current session."
                    ),
                },
                "query": {"type": "string", "description": "What the tool should do, or words from its description."},
                "top_k": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"How many ranked results for 'query' (default {top_k}).",
                },
            },
        },
        "outputSchema": GET_TOOL_OUTPUT,
    }


def result_item(tool: dict[str, Any]) -> dict[str, Any]:
    description = tool.get("description")
    schema = tool.get("inputSchema")
    return {
        "name": tool["name"],
        "tool_description": description if isinstance(description, str) else "",
        "args": schema if isinstance(schema, dict) else {"type": "object"},
    }


def structured(value: dict[str, Any], *, error: bool = False) -> dict[str, Any]:
    """A ``CallToolResult`` carrying ``value`` as structured content and as JSON text."""
    return {
        "content": [{"type": "text", "text": orjson.dumps(value).decode()}],
        "structuredContent": value,
        "isError": error,
    }


def tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


class Catalogue:
    """The caller's visible tools and the shared index over them, for one request."""

    def __init__(self, tools: list[dict[str, Any]], index: ToolIndex) -> None:
        self.tools = tools
        self.index = index
        self.names = [t["name"] for t in tools]
        self.allowed = frozenset(self.names)

    def lookup(self, name: str) -> dict[str, Any] | None:
        return self.index.lookup(name, self.allowed)

    async def search(self, query: str, k: int) -> list[dict[str, Any]]:
        if self.index.hybrid:  # a query embedding is a few ms of NumPy: not on the event loop
            return await asyncio.to_thread(self.index.search, query, k, self.allowed)
        return self.index.search(query, k, self.allowed)

    def answer(self, hits: list[dict[str, Any]]) -> dict[str, Any]:
        if hits:
            return structured({"results": [result_item(t) for t in hits]})
        return structured({"results": [], "status": "no_match", "available_tools": self.names})


async def catalogue(host: ToolHost, cache: IndexCache) -> Catalogue:
    """The caller's tools now, with the index of exactly that catalogue version
    (built in a worker thread the first time any session sees this version)."""
    tools = [t for t in await host.visible_tools() if isinstance(t, dict) and isinstance(t.get("name"), str)]
    key, usable, digests = cache.version(tools)
    index = cache.cached(key) or await asyncio.to_thread(cache.build, key, usable, digests)
    return Catalogue(usable, index)


class SearchMode:
    """``tools/list`` → ``get_tool`` + ``invoke_tool``; one instance serves every session."""

    name = "search"

    def __init__(self, *, top_k: int = 5, max_top_k: int = 20, cache: IndexCache | None = None) -> None:
        self.top_k = top_k
        self.max_top_k = max(max_top_k, top_k)
        self.cache = cache or IndexCache()

    def __repr__(self) -> str:
        return f"<SearchMode top_k={self.top_k} {self.cache!r}>"

    async def tools(self, host: ToolHost) -> list[dict[str, Any]]:
        tools = await host.visible_tools()
        names = [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
        return [get_tool_definition(names, self.top_k), INVOKE_TOOL_DEFINITION]

    async def call(self, host: ToolHost, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        if name == GET_TOOL:
            return await self.get_tool(host, arguments)
        if name == INVOKE_TOOL:
            return await invoke_tool(host, arguments)
        return None

    async def get_tool(self, host: ToolHost, arguments: dict[str, Any]) -> dict[str, Any]:
        name, query, top_k = arguments.get("name"), arguments.get("query"), arguments.get("top_k", self.top_k)
        if name is not None and not isinstance(name, str) or query is not None and not isinstance(query, str):
            return tool_error("get_tool: 'name' and 'query' must be strings")
        if name is None and query is None:
            return tool_error("get_tool: give 'name' (exact tool name) or 'query' (what the tool should do)")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            return tool_error("get_tool: 'top_k' must be a positive integer")
        found = await catalogue(host, self.cache)
        if name is not None:
            tool = found.lookup(name)
            if tool is not None or query is None:
                return found.answer([tool] if tool is not None else [])
        return found.answer(await found.search(query or "", min(top_k, self.max_top_k)))


async def invoke_tool(host: ToolHost, arguments: dict[str, Any]) -> dict[str, Any]:
    """One ``tools/call`` through the pipeline. An unknown or hidden name raises the
    host's ``InvalidParams``, exactly as ``tools/call`` would answer it."""
    name, args = arguments.get("name"), arguments.get("arguments")
    if not isinstance(name, str):
        return tool_error("invoke_tool: 'name' must be a string")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return tool_error("invoke_tool: 'arguments' must be an object")
    return await host.call_tool(name, args)
