"""ACP over the network: the WebSocket profile of ACP's "Streamable HTTP & WebSocket transport" RFD.

Both ends are a :class:`~hopline.layers.transport.channel.Channel`, so the router,
the dialects and session correlation see a remote peer exactly as a stdio one:

- :func:`connect` reaches a remote agent or proxy (a chain component given as a
  ``ws://`` / ``wss://`` URL): one WebSocket per start of the component, each
  JSON-RPC message one text frame. A restart (``--on-crash restart``) connects again.
- :class:`Listener` accepts editors on ``/acp`` (``hopline acp --listen``); every
  connection gets its own conductor (its own chain of components), as if the
  editor had started ``hopline acp`` itself. Front door: a loopback bind unless a
  bearer token is required, browsers refused unless their Origin is allowed, a
  connection cap (503 above it), a message-size bound (close 1009 above it) and,
  optionally, ``Authorization: Bearer`` checked in constant time (401 without it).
  The upgrade answer carries ``Acp-Connection-Id`` as the RFD says.

Text frames carry JSON-RPC; binary frames are ignored (the RFD). A text frame that
is not JSON-RPC is dropped and counted (``garbage_frames``, as stdio lines are); an
editor is told so with a JSON-RPC parse error. Uses the ``websockets`` library
(``pip install 'hopline[acp]'``), imported only when a remote transport is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import uuid
from typing import Any, Awaitable, Callable

from hopline.jsonrpc import HoplineError, Message, parse
from hopline.layers.transport.channel import ChannelClosed

log = logging.getLogger("hopline.acp")

PATH = "/acp"
SCHEMES = ("ws://", "wss://")
MAX_MESSAGE = 4 * 1024 * 1024  # bytes in one frame, either way (as hopline's HTTP listeners' max_body)
MAX_CONNECTIONS = 16
CONNECT_TIMEOUT = 10.0


def is_remote(target: str) -> bool:
    return target.lower().startswith(SCHEMES)


def _imports():
    try:
        import websockets  # noqa: F401
    except ImportError:
        raise ChannelClosed("ACP over WebSocket needs the websockets library: pip install 'hopline[acp]'") from None


class WebSocketChannel:
    """One WebSocket connection as a channel of whole JSON-RPC messages."""

    def __init__(self, ws: Any, name: str, *, answer_garbage: bool = False) -> None:
        self._ws = ws
        self.name = name
        self.garbage_frames = 0
        self._answer_garbage = answer_garbage  # the editor side: say what was wrong with its frame
        self._closed = False

    async def send(self, message: Message) -> None:
        from websockets.exceptions import ConnectionClosed

        if self._closed:
            raise ChannelClosed(f"{self.name}: closed")
        try:
            await self._ws.send(message.encode().decode())
        except ConnectionClosed as exc:
            raise ChannelClosed(f"{self.name}: {_why(exc)}") from None

    async def receive(self) -> Message:
        from websockets.exceptions import ConnectionClosed

        while True:
            try:
                frame = await self._ws.recv()
            except ConnectionClosed as exc:
                raise ChannelClosed(f"{self.name}: {_why(exc)}") from None
            if not isinstance(frame, str):
                continue  # binary frames are ignored (the RFD)
            try:
                return parse(frame)
            except HoplineError as exc:
                self.garbage_frames += 1
                if self._answer_garbage:
                    with contextlib.suppress(ConnectionClosed):
                        await self._ws.send(exc.to_response(None).encode().decode())

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws.close(), 5)

    def is_closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<WebSocketChannel {self.name} closed={self._closed}>"


def _why(exc: Exception) -> str:
    rcvd = getattr(exc, "rcvd", None) or getattr(exc, "sent", None)
    if rcvd is None:
        return "connection lost"
    return f"connection closed ({rcvd.code}{': ' + rcvd.reason if rcvd.reason else ''})"


async def connect(url: str, name: str, *, max_size: int = MAX_MESSAGE, token: str | None = None) -> WebSocketChannel:
    """Open a WebSocket to a remote ACP component; :class:`ChannelClosed` with the reason if it cannot."""
    _imports()
    from websockets.asyncio.client import connect as ws_connect
    from websockets.exceptions import InvalidStatus, WebSocketException

    headers = {"Authorization": f"Bearer {token}"} if token else None
    shown = shown_url(url)
    try:
        ws = await asyncio.wait_for(
            ws_connect(url, max_size=max_size, additional_headers=headers, open_timeout=None, ping_interval=20),
            CONNECT_TIMEOUT,
        )
    except InvalidStatus as exc:
        raise ChannelClosed(f"{name}: {shown} refused the WebSocket (HTTP {exc.response.status_code})") from None
    except (OSError, asyncio.TimeoutError, WebSocketException) as exc:
        detail = str(exc).replace(url, shown)
        raise ChannelClosed(f"{name}: cannot reach {shown}: {type(exc).__name__}: {detail}") from None
    return WebSocketChannel(ws, name)


def shown_url(url: str) -> str:
    """The URL without its user information (``user:password@``), for logs and errors."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    return f"{scheme}{sep}{authority.rpartition('@')[2]}{slash}{path}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


