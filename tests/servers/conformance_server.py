"""The conformance backend: an official-SDK (mcp 2.3.0) server with the fixtures the MCP conformance
suite's server scenarios call by name, for tests/interop/test_conformance.py.

Usage::

    python conformance_server.py --port P

Streamable HTTP at ``http://127.0.0.1:P/mcp``, both eras (the SDK routes on
``MCP-Protocol-Version``): the handshake era with SSE, an event store (resumable streams) and a
100 ms retry hint; 2026-07-28 stateless, with MRTR (``InputRequiredResult``) and signed
``requestState``.

What the suite looks for, by scenario:

- ``tools-call-*``: ``test_simple_text``, ``test_image_content``, ``test_audio_content``,
  ``test_embedded_resource``, ``test_multiple_content_types``, ``test_tool_with_logging``,
  ``test_tool_with_progress``, ``test_error_handling``, ``test_sampling``, ``test_elicitation``,
  ``test_elicitation_sep1034_defaults``, ``test_elicitation_sep1330_enums``, ``test_reconnection``;
- ``input-required-result-*`` (SEP-2322): ``test_input_required_result_*`` and the prompt
  ``test_input_required_result_prompt``; ``test_missing_capability`` (-32021 with
  ``data.requiredCapabilities``);
- ``http-custom-header-server-validation`` (SEP-2243): ``test_x_mcp_header``, whose ``region``
  argument is mirrored into ``Mcp-Param-Region``;
- ``json-schema-2020-12``: ``json_schema_2020_12_tool`` with a 2020-12 input schema;
- ``server-stateless``: ``test_trigger_tool_change`` / ``test_trigger_prompt_change``,
  ``test_streaming_elicitation`` (asks inside its result, never by a request of its own) and
  ``test_logging_tool`` (logs; the SDK sends it at 2026-07-28 only if ``_meta`` asked for a level);
- ``tasks-*`` (SEP-2663): ``greet``, ``slow_compute``, ``confirm_delete``, ``failing_job``, all sync:
  the SDK has no tasks runtime, so ``slow_compute`` takes the immediate-result path the extension
  allows for ``seconds: 0`` and refuses (isError) any wait, and ``confirm_delete`` asks
  with an ``InputRequiredResult``. The checks that need a task still fail, but quickly and the same
  on every path;
- ``http-header-validation``: header values reach the SDK without their surrounding whitespace. RFC 9110
  §5.5 excludes it from a field value and the suite requires a server to accept it
  (``sep-2243-server-accepts-whitespace-header-value``); the SDK 2.3.0 compares the raw value, so
  :func:`trim_ows` does what an HTTP parser should before it;
- resources ``test://static-text``, ``test://static-binary``, ``test://template/{id}/data``,
  ``test://watched-resource``; prompts ``test_simple_prompt``, ``test_prompt_with_arguments``,
  ``test_prompt_with_embedded_resource``, ``test_prompt_with_image``; completion (empty);
  ``logging/setLevel``, ``resources/subscribe`` / ``unsubscribe``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import warnings
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    CallToolResult,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    JSONRPCMessage,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

warnings.simplefilter("ignore", MCPDeprecationWarning)  # the handshake-era helpers (ctx.info, create_message)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


class Events(EventStore):
    """Every event in memory, so a client that reconnects with Last-Event-ID gets the rest of its stream."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        self.events.append((stream_id, len(self.events) + 1, message))
        return str(len(self.events))

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        if not last_event_id.isdigit() or not 0 < int(last_event_id) <= len(self.events):
            return None
        stream = self.events[int(last_event_id) - 1][0]
        for stream_id, number, message in self.events[int(last_event_id) :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, str(number)))
        return stream


mcp = MCPServer(
    name="hopline-conformance-backend",
    version="1.0.0",
    request_state_security=RequestStateSecurity(keys=[b"hopline conformance backend: a test key of 32+ bytes"]),
)


