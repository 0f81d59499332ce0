"""A remote ACP component over the RFD's Streamable HTTP profile, seen as a channel.

A chain component given as an ``http://`` or ``https://`` URL (the RFD's ``/acp``
endpoint) is reached this way; ``ws://`` / ``wss://`` ones by :mod:`hopline.acp.remote`.

- The first POST opens the connection: the server answers it ``200`` with the
  JSON-RPC answer in the body and ``Acp-Connection-Id`` in a header (the RFD's
  ``initialize``). Then one ``GET`` (``Accept: text/event-stream``) is opened for
  every server→client message (answers, notifications, the agent's requests),
  before anything else is POSTed, so nothing the server sends is missed.
- Every later message is a POST with ``Acp-Connection-Id`` (and ``Acp-Session-Id``
  when it names a session) answered ``202``; the answer comes on the stream. A
  request whose POST fails is answered with a JSON-RPC error at once (never a hang).
- Session-scoped streams, as the official SDKs implement the profile (the Python
  SDK 0.12's server and client, ported from the TypeScript SDK's ``http-stream``):
  the server sends a session's traffic on a ``GET`` that also carries
  ``Acp-Session-Id``, so when a message names a session not seen yet, such a
  stream is opened too (the server buffers until then). The RFD's text has one
  connection-scoped stream only; a server that follows it sends everything there,
  which is read as well.
- Messages are POSTed one at a time, in order (the conductor's writer sends them so).
- Cookies the server sets are kept and sent back for the connection's life (the RFD).
- ``aclose`` sends ``DELETE`` (the RFD's termination) and closes the stream.
- HTTP/1.1: the RFD asks HTTP/2 for this profile; httpx speaks it only with the
  ``h2`` package, which hopline does not require (the official Python SDK's server
  under uvicorn, the peer tested, serves HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import httpx

from hopline.jsonrpc import Message, ProtocolError, UnavailableError, parse
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.http_util import public_url
from hopline.transports.inbound import Inbound
from hopline.transports.sse import SSEParser

log = logging.getLogger("hopline.acp")

CONNECTION_ID, SESSION_ID = "Acp-Connection-Id", "Acp-Session-Id"
SCHEMES = ("http://", "https://")
MAX_BODY = 4 * 1024 * 1024
MAX_SESSION_STREAMS = 256  # session-scoped streams open at once on one connection


class AcpHttpChannel(Inbound):
    def __init__(self, url: str, name: str, *, timeout: float = 30.0, max_queue: int = 1024) -> None:
        Inbound.__init__(self, max_queue)
        self.url = url
        self.name = name
        self.shown = public_url(url)  # never userinfo or query in errors and logs
        self.connection_id: str | None = None
        self._client = httpx.AsyncClient(follow_redirects=False, timeout=httpx.Timeout(timeout))
        self._stream_timeout = httpx.Timeout(timeout, read=None)
        self._reader: asyncio.Task | None = None
        self._sessions: dict[str, asyncio.Task] = {}  # session-scoped streams
        self._shut = False

    async def send(self, message: Message) -> None:
        if self._closed:
            raise ChannelClosed(f"{self.name}: {self._reason}")
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.connection_id is not None:
            headers[CONNECTION_ID] = self.connection_id
        params = message.body.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(session, str):
            headers[SESSION_ID] = session
        try:
            resp = await self._client.post(self.url, content=message.encode(), headers=headers)
        except httpx.HTTPError as exc:
            log.warning("%s: %s unreachable: %s", self.name, self.shown, type(exc).__name__)
            return await self._fail(message, f"{self.shown} unreachable ({type(exc).__name__})")
        if resp.status_code == 202:
            return
        if resp.status_code != 200:
            return await self._fail(message, f"{self.shown} answered HTTP {resp.status_code}")
        if len(resp.content) > MAX_BODY:
            return await self._fail(message, f"{self.shown} answered more than {MAX_BODY} bytes")
        if resp.content.strip():
            try:
                await self.put(parse(resp.content))
            except ProtocolError as exc:
                self.dropped("%s: dropped an answer that is not JSON-RPC: %s", self.name, exc.message)
        if self.connection_id is None and resp.headers.get(CONNECTION_ID):
            self.connection_id = resp.headers[CONNECTION_ID]
            await self._open_stream()

    async def _fail(self, message: Message, text: str) -> None:
        if message.is_request():
            error = UnavailableError(f"{self.name}: {text}", backend=self.name, reason="unreachable")
            await self.put(error.to_response(message.id))
        else:
            log.warning("%s: could not deliver %s: %s", self.name, message.method or "a response", text)

    async def _open_stream(self) -> None:
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(opened), name=f"acp-http-stream-{self.name}")
        try:  # the stream is open (or the channel is closed with the reason) before the next POST
            await asyncio.wait_for(asyncio.shield(opened), 30)
        except asyncio.TimeoutError:
            self._finish("the event stream did not open within 30 s")

    async def _read(self, opened: asyncio.Future[None], session: str | None = None) -> None:
        reason = "the event stream ended (the server closed it)"
        headers = {"accept": "text/event-stream", CONNECTION_ID: self.connection_id or ""}
        if session is not None:
            headers[SESSION_ID] = session
        try:
            async with self._client.stream("GET", self.url, headers=headers, timeout=self._stream_timeout) as resp:
                ctype = resp.headers.get("content-type", "")
                if resp.status_code != 200 or not ctype.startswith("text/event-stream"):
                    reason = f"event stream refused: HTTP {resp.status_code} {ctype}".rstrip()
                    return
                opened.set_result(None)
                parser = SSEParser(errors="surrogateescape")
                async for chunk in resp.aiter_bytes():
                    for event in parser.feed(chunk):
                        if event.event not in ("message", "") or not event.data:
                            continue
                        if len(event.data) > MAX_BODY:
                            self.dropped("%s: dropped an event of more than %d bytes", self.name, MAX_BODY)
                            continue
                        try:
                            message = parse(event.data.encode("utf-8", "surrogateescape"))
                        except ProtocolError as exc:
                            self.dropped("%s: dropped an event that is not JSON-RPC: %s", self.name, exc.message)
                            continue
                        self._follow(message)
                        await self.put(message)
        except (httpx.HTTPError, ValueError) as exc:
            reason = f"event stream failed: {type(exc).__name__}"
        finally:
            if not opened.done():
                opened.set_result(None)
            if session is not None:  # a session's stream may end on its own; the connection goes on
                log.debug("%s: the stream of session %s ended: %s", self.name, session, reason)
            elif not self._closed:
                self._finish(reason)

    def _follow(self, message: Message) -> None:
        """Open the session-scoped stream of a session named for the first time."""
        for part in (message.body.get("result"), message.body.get("params")):
            session = part.get("sessionId") if isinstance(part, dict) else None
            if isinstance(session, str) and session not in self._sessions and not self._shut:
                if len(self._sessions) >= MAX_SESSION_STREAMS:
                    log.warning(
                        "%s: more than %d sessions; no stream opened for %s", self.name, MAX_SESSION_STREAMS, session
                    )
                    return
                opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._sessions[session] = asyncio.create_task(
                    self._read(opened, session), name=f"acp-http-session-{self.name}"
                )

    async def aclose(self) -> None:
        if self._shut:
            return
        self._shut = True
        if self.connection_id is not None:
            with contextlib.suppress(httpx.HTTPError, asyncio.TimeoutError):
                await asyncio.wait_for(self._client.delete(self.url, headers={CONNECTION_ID: self.connection_id}), 5)
        if not self._closed:
            self._finish("closed")
        for task in (self._reader, *self._sessions.values()):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._client.aclose()

    def is_closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<AcpHttpChannel {self.name} {self.shown} connection={self.connection_id} closed={self._closed}>"