Handler = Callable[[WebSocketChannel], Awaitable[None]]


class Listener:
    """The editor-facing WebSocket endpoint: front-door checks, then one ``handler`` per connection."""

    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        origins: tuple[str, ...] = (),
        max_connections: int = MAX_CONNECTIONS,
        max_size: int = MAX_MESSAGE,
        token: str | None = None,
    ) -> None:
        if not is_loopback(host) and not token:
            raise ValueError(
                f"--listen {host}: a non-loopback address needs a bearer token (--token-env NAME); "
                "without one, bind 127.0.0.1"
            )
        self.handler = handler
        self.host, self.port = host, port
        self.origins = frozenset(o.rstrip("/") for o in origins)
        self.max_connections = max_connections
        self.max_size = max_size
        self._token = token.encode() if token else None
        self._active = 0
        self._server: Any = None

    async def start(self) -> int:
        """Bind; the bound port (``port`` 0 picks one)."""
        _imports()
        from websockets.asyncio.server import serve

        self._server = await serve(
            self._serve,
            self.host,
            self.port,
            max_size=self.max_size,
            process_request=self._admit,
            process_response=self._tag,
            server_header=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def serve_forever(self) -> None:
        await self._server.serve_forever()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 20)

    def _admit(self, connection: Any, request: Any) -> Any:
        from http import HTTPStatus

        path = request.path.split("?", 1)[0]
        if path != PATH:
            return connection.respond(HTTPStatus.NOT_FOUND, f"ACP is served on {PATH}\n")
        origin = request.headers.get("Origin")
        if origin is not None and origin.rstrip("/") not in self.origins:
            log.warning("ACP listener: refused a connection from Origin %r (not in --origin)", origin)
            return connection.respond(HTTPStatus.FORBIDDEN, "Origin not allowed (allow it with --origin)\n")
        if self._token is not None:
            given = request.headers.get("Authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self._token):
                response = connection.respond(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required\n")
                response.headers["WWW-Authenticate"] = 'Bearer realm="hopline-acp"'
                return response
        if self._active >= self.max_connections:
            return connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE, f"too many ACP connections (at most {self.max_connections})\n"
            )
        return None

    def _tag(self, connection: Any, request: Any, response: Any) -> Any:
        if response.status_code == 101:
            response.headers["Acp-Connection-Id"] = str(uuid.uuid4())
        return response

    async def _serve(self, ws: Any) -> None:
        if self._active >= self.max_connections:  # admitted together past the cap
            await ws.close(1013, "too many ACP connections")
            return
        self._active += 1
        peer = ws.remote_address
        name = f"editor {peer[0]}:{peer[1]}" if peer else "editor"
        channel = WebSocketChannel(ws, name, answer_garbage=True)
        try:
            await self.handler(channel)
        except Exception:
            log.exception("ACP listener: the conductor for %s failed", name)
        finally:
            self._active -= 1
            await channel.aclose()