# -- tools/call content (tools-call-*) -----------------------------------------------------------
@mcp.tool()
def test_simple_text() -> str:
    """Simple text content."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> list[ImageContent]:
    """Image content."""
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@mcp.tool()
def test_audio_content() -> list[AudioContent]:
    """Audio content."""
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


def _embedded(uri: str, mime: str, text: str) -> EmbeddedResource:
    return EmbeddedResource(type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text))


@mcp.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """An embedded resource."""
    return [_embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]


@mcp.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Text, image and resource content together."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        _embedded("test://mixed-content-resource", "application/json", '{"test": "data", "value": 123}'),
    ]


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Three log messages while it runs."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(text)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Progress 0, 50, 100 of 100; answers with the progress token."""
    for step in (0, 50, 100):
        await ctx.report_progress(progress=step, total=100, message=f"Completed step {step} of 100")
        await asyncio.sleep(0.05)
    meta = ctx.request_context.meta if ctx.request_context else None
    return str(meta.get("progress_token") if meta else 0)


@mcp.tool()
def test_error_handling() -> str:
    """Always fails (isError)."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """A sampling/createMessage request to the client, on the call's own stream (handshake era)."""
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    return f"LLM response: {result.content.text if result.content.type == 'text' else 'No response'}"


class _Answer(BaseModel):
    response: str = Field(description="User's response")


class _Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active", description="User status", json_schema_extra={"enum": ["active", "inactive", "pending"]}
    )
    verified: bool = Field(default=True, description="Verification status")


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


