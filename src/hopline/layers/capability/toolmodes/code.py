"""Code mode (Layer 7 progressive disclosure): one ``run_code`` tool.

``tools/list`` shows ``run_code``, whose description states the in-sandbox API and
the index of the caller's tool names. ``run_code {"code": "…"}`` runs Python in the
Monty sandbox (``sandbox.py``: a worker process, no file system, network or
processes, wall-clock/memory/output limits) with four functions:

- ``call_tool(name, arguments=None, **kwargs)`` → the tool's ``structuredContent``
  if it has one, else its text (the content blocks if they are not all text); a
  tool error raises ``RuntimeError``, an unknown or hidden name ``LookupError``
  with the host's own "unknown tool" message.
- ``search_tools(query, top_k=5)`` and ``get_tool(name)`` → the same items as Search
  mode's ``get_tool`` (``name``, ``tool_description``, ``args``), or ``None``.
- ``list_tools()`` → the caller's tool names.

Every ``call_tool`` is ``host.call_tool``: one ``tools/call`` through the whole
pipeline (policy, resilience, audit) for this caller. The answer is
``{"result": <last expression>, "output": <printed>}`` as structured content and
JSON text, or ``isError`` with the error, traceback and output. A run that finds
every sandbox worker busy and the queue full, or waits past the queue's bound, gets
``isError`` at once too (``RuntimeError: sandbox busy: …; try again shortly``), like
every other failure of a run.
"""

from __future__ import annotations

from typing import Any

from hopline.jsonrpc import HoplineError, InvalidParams
from hopline.layers.capability.toolmodes import sandbox
from hopline.layers.capability.toolmodes.index import IndexCache
from hopline.layers.capability.toolmodes.search import (
    Catalogue,
    catalogue,
    result_item,
    structured,
)
from hopline.pipeline import ToolHost

RUN_CODE = "run_code"


def run_code_definition(names: list[str], limits: sandbox.Limits) -> dict[str, Any]:
    return {
        "name": RUN_CODE,
        "description": (
            f"Run Python code in a sandbox (no files, network or processes; {limits.timeout:g} s limit) that calls "
            "tools, so several calls and the logic between them take one step. Returns the value of the last "
            "expression as JSON, and what was printed. In the code: call_tool(name, arguments) returns the tool's "
            "structured result or text (raises RuntimeError if the tool fails); search_tools(query, top_k=5) and "
            "get_tool(name) return {name, tool_description, args} items describing tools; list_tools() returns names. "
            f"Available tools: [{', '.join(names)}]"
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Python source; its last expression is the result."}
            },
            "required": ["code"],
        },
    }


def unwrap(name: str, result: dict[str, Any]) -> Any:
    """A ``CallToolResult`` as the sandboxed code sees it."""
    content = result.get("content") if isinstance(result.get("content"), list) else []
    texts = [
        c.get("text")
        for c in content
        if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str)
    ]
    if result.get("isError"):
        raise sandbox.SandboxError("RuntimeError", f"tool {name} failed: {' '.join(texts) or 'no details'}")
    if "structuredContent" in result:
        return result["structuredContent"]
    return "\n".join(texts) if len(texts) == len(content) else content


class _Api:
    """The functions one run may call, bound to one caller's host."""

    def __init__(self, host: ToolHost, cache: IndexCache, top_k: int, max_top_k: int) -> None:
        self.host = host
        self.cache = cache
        self.top_k = top_k
        self.max_top_k = max_top_k
        self._catalogue: Catalogue | None = None

    def functions(self) -> dict[str, sandbox.HostFunction]:
        return {
            "call_tool": self.call_tool,
            "search_tools": self.search_tools,
            "get_tool": self.get_tool,
            "list_tools": self.list_tools,
        }

    async def _found(self) -> Catalogue:
        if self._catalogue is None:
            self._catalogue = await catalogue(self.host, self.cache)
        return self._catalogue

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        if not isinstance(name, str):
            raise sandbox.SandboxError("TypeError", "call_tool(): name must be a string")
        if arguments is not None and not isinstance(arguments, dict):
            raise sandbox.SandboxError("TypeError", "call_tool(): arguments must be a dict")
        try:
            result = await self.host.call_tool(name, {**(arguments or {}), **kwargs})
        except InvalidParams as exc:  # unknown or hidden: the same words tools/call would use
            raise sandbox.SandboxError("LookupError", exc.message) from None
        except HoplineError as exc:
            raise sandbox.SandboxError("RuntimeError", exc.message) from None
        return unwrap(name, result)

    async def search_tools(self, query: str, top_k: int | None = None) -> list[dict[str, Any]]:
        if not isinstance(query, str):
            raise sandbox.SandboxError("TypeError", "search_tools(): query must be a string")
        k = self.top_k if top_k is None else top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise sandbox.SandboxError("ValueError", "search_tools(): top_k must be a positive integer")
        found = await self._found()
        return [result_item(t) for t in await found.search(query, min(k, self.max_top_k))]

    async def get_tool(self, name: str) -> dict[str, Any] | None:
        tool = (await self._found()).lookup(name) if isinstance(name, str) else None
        return result_item(tool) if tool is not None else None

    async def list_tools(self) -> list[str]:
        return list((await self._found()).names)


class CodeMode:
    """``tools/list`` → ``run_code``; one instance serves every session, and its
    ``workers`` (the gateway's sandbox pool, checked out for ``limits``, given by whoever
    builds the mode: see :func:`sandbox.pool`) serve every run. :meth:`aclose` reaps them."""

    name = "code"

    def __init__(
        self,
        *,
        limits: sandbox.Limits = sandbox.Limits(),
        top_k: int = 5,
        max_top_k: int = 20,
        cache: IndexCache | None = None,
        workers: sandbox.Workers,
    ) -> None:
        self.limits = limits
        self.top_k = top_k
        self.max_top_k = max(max_top_k, top_k)
        self.cache = cache or IndexCache()
        self.workers = workers

    async def aclose(self, grace: float | None = None) -> None:
        """Reap the sandbox workers; runs in flight get ``grace`` seconds, then are killed."""
        await self.workers.aclose(grace)

    def __repr__(self) -> str:
        return f"<CodeMode {self.limits}>"

    async def tools(self, host: ToolHost) -> list[dict[str, Any]]:
        tools = await host.visible_tools()
        return [
            run_code_definition(
                [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)], self.limits
            )
        ]

    async def call(self, host: ToolHost, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        if name != RUN_CODE:
            return None
        code = arguments.get("code")
        if not isinstance(code, str):
            return {"content": [{"type": "text", "text": "run_code: 'code' must be a string"}], "isError": True}
        api = _Api(host, self.cache, self.top_k, self.max_top_k)
        outcome = await sandbox.run(code, api.functions(), self.limits, self.workers)
        if outcome.ok:
            return structured(outcome.as_json())
        text = outcome.error or "error"
        if outcome.output:
            text += "\n--- printed ---\n" + outcome.output
        return {"content": [{"type": "text", "text": text}], "structuredContent": outcome.as_json(), "isError": True}
