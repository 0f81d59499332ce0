"""The client under test for the conformance suite's client scenarios: hopline's upstream side.

The suite runs ``python scripts/conformance_client.py URL`` once per client scenario, with
``MCP_CONFORMANCE_SCENARIO``, ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (the wire the scenario runs
at) and, for some scenarios, ``MCP_CONFORMANCE_CONTEXT`` in the environment. ``URL`` is the
suite's mock server. This script:

1. starts ``python -m hopline serve`` (Reverse mode) with ``URL`` as its one backend, so the
   suite's server sees only what hopline's gateway sends upstream (its handshake or
   ``server/discover``, its request ids, ``_meta``, ``MCP-Protocol-Version``, ``Mcp-Method``,
   ``Mcp-Name`` and ``Mcp-Param-*`` headers, its SSE resumption, its MRTR retries);
2. drives that gateway from the front with what the scenario asks of a client (list, call,
   read, get), in the scenario's era:

   - handshake era (2025-11-25): the official Python SDK client (``mode="legacy"``);
   - 2026-07-28: a plain JSON-RPC-over-HTTP requester (below) that calls every tool the
     gateway lists, so no client-side filtering (the SDK drops tools whose ``x-mcp-header``
     is invalid) stands between the suite and hopline; its own ``Mcp-Param-*`` headers come
     from the SDK's codec, an implementation independent of hopline's;
   - ``sep-2322-client-request-state`` (MRTR, 2026-07-28 upstream): the handshake-era SDK
     client in front, so that hopline itself is the MRTR client of the suite's server (it
     asks the front client through ``elicitation/create`` and retries with
     ``inputResponses`` and the ``requestState`` echoed, scripts nothing about it).

Exit status: 0 when the scenario's conversation completed, 1 otherwise (one line on stderr).
hopline's own log goes to stderr, which the suite keeps as ``stderr.txt`` beside checks.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx

ROOT = Path(__file__).resolve().parents[1]
MODERN = "2026-07-28"
START_TIMEOUT = 30.0
CALL_TIMEOUT = 20.0
CLIENT_INFO = {"name": "hopline-conformance-front", "version": "1.0.0"}
CLIENT_CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {}}
# Scenarios whose upstream era is 2026-07-28 but that are driven by a handshake-era client in front.
HANDSHAKE_FRONT = {"sep-2322-client-request-state"}
FRONT_KEY = "conformance-front-key"  # x-api-key of the front client when the gateway has an auth section


class Failed(Exception):
    """The conversation could not be completed (the message is the one line printed)."""


# -- hopline serve -------------------------------------------------------------------------------
@contextmanager
def gateway(backend: str, auth: dict[str, Any] | None = None) -> Iterator[str]:
    """``hopline serve`` (Reverse mode) in front of ``backend``: yields its /mcp URL.
    ``auth``: how hopline authenticates to the backend (``auth.backends.suite``)."""
    with tempfile.TemporaryDirectory(prefix="hopline-conformance-client-") as tmp:
        config = Path(tmp) / "reverse.json"
        settings: dict[str, Any] = {"mode": "reverse", "backends": {"suite": {"url": backend}}}
        if auth is not None:  # an auth section also authenticates the front: an API key
            settings["auth"] = {
                "resource": "http://127.0.0.1/mcp",
                "api_keys": [{"name": "front", "key": FRONT_KEY}],
                "backends": {"suite": auth},
            }
        config.write_text(json.dumps(settings))
        path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        proc = subprocess.Popen(
            [sys.executable, "-m", "hopline", "serve", "--port", "0", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        found: list[str] = []
        seen = threading.Event()

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                sys.stderr.write("hopline: " + line)
                if not found and (m := re.search(r"at (http://\S+) \(Streamable HTTP\)", line)):
                    found.append(m.group(1))
                    seen.set()
            seen.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            _warm()  # while hopline starts
            if not seen.wait(START_TIMEOUT) or not found:
                raise Failed("hopline serve did not start")
            yield found[0]
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            reader.join(5)


def _warm() -> None:
    """Import the front clients' modules (about a second: the SDK)."""
    import httpx2  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401
    import mcp.shared.inbound  # noqa: F401


