"""The handshake-era session of a Streamable HTTP backend: its id and version, recovery
after HTTP 404 (replaying the recorded handshake, ``reinitialize_on_404``), and the
standalone GET stream with ``Last-Event-ID`` resumption.

A mixin of :class:`~hopline.transports.streamable_http_client.StreamableHttpUpstream`,
kept apart so the channel's request/response path reads on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, AsyncIterator

import httpx

from hopline.jsonrpc import Message, ProtocolError, UnavailableError, parse
from hopline.transports.h1response import Response
from hopline.transports.sse import SSEParser

log = logging.getLogger("hopline.http_upstream")


def _ok(status: int) -> bool:
    return 200 <= status < 300


def _ctype(resp: httpx.Response) -> str:
    if resp.__class__ is Response:  # the lean client's: read without making its headers dict
        return resp.content_type
    return resp.headers.get("content-type", "").lower()


def _is_sse(resp: httpx.Response) -> bool:
    return _ok(resp.status_code) and _ctype(resp).startswith("text/event-stream")


class _SessionGone(Exception):  # HTTP 404 on an exchange that carried our session id
    pass


class SessionStreams:
    """Mixin: the handshake-era session and the GET stream (see the module docstring)."""

    if TYPE_CHECKING:  # provided by StreamableHttpUpstream
        url: str
        name: str
        session_id: str | None
        protocol_version: str | None
        BACKOFF: tuple[float, float]
        _client: Any
        _timeout: httpx.Timeout
        _short: httpx.Timeout
        _base: dict[str, str]
        _session: dict[str, str]
        _in_session: dict[str, str]
        _generation: int
        _lost: bool
        _closing: bool
        _reason: str
        _reinit: bool
        _init: Message | None
        _initialized: Message | None
        _reinit_lock: asyncio.Lock
        _flights: dict[Any, Any]

        async def put(self, message: Message) -> None: ...  # noqa: E704
        async def _pump(self, resp: httpx.Response, flight: Any) -> tuple[str | None, int | None]: ...  # noqa: E704
        async def _cancel_tasks(self) -> None: ...  # noqa: E704
        def _finish(self, reason: str) -> None: ...  # noqa: E704

    # -- the handshake-era session -------------------------------------------------------------
    def _set_session(self, session_id: str | None, version: str | None) -> None:
        if session_id != self.session_id:
            self._generation += 1
        self.session_id, self.protocol_version = session_id, version
        self._session = {k: v for k, v in (("mcp-session-id", session_id), ("mcp-protocol-version", version)) if v}
        self._in_session = {**self._base, **self._session}  # an in-session request's headers (nobody changes them)

    async def _session_gone(self, generation: int) -> bool:
        """HTTP 404 for our session: True if a fresh one replaced it, else the channel closes."""
        if self._reinit and await self._recover(generation):
            return True
        if self._closing:
            return False
        self._closing = self._lost = True
        self._reason = "session lost (HTTP 404)"
        flights = list(self._flights.values())
        self._flights.clear()
        await self._cancel_tasks()
        for flight in flights:
            error = UnavailableError(
                f"{self.name}: backend session lost (HTTP 404)", backend=self.name, reason="session lost"
            )
            await self.put(error.to_response(flight.message.id))
        self._finish(self._reason)
        return False

    async def _recover(self, generation: int) -> bool:
        """Replay the recorded handshake to obtain a fresh session; False if impossible."""
        async with self._reinit_lock:
            if generation != self._generation:
                return not self._closing  # another task recovered already
            if self._closing or self._init is None:
                return False
            try:
                async with self._client.stream(
                    "POST", self.url, content=self._init.encode(), headers=self._base, timeout=self._timeout
                ) as resp:
                    frames = [await resp.aread()]
                    if _ctype(resp).startswith("text/event-stream"):
                        frames = [e.data.encode() for e in SSEParser().feed(frames[0] + b"\n\n") if e.data]
                    answer = [m for m in map(parse, frames) if m.is_response() and m.id == self._init.id]
                    result = answer[0].body.get("result") if answer and _ok(resp.status_code) else None
                    if not isinstance(result, dict):
                        return False
                    self._set_session(resp.headers.get("mcp-session-id"), result.get("protocolVersion"))
                self._generation += 1
                note = self._initialized or Message({"jsonrpc": "2.0", "method": "notifications/initialized"})
                resp = await self._client.post(
                    self.url, content=note.encode(), headers={**self._base, **self._session}, timeout=self._short
                )
                log.info("%s: session expired; re-initialized as %s", self.name, self.session_id)
                return _ok(resp.status_code)
            except (httpx.HTTPError, ProtocolError, ValueError) as exc:
                log.warning("%s: re-initialize failed: %s", self.name, exc)
                return False

    @contextlib.asynccontextmanager
    async def _get(self, last_id: str | None) -> AsyncIterator[httpx.Response]:
        """A GET stream in the session; raises _SessionGone on 404."""
        headers = {k: v for k, v in self._base.items() if k != "content-type"}
        headers.update(self._session, accept="text/event-stream")
        if last_id:
            headers["last-event-id"] = last_id
        async with self._client.stream("GET", self.url, headers=headers, timeout=self._timeout) as resp:
            if resp.status_code == 404 and self.session_id is not None:
                raise _SessionGone
            yield resp

    async def _get_loop(self) -> None:
        """The standalone GET stream: reconnect with Last-Event-ID and capped backoff; 405 ends it."""
        low, high = self.BACKOFF
        delay, last_id, generation = low, None, self._generation
        while not self._closing:
            if generation != self._generation:  # a new session has its own cursor
                last_id, generation = None, self._generation
            retry = None
            try:
                async with self._get(last_id) as resp:
                    if resp.status_code == 405:
                        return  # the server offers no GET stream
                    if _is_sse(resp):
                        delay = low
                        new_id, retry = await self._pump(resp, None)
                        last_id = new_id or last_id
                    else:
                        log.warning("%s: GET stream refused with HTTP %d", self.name, resp.status_code)
            except _SessionGone:
                if not await self._session_gone(generation):
                    return
            except (httpx.HTTPError, ValueError) as exc:
                log.debug("%s: GET stream dropped: %s", self.name, exc)
            await asyncio.sleep(min(retry / 1000 if retry is not None else delay, high))
            delay = min(delay * 2, high)
