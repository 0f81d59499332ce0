"""The demo server's tools, resource and prompt, and the small types that hold them.

Contract
- A :class:`Catalog` is plain data: what ``tools/list``, ``resources/list`` and
  ``prompts/list`` show, plus the async function behind each tool. It knows
  nothing of eras or JSON-RPC; :mod:`hopline.demo.protocol` does that.
- A tool function takes ``(arguments, request)`` and returns the ``content``
  list, or a whole ``CallToolResult`` dict when it needs ``structuredContent``.
  Bad arguments raise :class:`~hopline.demo.context.ToolError` (an
  ``isError: true`` result the model can read and correct, as MCP 2025-11-25
  asks), never a JSON-RPC error.
- :data:`DEMO` is what ``hopline demo-server`` serves:
  ``echo``, ``add``, ``countdown``, ``whoami``; resource ``demo://readme``;
  prompt ``greet``. Other servers (``tests/servers/fault_server.py``) build
  their own :class:`Catalog`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import orjson

from hopline.demo.context import Request, ToolError

ToolFn = Callable[[dict[str, Any], Request], Awaitable[list[dict[str, Any]] | dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: ToolFn
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations is not None:
            out["annotations"] = self.annotations
        return out


@dataclass(frozen=True, slots=True)
class Resource:
    uri: str
    name: str
    text: str
    mime_type: str = "text/plain"
    description: str = ""

    def describe(self) -> dict[str, Any]:
        return {"uri": self.uri, "name": self.name, "description": self.description, "mimeType": self.mime_type}

    def contents(self) -> list[dict[str, Any]]:
        return [{"uri": self.uri, "mimeType": self.mime_type, "text": self.text}]


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    description: str
    arguments: tuple[dict[str, Any], ...]
    render: Callable[[dict[str, str]], list[dict[str, Any]]]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "arguments": list(self.arguments)}


@dataclass(slots=True)
class Catalog:
    tools: dict[str, Tool] = field(default_factory=dict)
    resources: dict[str, Resource] = field(default_factory=dict)
    prompts: dict[str, Prompt] = field(default_factory=dict)

    def add(self, *items: Tool | Resource | Prompt) -> Catalog:
        for item in items:
            table: dict[str, Any] = (
                self.tools if isinstance(item, Tool) else self.resources if isinstance(item, Resource) else self.prompts
            )
            table[item.uri if isinstance(item, Resource) else item.name] = item
        return self


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def number(args: dict[str, Any], key: str) -> int | float:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError(f"argument {key!r} must be a number, got {value!r}")
    return value


def integer(args: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolError(f"argument {key!r} must be an integer in {low}..{high}, got {value!r}")
    return value


# -- the demo tools ------------------------------------------------------------------
async def _echo(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    value = args.get("text")
    if not isinstance(value, str):
        raise ToolError(f"argument 'text' must be a string, got {value!r}")
    return text(value)


async def _add(args: dict[str, Any], req: Request) -> dict[str, Any]:
    total = number(args, "a") + number(args, "b")
    structured = {"sum": total}
    # The text block repeats the structured value, as the spec recommends for
    # clients that ignore structuredContent.
    return {"content": text(orjson.dumps(structured).decode()), "structuredContent": structured}


async def _countdown(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    steps = integer(args, "steps", 3, 1, 100)
    delay = integer(args, "delay_ms", 50, 0, 2000) / 1000
    for done in range(1, steps + 1):
        # A notifications/cancelled for this request cancels the task here.
        await asyncio.sleep(delay)
        req.progress(done, steps, f"T-{steps - done}")
    req.log("info", f"countdown of {steps} finished")
    return text(f"liftoff after {steps} steps")


async def _whoami(args: dict[str, Any], req: Request) -> dict[str, Any]:
    seen = {
        "era": req.era.value,
        "protocolVersion": req.version,
        "clientInfo": req.client_info,
        "clientCapabilities": req.client_capabilities,
    }
    return {"content": text(orjson.dumps(seen).decode()), "structuredContent": seen}


README = """\
# hopline demo server

You reached the MCP server that ships with hopline. It speaks both MCP eras on
one stdio connection (handshake <= 2025-11-25 and stateless 2026-07-28), the way
the official SDK does: the first request decides.

Tools: echo(text), add(a, b), countdown(steps, delay_ms) with progress, whoami().
Prompt: greet(name). This resource: demo://readme.

Point hopline at your own server with: hopline relay --port 8000 -- <command>
"""

_NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}

DEMO = Catalog().add(
    Tool(
        "echo",
        "Return the given text unchanged.",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        _echo,
        annotations={"readOnlyHint": True, "idempotentHint": True},
    ),
    Tool(
        "add",
        "Add two numbers; the sum also comes back as structuredContent.",
        {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
        _add,
        output_schema={"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]},
        annotations={"readOnlyHint": True, "idempotentHint": True},
    ),
    Tool(
        "countdown",
        "Count down `steps` times, `delay_ms` apart, reporting progress when the request has a progressToken.",
        {
            "type": "object",
            "properties": {
                "steps": {"type": "integer", "minimum": 1, "maximum": 100, "default": 3},
                "delay_ms": {"type": "integer", "minimum": 0, "maximum": 2000, "default": 50},
            },
        },
        _countdown,
    ),
    Tool(
        "whoami", "Report the protocol era, version and client identity this request arrived with.", _NO_ARGS, _whoami
    ),
    Resource("demo://readme", "readme", README, "text/markdown", "What this demo server is and how to leave it."),
    Prompt(
        "greet",
        "Ask the model to greet someone.",
        ({"name": "name", "description": "who to greet", "required": True},),
        lambda a: [{"role": "user", "content": {"type": "text", "text": f"Please greet {a['name']} warmly."}}],
    ),
)
