"""A legacy HTTP+SSE backend (MCP 2024-11-05) seen as a :class:`~hopline.layers.transport.channel.Channel`.

Contract
- ``await SseUpstream.connect(url)`` GETs the SSE URL and waits for the
  ``endpoint`` event. The endpoint is resolved against the SSE URL; one on a
  different origin (scheme, host, port) is refused, because the messages would
  then carry our headers (credentials) to a place nobody configured.
- In: ``send(message)`` POSTs the message's original bytes to the endpoint and
  expects 202 (any 2xx is accepted). A request whose POST fails gets a JSON-RPC
  error response for its id (``UnavailableError`` reason "unreachable", or the
  HTTP status), so nobody waits for an answer that cannot come.
- Out: ``receive()`` yields every ``message`` event of the stream, in order.
  When the stream ends, ``receive()`` raises :class:`ChannelClosed` with the
  reason ("SSE stream ended", "SSE stream failed: …").
- Never: re-encode a message, forward hop-by-hop headers, reconnect silently
  (a new SSE connection is a new session on the server: the caller decides).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from hopline.header_codec import clean_headers
from hopline.jsonrpc import (
    Message,
    PeerError,
    ProtocolError,
    UnavailableError,
    malformed_answer,
    parse,
    recover_answer_id,
)
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.inbound import Inbound
from hopline.transports.sse import SSEParser
from hopline.transports.http_util import public_url

log = logging.getLogger("hopline.sse_upstream")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


class SseUpstream(Inbound):
    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        name: str | None = None,
        max_queue: int = 1024,
    ) -> None:
        self.url = url
        self.name = name or public_url(url)  # never the URL's userinfo or query: names reach errors and logs
        self.endpoint: str | None = None
        self._own_client = client is None
        self._client = client if client is not None else httpx.AsyncClient(follow_redirects=False)
        self._timeout = httpx.Timeout(timeout)
        self._stream_timeout = httpx.Timeout(timeout, read=None)  # the stream idles between events
        self._base = clean_headers(headers)
        Inbound.__init__(self, max_queue)
        self._shut = False
        self._reader: asyncio.Task | None = None

    @classmethod
    async def connect(cls, url: str, *, connect_timeout: float = 10.0, **kwargs: Any) -> SseUpstream:
        """Open the stream and wait for the endpoint; raises :class:`ChannelClosed` if that fails."""
        self = cls(url, **kwargs)
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(ready))
        try:
            async with asyncio.timeout(connect_timeout):
                self.endpoint = await asyncio.shield(ready)
        except (TimeoutError, ChannelClosed) as exc:
            reason = exc.reason if isinstance(exc, ChannelClosed) else f"no endpoint event within {connect_timeout}s"
            await self.aclose()
            raise ChannelClosed(f"{self.name}: {reason}") from None
        return self

    # -- Channel ------------------------------------------------------------------
    async def send(self, message: Message) -> None:
        if self._closed or self.endpoint is None:
            raise ChannelClosed(f"{self.name}: {self._reason}")
        headers = {**self._base, "content-type": "application/json"}
        error = None
        try:
            resp = await self._client.post(
                self.endpoint, content=message.encode(), headers=headers, timeout=self._timeout
            )
            if not 200 <= resp.status_code < 300:
                text = f"{self.name}: backend answered HTTP {resp.status_code} {resp.reason_phrase}".rstrip()
                if resp.status_code >= 500 or resp.status_code == 404:  # 404: the server dropped our session
                    error = UnavailableError(text, backend=self.name, reason=f"http {resp.status_code}")
                else:
                    error = PeerError(text)
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.TransportError):  # a network error's details are for the operator only
                log.warning("%s: backend unreachable: %s", self.name, exc or type(exc).__name__)
                text = f"{self.name}: backend unreachable ({type(exc).__name__})"
            else:
                text = f"{self.name}: backend unreachable: {exc or type(exc).__name__}"
            error = UnavailableError(text, backend=self.name, reason="unreachable")
        if error is None:
            return
        if message.is_request():
            await self.put(error.to_response(message.id))
        else:
            log.warning("%s: could not deliver %s: %s", self.name, message.method or "a response", error.message)

    async def aclose(self) -> None:
        if self._shut:
            return
        self._shut = True
        if not self._closed:
            self._finish("closed")
        if self._reader is not None and self._reader is not asyncio.current_task():
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._own_client:
            await self._client.aclose()

    def is_closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<SseUpstream {self.name} endpoint={self.endpoint} closed={self._closed}>"

    # -- the stream -------------------------------------------------------------------
    async def _read(self, ready: asyncio.Future[str]) -> None:
        reason = "SSE stream ended (the server closed it)"
        headers = {**self._base, "accept": "text/event-stream"}
        try:
            async with self._client.stream("GET", self.url, headers=headers, timeout=self._stream_timeout) as resp:
                ctype = resp.headers.get("content-type", "")
                if resp.status_code != 200 or not ctype.startswith("text/event-stream"):
                    reason = f"SSE connect refused: HTTP {resp.status_code} {ctype}".rstrip()
                    return
                parser = SSEParser(errors="surrogateescape")  # invalid UTF-8 is refused, not altered
                async for chunk in resp.aiter_bytes():
                    for event in parser.feed(chunk):
                        if event.event == "endpoint":
                            self._on_endpoint(event.data, ready)
                        elif event.event == "message" and event.data:
                            frame = event.data.encode("utf-8", "surrogateescape")
                            try:
                                message = parse(frame)
                            except ProtocolError as exc:
                                # A broken answer whose id can be read: that request fails now (-31003).
                                msg_id = recover_answer_id(frame)
                                self.dropped(
                                    "%s: %s an SSE event that is not JSON-RPC: %s",
                                    self.name,
                                    "dropped" if msg_id is None else f"answered id {msg_id!r} with an error for",
                                    exc.message,
                                )
                                if msg_id is None:
                                    continue
                                message = malformed_answer(self.name, msg_id)
                            await self.put(message)
        except ChannelClosed as exc:
            reason = exc.reason
        except (httpx.HTTPError, ValueError) as exc:
            reason = f"SSE stream failed: {exc or type(exc).__name__}"
        finally:
            if not ready.done():
                ready.set_exception(ChannelClosed(reason))
            if not self._closed:
                self._finish(reason)

    def _on_endpoint(self, data: str, ready: asyncio.Future[str]) -> None:
        if not data.isascii():  # a URL; invalid UTF-8 arrives here as surrogates (see SSEParser)
            data = data.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        endpoint = urljoin(self.url, data.strip())
        if _origin(endpoint) != _origin(self.url):
            raise ChannelClosed(
                f"refused endpoint {public_url(endpoint)!r}: not the origin of {public_url(self.url)!r}"
            )
        if not ready.done():
            ready.set_result(endpoint)
