"""A ``user_oauth`` backend session for a caller who has not connected their account yet.

The gateway opens a backend session per (backend, principal) when the caller's session starts; without the
caller's upstream token that handshake cannot reach the backend. :func:`gated` then returns a
:class:`ConsentGate` instead of the backend's channel: it answers the handshake itself (``server/discover``
refused, ``initialize`` accepted with ``tools.listChanged``) and lists one tool, ``hopline_connect``, whose call fails
with the URL-elicitation-required error (-32042) carrying the caller's consent link, like every other request.
Once the caller has consented, the next request opens the real backend session (the handshake replayed with
hopline's own request id), answers ``hopline_connect`` with a short text (in every later state too), announces
``notifications/tools/list_changed`` and from then on forwards everything. Before each request it forwards, it
asks for the caller's credentials (a dict look-up while the token is valid): a token the backend refused and that
cannot be refreshed is answered with a fresh consent request (-32042), never a bare failure.

Holding the call until consent (URL-mode ``elicitation/create``, 2026-07-28 input-required) is not built:
the caller's client retries.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from hopline.binding import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE
from hopline.jsonrpc import HoplineError, Message
from hopline.layers.transport.channel import Channel, ChannelClosed

INIT_ID = "hopline-connect-initialize"
CONNECT_TOOL = "hopline_connect"  # answered here in every state (a backend tool of this name is shadowed)


async def gated(
    connect: Callable[[], Awaitable[Channel]], ready: Callable[[], Awaitable[None]], backend_id: str
) -> Channel:
    """A :class:`ConsentGate`: in front of the backend's channel if the caller's token is at hand (``ready()``
    returns), answering for it until they consent if ``ready()`` raised the consent error."""
    try:
        await ready()
    except HoplineError as exc:
        if exc.code != -32042:
            raise
        return ConsentGate(connect, ready, backend_id)
    gate = ConsentGate(connect, ready, backend_id)
    gate._attach(await connect())
    return gate


class ConsentGate:
    def __init__(
        self, connect: Callable[[], Awaitable[Channel]], ready: Callable[[], Awaitable[None]], backend_id: str
    ) -> None:
        self._connect, self._ready, self.backend_id = connect, ready, backend_id
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self._real: Channel | None = None
        self._init: dict[str, Any] | None = None
        self._closed = False
        self._lock = asyncio.Lock()
        self._pump: asyncio.Task | None = None

    def _attach(self, real: Channel) -> None:
        self._real = real
        self._pump = asyncio.ensure_future(self._pumping(real))

    async def _pumping(self, real: Channel) -> None:
        try:
            while True:
                self._queue.put_nowait(await real.receive())
        except ChannelClosed as exc:
            self._queue.put_nowait(Message({"jsonrpc": "2.0", "method": "$closed", "params": {"reason": exc.reason}}))

    async def send(self, message: Message) -> None:
        if self._closed:
            raise ChannelClosed("closed")
        if self._real is not None:
            if message.method == "tools/call" and message.params.get("name") == CONNECT_TOOL:
                await self._ready_or_answer(message)  # a retry reaching a session opened after the consent
                return
            if message.is_request() and message.method not in ("initialize", "ping", "server/discover"):
                try:  # the token may have been refused since, and not be refreshable: a fresh consent request
                    await self._ready()
                except HoplineError as exc:
                    if exc.code == -32042:
                        self._answer(message, error=exc.to_error_object())
                        return
            await self._real.send(message)
            return
        if not message.is_request():
            return  # notifications (initialized, cancelled) and answers have no one to reach yet
        method, params = message.method, message.params
        if method == "initialize":
            self._init = params
            version = params.get("protocolVersion")
            self._answer(message, result={
                "protocolVersion": version if version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": f"{self.backend_id} (not connected)", "version": "0"},
                "instructions": f"Call {CONNECT_TOOL} to connect your account at {self.backend_id}.",
            })  # fmt: skip
        elif method == "ping":
            self._answer(message, result={})
        elif method == "server/discover":
            self._answer(message, error={"code": -32601, "message": "Method not found"})
        elif method == "tools/list":
            self._answer(message, result={"tools": [self._tool()]})
        elif method in ("resources/list", "resources/templates/list", "prompts/list"):
            key = {"resources/list": "resources", "resources/templates/list": "resourceTemplates"}.get(method)
            self._answer(message, result={key or "prompts": []})
        else:
            await self._consent_or_switch(message)

    async def _consent_or_switch(self, message: Message) -> None:
        async with self._lock:
            if self._real is not None:  # switched while this one waited
                await self._real.send(message)
                return
            try:
                await self._ready()
            except HoplineError as exc:
                self._answer(message, error=exc.to_error_object())
                return
            real = await self._connect()
            if self._init is not None:
                await real.send(
                    Message({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize", "params": self._init})
                )
                while True:
                    answer = await real.receive()
                    if answer.id == INIT_ID and answer.is_response():
                        break
                if "result" not in answer.body:
                    await real.aclose()
                    self._answer(message, error={"code": -31001, "message": f"backend {self.backend_id} refused "
                                                 "the handshake after the account was connected"})  # fmt: skip
                    return
                await real.send(Message({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            self._attach(real)
        if message.method == "tools/call" and message.params.get("name") == CONNECT_TOOL:
            self._connected(message)
        else:
            await real.send(message)
        self._queue.put_nowait(Message({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))

    async def _ready_or_answer(self, message: Message) -> None:
        try:
            await self._ready()
        except HoplineError as exc:
            self._answer(message, error=exc.to_error_object())
            return
        self._connected(message)
        self._queue.put_nowait(Message({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))

    def _connected(self, message: Message) -> None:
        text = f"Your account at {self.backend_id} is connected: its tools are listed now."
        self._answer(message, result={"content": [{"type": "text", "text": text}]})

    def _tool(self) -> dict[str, Any]:
        return {
            "name": CONNECT_TOOL,
            "description": f"Connect your own account at {self.backend_id}: the call answers with a link to open "
            "(URL elicitation); once you have consented there, call it again and the backend's tools appear.",
            "inputSchema": {"type": "object", "properties": {}},
        }

    def _answer(self, request: Message, **outcome: Any) -> None:
        self._queue.put_nowait(Message({"jsonrpc": "2.0", "id": request.id, **outcome}))

    async def receive(self) -> Message:
        message = await self._queue.get()
        if message.method == "$closed":
            self._queue.put_nowait(message)  # every later receive too
            raise ChannelClosed(str(message.params.get("reason", "closed")))
        return message

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(Message({"jsonrpc": "2.0", "method": "$closed"}))
            if self._pump is not None:
                self._pump.cancel()
            if self._real is not None:
                await self._real.aclose()

    def is_closed(self) -> bool:
        return self._closed or (self._real is not None and self._real.is_closed())