# -- the front clients ---------------------------------------------------------------------------
class ModernFront:
    """A 2026-07-28 client of the gateway: one POST per request, ``_meta`` and the SEP-2243 headers."""

    def __init__(self, url: str, http: httpx.AsyncClient) -> None:
        self.url = url
        self.http = http
        self.ids = iter(range(1, 1_000_000))
        self.schemas: dict[str, Any] = {}  # tool name → inputSchema, as the gateway listed it

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        from mcp.shared import inbound

        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": CLIENT_CAPABILITIES,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        }
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        name = params.get("uri") if method == "resources/read" else params.get("name")
        if method in ("tools/call", "prompts/get", "resources/read") and isinstance(name, str):
            headers["Mcp-Name"] = inbound.encode_header_value(name)
        schema = self.schemas.get(name) if method == "tools/call" else None
        if schema is not None and inbound.find_invalid_x_mcp_header(schema) is None:
            headers.update(inbound.mcp_param_headers(inbound.x_mcp_header_map(schema), params.get("arguments") or {}))
        rid = next(self.ids)
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        async with self.http.stream("POST", self.url, json=body, headers=headers) as resp:
            kind = resp.headers.get("content-type", "")
            if kind.startswith("text/event-stream"):
                async for data in _sse_data(resp):
                    message = json.loads(data)
                    if message.get("id") == rid and "method" not in message:
                        return _outcome(method, message)
                raise Failed(f"{method}: the gateway's stream ended without an answer")
            raw = await resp.aread()
        try:
            return _outcome(method, json.loads(raw))
        except ValueError:
            raise Failed(f"{method}: HTTP {resp.status_code} {raw[:200]!r}") from None

    async def list_tools(self) -> list[dict[str, Any]]:
        tools = await self._list("tools/list", "tools")
        self.schemas = {t["name"]: t.get("inputSchema") for t in tools}
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._list("resources/list", "resources")

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._list("prompts/list", "prompts")

    async def get_prompt(self, name: str) -> dict[str, Any]:
        return await self.request("prompts/get", {"name": name})

    async def _list(self, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        for _ in range(50):
            result = await self.request(method, {"cursor": cursor} if cursor else {})
            items += result.get(key) or []
            if not (cursor := result.get("nextCursor")):
                break
        return items


async def _sse_data(resp: httpx.Response):
    data: list[str] = []
    async for line in resp.aiter_lines():
        if line == "":
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])


def _outcome(method: str, message: dict[str, Any]) -> dict[str, Any]:
    if isinstance(message.get("result"), dict):
        return message["result"]
    error = message.get("error") or {}
    raise Failed(f"{method}: error {error.get('code')} {error.get('message')}")


class HandshakeFront:
    """The official Python SDK client in the handshake era, with plain dicts out."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def list_tools(self) -> list[dict[str, Any]]:
        return [t.model_dump(by_alias=True, exclude_none=True) for t in (await self.client.list_tools()).tools]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(name, arguments)
        return result.model_dump(by_alias=True, exclude_none=True)

    async def list_resources(self) -> list[dict[str, Any]]:
        return [r.model_dump(by_alias=True, exclude_none=True) for r in (await self.client.list_resources()).resources]

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return (await self.client.read_resource(uri)).model_dump(by_alias=True, exclude_none=True)

    async def list_prompts(self) -> list[dict[str, Any]]:
        return [p.model_dump(by_alias=True, exclude_none=True) for p in (await self.client.list_prompts()).prompts]

    async def get_prompt(self, name: str) -> dict[str, Any]:
        return (await self.client.get_prompt(name)).model_dump(by_alias=True, exclude_none=True)


async def _confirm(context: Any, params: Any) -> Any:
    """Elicitation answered the way the MRTR scenario's form asks (``confirmed: true``)."""
    from mcp import types

    return types.ElicitResult(action="accept", content={"confirmed": True})


