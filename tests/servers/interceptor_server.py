"""An SEP-2624 interceptor server on the official MCP SDK's low-level server (mcp 2.3.0), stdio.

Usage: ``python interceptor_server.py KIND [--log FILE] [--port P]`` where KIND picks what it
offers (with ``--port``: Streamable HTTP at ``http://127.0.0.1:P/mcp``, announced as
tests/servers/serving.py does; without: stdio):

- ``guard``: validator ``guard/dangerous-args`` (tools/call, request): an argument holding
  ``rm -rf`` or ``DROP TABLE`` is invalid with severity error; one holding ``sudo`` only
  warns. Mutator ``guard/tag`` (tools/call, request, priority 10): adds
  ``arguments.tagged = true`` when the tool is ``echo_args``.
- ``redact``: mutator ``pii/redact`` (tools/call, response): e-mail addresses and
  US SSNs in text content become ``[EMAIL]`` / ``[SSN]``.
- ``hang``: validator ``slow/hang`` (tools/call, request) that never answers.
- ``crash``: validator ``boom/crash`` (tools/call, request): the process exits mid-invoke.
- ``garbage``: validator ``junk/garbage`` (tools/call, request) whose answer is not a
  validation result.
- ``many``: 300 validators ``many/v000``…, each allowing everything.

``--log FILE`` appends one line per invocation (``name phase``) so a test can see
what was called.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import RequestParams

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")


class ListParams(RequestParams):
    event: str | None = None


class InvokeParams(RequestParams):
    name: str
    event: str
    phase: str
    payload: dict[str, Any]
    config: dict[str, Any] | None = None


def offered(kind: str) -> list[dict[str, Any]]:
    req = [{"events": ["tools/call"], "phase": "request"}]
    if kind == "guard":
        return [
            {"name": "guard/dangerous-args", "type": "validation", "hooks": req},
            {"name": "guard/tag", "type": "mutation", "hooks": req, "priorityHint": 10},
        ]
    if kind == "redact":
        return [{"name": "pii/redact", "type": "mutation", "hooks": [{"events": ["tools/call"], "phase": "response"}]}]
    if kind == "many":
        return [{"name": f"many/v{i:03d}", "type": "validation", "hooks": req} for i in range(300)]
    return [
        {
            "name": {"hang": "slow/hang", "crash": "boom/crash", "garbage": "junk/garbage"}[kind],
            "type": "validation",
            "hooks": req,
        }
    ]


def strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def scrub(value: Any) -> Any:
    if isinstance(value, str):
        return SSN.sub("[SSN]", EMAIL.sub("[EMAIL]", value))
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("guard", "redact", "hang", "crash", "garbage", "many"))
    parser.add_argument("--log")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    catalogue = offered(args.kind)
    names = {d["name"]: d for d in catalogue}
    server: Server[Any] = Server("interceptor-" + args.kind, version="1.0.0")

    async def list_interceptors(ctx: Any, params: ListParams) -> dict[str, Any]:
        found = catalogue
        if params.event:
            found = [d for d in catalogue if any(params.event in h["events"] for h in d["hooks"])]
        return {"interceptors": found}

    async def invoke(ctx: Any, params: InvokeParams) -> dict[str, Any]:
        if params.name not in names:
            raise MCPError(code=-32602, message=f"unknown interceptor {params.name!r}")
        if args.log:
            with open(args.log, "a") as f:
                f.write(f"{params.name} {params.phase}\n")
        d = names[params.name]
        base = {"interceptor": params.name, "type": d["type"], "phase": params.phase}
        if params.name == "slow/hang":
            await asyncio.Event().wait()
        if params.name == "boom/crash":
            os._exit(3)
        if params.name == "junk/garbage":
            return {"interceptor": params.name, "verdict": "probably fine", "valid": "maybe"}
        if params.name == "guard/dangerous-args":
            found = list(strings(params.payload.get("arguments")))
            for s in found:
                if "rm -rf" in s or "DROP TABLE" in s:
                    message = {"message": "dangerous argument: destructive command", "severity": "error"}
                    return {**base, "valid": False, "severity": "error", "messages": [message]}
            if any("sudo" in s for s in found):
                message = {"message": "argument mentions sudo", "severity": "warn"}
                return {**base, "valid": True, "severity": "warn", "messages": [message]}
            return {**base, "valid": True}
        if params.name == "guard/tag":
            if params.payload.get("name") != "echo_args":
                return {**base, "modified": False, "payload": params.payload}
            arguments = {**(params.payload.get("arguments") or {}), "tagged": True}
            return {**base, "modified": True, "payload": {**params.payload, "arguments": arguments}}
        if params.name == "pii/redact":
            new = scrub(params.payload)
            return {**base, "modified": new != params.payload, "payload": new}
        return {**base, "valid": True}

    server.add_request_handler("interceptors/list", ListParams, list_interceptors)
    server.add_request_handler("interceptor/invoke", InvokeParams, invoke)

    if args.port is not None:
        import serving

        sock = serving.bind(args.port)
        port = serving.port_of(sock)
        app = server.streamable_http_app()
        serving.serve(app, sock, f"interceptor-{args.kind}: http://127.0.0.1:{port}/mcp")
        return

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    sys.exit(main())