class _Enums(BaseModel):
    untitledSingle: str = Field(
        description="Simple enum without titles", json_schema_extra={"enum": ["active", "inactive", "pending"]}
    )
    titledSingle: str = Field(
        description="Enum with titled options (oneOf)",
        json_schema_extra={
            "oneOf": _titled(("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High Priority"))
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select without titles",
        json_schema_extra={"items": {"type": "string", "enum": ["read", "write", "execute"]}},
    )
    titledMulti: list[str] = Field(
        description="Multi-select with titled options",
        json_schema_extra={
            "items": {"anyOf": _titled(("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation"))}
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    )


async def _elicit(ctx: Context, message: str, schema: type[BaseModel], label: str) -> str:
    result = await ctx.elicit(message=message, schema=schema)
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"{label}: action={result.action}, content={content}"


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """An elicitation/create request to the client."""
    return await _elicit(ctx, message, _Answer, "User response")


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicitation with a default for every primitive type (SEP-1034)."""
    return await _elicit(ctx, "Please provide user information", _Defaults, "Elicitation result")


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicitation with every enum schema form (SEP-1330)."""
    return await _elicit(ctx, "Please select values using different enum schema types", _Enums, "Elicitation completed")


@mcp.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE stream mid-call; the client resumes it (SEP-1699)."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@mcp.tool()
def test_x_mcp_header(
    region: Annotated[
        str, Field(description="Mirrored into Mcp-Param-Region", json_schema_extra={"x-mcp-header": "Region"})
    ] = "<none>",
) -> str:
    """An argument mirrored into an Mcp-Param-* header (SEP-2243)."""
    return f"region={region}"


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """-32021 with data.requiredCapabilities when the client did not declare sampling."""
    caps = ctx.session.client_capabilities
    if caps is None or caps.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool requires the client 'sampling' capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "Client declared sampling capability; proceeding."


SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@mcp.tool(name="json_schema_2020_12_tool")
def json_schema_2020_12_tool() -> str:
    """Its input schema uses the JSON Schema 2020-12 keywords."""
    return "json_schema_2020_12_tool"


mcp._tool_manager._tools["json_schema_2020_12_tool"].parameters = SCHEMA_2020_12  # no public override in 2.3.0


def _dynamic() -> str:
    """Added and removed by the trigger tools."""
    return "dynamic"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Changes the tool list and says so on subscriptions/listen (SEP-2575)."""
    mcp.add_tool(_dynamic, name="test_dynamic_tool")
    mcp.remove_tool("test_dynamic_tool")
    await ctx.notify_tools_changed()
    return "tool list changed"


@mcp.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Changes the prompt list and says so on subscriptions/listen (SEP-2575)."""
    mcp.add_prompt(Prompt.from_function(_dynamic, name="test_dynamic_prompt", description="dynamic"))
    mcp.remove_prompt("test_dynamic_prompt")
    await ctx.notify_prompts_changed()
    return "prompt list changed"


# -- MRTR: InputRequiredResult (input-required-result-*, SEP-2322) -------------------------------
def _ask(message: str, field: str = "name") -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _confirm() -> ElicitRequest:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    return ElicitRequest(params=ElicitRequestFormParams(message="Please confirm", requested_schema=schema))


def _sample(text: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def _field(answer: Any, name: str, default: Any = None) -> Any:
    return answer.content.get(name, default) if isinstance(answer, ElicitResult) and answer.content else default


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """One elicitation through InputRequiredResult."""
    if ctx.input_responses and "user_name" in ctx.input_responses:
        return f"Hello, {_field(ctx.input_responses['user_name'], 'name', 'stranger')}!"
    return InputRequiredResult(input_requests={"user_name": _ask("What is your name?")})


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """One sampling request through InputRequiredResult."""
    if ctx.input_responses and "capital_question" in ctx.input_responses:
        answer = ctx.input_responses["capital_question"]
        text = answer.content.text if isinstance(answer, CreateMessageResult) and answer.content.type == "text" else "?"
        return f"Model said: {text}"
    return InputRequiredResult(input_requests={"capital_question": _sample("What is the capital of France?", 100)})


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """One roots/list request through InputRequiredResult."""
    if ctx.input_responses and "client_roots" in ctx.input_responses:
        answer = ctx.input_responses["client_roots"]
        return f"Client exposed {len(answer.roots) if isinstance(answer, ListRootsResult) else 0} root(s)."
    return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """requestState comes back with the answer."""
    if ctx.input_responses and "confirm" in ctx.input_responses and ctx.request_state == "request-state-nonce":
        return "state-ok: confirmation received"
    return InputRequiredResult(input_requests={"confirm": _confirm()}, request_state="request-state-nonce")


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Elicitation, sampling and roots in one InputRequiredResult."""
    if ctx.input_responses and {"user_name", "greeting", "client_roots"} <= ctx.input_responses.keys():
        return "All inputs received."
    requests: dict[str, InputRequest] = {
        "user_name": _ask("What is your name?"),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": ListRootsRequest(),
    }
    return InputRequiredResult(input_requests=requests, request_state="multiple-inputs")


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Three rounds, requestState carrying what the earlier ones said."""
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    responses = ctx.input_responses or {}
    if state["round"] == 1 and "step1" in responses:
        name = _field(responses["step1"], "name")
        request = _ask("Step 2: What is your favorite color?", "color")
        return InputRequiredResult(
            input_requests={"step2": request}, request_state=json.dumps({"round": 2, "name": name})
        )
    if state["round"] == 2 and "step2" in responses:
        return f"{state.get('name')} likes {_field(responses['step2'], 'color')}."
    return InputRequiredResult(
        input_requests={"step1": _ask("Step 1: What is your name?")}, request_state=json.dumps({"round": 1})
    )


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """The SDK refuses a requestState that does not verify (signed with the server's key)."""
    if ctx.request_state is None:
        return InputRequiredResult(input_requests={"confirm": _confirm()}, request_state="round-1")
    return f"state-ok: {ctx.request_state}"


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
    """Asks only for what the client declared."""
    caps = ctx.client_capabilities
    requests: dict[str, InputRequest] = {}
    if caps is None or caps.sampling is not None:
        requests["sample"] = _sample("Say hello", 50)
    if caps is None or caps.elicitation is not None:
        requests["ask"] = _ask("What is your name?")
    return InputRequiredResult(input_requests=requests, request_state="capability-gated")


# -- server-stateless (SEP-2575): the response stream and logging ------------------------------
@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs once; at 2026-07-28 the SDK sends it only if the request's _meta asked for a log level."""
    await ctx.info("test_logging_tool ran")
    return "Logging tool completed"


@mcp.tool()
async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks for a confirmation inside its result (InputRequiredResult), never as a request of its own."""
    if ctx.input_responses and "confirm" in ctx.input_responses:
        return f"Confirmed: {_field(ctx.input_responses['confirm'], 'ok', False)}"
    return InputRequiredResult(input_requests={"confirm": _confirm()})


# -- tasks-* (SEP-2663): the fixtures a sync backend can have ------------------------------------
@mcp.tool()
def greet(name: str) -> str:
    """Sync only."""
    return f"Hello, {name}!"


@mcp.tool()
def slow_compute(seconds: float, label: str = "") -> CallToolResult:
    """Answers at once when ``seconds`` is 0 (the immediate-result path SEP-2663 allows a task-supporting
    tool). Any wait would need a task, and this backend runs none: the SDK has no tasks runtime, and a
    sync wait only slows every check that needs a task before it fails anyway; so it is an isError result."""
    if seconds != 0:
        text = f"slow_compute: {seconds:g} s needs a task, and this backend runs no tasks"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    return CallToolResult(content=[TextContent(type="text", text=f"slow_compute{f' {label}' if label else ''}: done")])


@mcp.tool()
async def confirm_delete(filename: str, ctx: Context) -> str | InputRequiredResult:
    """Asks before it "deletes" (nothing is deleted); sync, so the question comes in an InputRequiredResult."""
    if ctx.input_responses and "confirm" in ctx.input_responses:
        return f"Deleted {filename}" if _field(ctx.input_responses["confirm"], "ok", False) else f"Kept {filename}"
    return InputRequiredResult(input_requests={"confirm": _confirm()})


@mcp.tool()
def failing_job() -> str:
    """Always a tool execution error (isError), sync."""
    raise RuntimeError("failing_job always fails")


# -- resources, prompts, completion ------------------------------------------------------------
@mcp.resource("test://static-text")
def static_text() -> str:
    """Static text."""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary")
def static_binary() -> bytes:
    """A PNG."""
    return base64.b64decode(PNG)


@mcp.resource("test://template/{id}/data")
def template_data(id: str) -> str:
    """A template with one parameter."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.resource("test://watched-resource")
def watched() -> str:
    """A resource to subscribe to."""
    return "Watched resource content"


def _user(content: Any) -> UserMessage:
    return UserMessage(role="user", content=content)


@mcp.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """No arguments."""
    return [_user(TextContent(type="text", text="This is a simple prompt for testing."))]


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """Two required arguments."""
    return [_user(TextContent(type="text", text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """An embedded resource."""
    return [
        _user(_embedded(resourceUri, "text/plain", "Embedded resource content for testing.")),
        _user(TextContent(type="text", text="Please process the embedded resource above.")),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """An image."""
    return [
        _user(ImageContent(type="image", data=PNG, mime_type="image/png")),
        _user(TextContent(type="text", text="Please analyze the image above.")),
    ]


@mcp.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """prompts/get answered with InputRequiredResult first (SEP-2322, not a tool)."""
    if ctx.input_responses and "user_context" in ctx.input_responses:
        text = _field(ctx.input_responses["user_context"], "context", "?")
        return [_user(TextContent(type="text", text=f"Use the following context: {text}"))]
    return InputRequiredResult(input_requests={"user_context": _ask("What context should the prompt use?", "context")})


@mcp.completion()
async def _complete(ref: Any, argument: Any, context: Any) -> Completion:
    return Completion(values=[], total=0, has_more=False)


async def _empty(ctx: Any, params: Any) -> EmptyResult:
    return EmptyResult()


for _method, _params in (
    ("logging/setLevel", SetLevelRequestParams),
    ("resources/subscribe", SubscribeRequestParams),
    ("resources/unsubscribe", UnsubscribeRequestParams),
):
    mcp._lowlevel_server.add_request_handler(_method, _params, _empty)  # no public API in 2.3.0


def trim_ows(app: Any) -> Any:
    """ASGI middleware: each request header value without leading or trailing spaces and tabs (OWS)."""

    async def trimmed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope = {**scope, "headers": [(k, v.strip(b" \t")) for k, v in scope["headers"]]}
        await app(scope, receive, send)

    return trimmed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the conformance suite's fixtures on the official SDK")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    from serving import bind, port_of, serve

    app = trim_ows(mcp.streamable_http_app(event_store=Events(), retry_interval=100))
    sock = bind(args.port)
    serve(app, sock, f"conformance_server: http://127.0.0.1:{port_of(sock)}/mcp")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