# -- what each scenario asks of a client ---------------------------------------------------------------
def _placeholder(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return {"string": "x", "integer": 1, "number": 1, "boolean": True, "object": {}, "array": [], "null": None}.get(
        kind if isinstance(kind, str) else "string", "x"
    )


def _arguments_for(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    return {name: _placeholder(props.get(name)) for name in schema.get("required") or []}


async def drive(scenario: str, front: Any, context: dict[str, Any]) -> None:
    tools = await front.list_tools()
    names = [t["name"] for t in tools]
    if scenario in ("initialize", "json-schema-ref-no-deref", "request-metadata", "auth/client-credentials-basic"):
        return
    if scenario == "tools_call":
        await front.call_tool(names[0], {"a": 2, "b": 3})
    elif scenario == "sse-retry":
        await front.call_tool("test_reconnection", {})
    elif scenario == "json-schema-2020-12-preservation":
        focal = next(t for t in tools if t["name"] == "json_schema_2020_12_tool")
        await front.call_tool("json_schema_echo", {"schema": focal["inputSchema"]})
    elif scenario == "http-standard-headers":
        for tool in tools:
            await front.call_tool(tool["name"], _arguments_for(tool))
        for resource in await front.list_resources():
            await front.read_resource(resource["uri"])
        for prompt in await front.list_prompts():
            await front.get_prompt(prompt["name"])
    elif scenario == "http-custom-headers":
        for call in context["toolCalls"]:
            await front.call_tool(call["name"], call["arguments"])
    elif scenario == "http-invalid-tool-headers":
        # A client calls what it was given: every tool the gateway lists (an error is fine).
        for tool in tools:
            try:
                await front.call_tool(tool["name"], _arguments_for(tool))
            except Failed as e:
                print(f"conformance_client: {e}", file=sys.stderr)
    elif scenario == "sep-2322-client-request-state":
        # hopline answers each input_required round itself (asking this client), then retries.
        for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
            await front.call_tool(name, {})
    else:
        raise Failed(f"no conversation for scenario {scenario!r}")


async def client_credentials(backend: str, context: dict[str, Any]) -> dict[str, Any]:
    """hopline's ``client_credentials`` backend auth with the scenario's client id and secret.

    hopline takes the token endpoint from its configuration (it does no RFC 9728 / RFC 8414
    discovery); this reads it from the scenario's protected-resource and authorization-server
    metadata, the way an operator finds it to write the configuration. What the suite judges
    of hopline: the token request (grant, client_secret_basic) and the bearer token it sends."""
    parts = httpx.URL(backend)
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http:
        prm = (await http.get(str(parts.copy_with(path="/.well-known/oauth-protected-resource" + parts.path)))).json()
        issuer = httpx.URL(prm["authorization_servers"][0])
        meta_url = issuer.copy_with(path="/.well-known/oauth-authorization-server" + issuer.path.rstrip("/"))
        metadata = (await http.get(str(meta_url))).json()
    return {
        "mode": "client_credentials",
        "token_endpoint": metadata["token_endpoint"],
        "client_id": context["client_id"],
        "client_secret": context["client_secret"],
        "client_auth": "basic",
    }


async def run(scenario: str, version: str, backend: str, context: dict[str, Any]) -> None:
    auth = await client_credentials(backend, context) if scenario == "auth/client-credentials-basic" else None
    headers = {"x-api-key": FRONT_KEY} if auth is not None else {}
    with gateway(backend, auth) as url:
        if version == MODERN and scenario not in HANDSHAKE_FRONT:
            async with httpx.AsyncClient(timeout=CALL_TIMEOUT, headers=headers) as http:
                await asyncio.wait_for(drive(scenario, ModernFront(url, http), context), 60)
            return
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT) as http,
            Client(
                streamable_http_client(url, http_client=http),
                mode="legacy",
                elicitation_callback=_confirm,
                read_timeout_seconds=CALL_TIMEOUT,
            ) as c,
        ):
            await asyncio.wait_for(drive(scenario, HandshakeFront(c), context), 60)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if not args or not scenario:
        print("usage: MCP_CONFORMANCE_SCENARIO=NAME conformance_client.py SERVER_URL", file=sys.stderr)
        return 1
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        asyncio.run(run(scenario, version, args[-1], context))
    except Exception as e:  # noqa: BLE001 - one line, the suite records it
        print(f"conformance_client: {scenario}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
