"""The response side of the lean HTTP/1.1 client (``h1client.py``): headers as parsed,
and a body fed by the connection and read by the caller, whole or as a stream, with
back-pressure (reading pauses the connection above ``HIGH_WATER`` buffered bytes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx

from hopline.layers.transport.loop import running_loop

HIGH_WATER = 1 << 20  # buffered body bytes before reading pauses
# Response header names as received → their lower-cased text: a server sends the same
# handful each time (one decode and lower per header fewer; an SSE answer has eight).
MAX_NAMES = 256
_NAMES: dict[bytes, str] = {}
_CTYPES: dict[bytes, str] = {}  # Content-Type values as received → lower-cased text (up to MAX_NAMES)


class Feed(Protocol):
    """The connection a response body comes from (``h1client._Connection``): paused above
    ``HIGH_WATER`` buffered bytes, resumed once the caller has read them. ``loop``: the loop
    its transport runs in (the response's timers and waits are on it: no ``running_loop()``
    look-up per wait, bench/profile_call.py)."""

    loop: asyncio.AbstractEventLoop | None

    def pause(self) -> None: ...

    def resume(self) -> None: ...


def expire(future: asyncio.Future) -> None:
    """A read deadline passed: the wait on ``future`` raises TimeoutError (a timer handle,
    cheaper per request than an ``asyncio.timeout`` context)."""
    if not future.done():
        future.set_exception(TimeoutError())


class Headers(dict):
    """Response headers, lower-cased names; repeated fields joined with ", "."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, key.lower(), default)


class Response:
    __slots__ = (
        "_buffered",
        "_chunks",
        "_conn",
        "_done",
        "_error",
        "_headers",
        "_loop",
        "_reason",
        "_timeout",
        "_until",
        "_waiter",
        "content",
        "raw_headers",
        "status_code",
    )

    def __init__(self, conn: Feed, timeout: float | None) -> None:
        self.status_code = 0
        self._reason = b""
        self._headers: Headers | None = None
        self.raw_headers: list[tuple[bytes, bytes]] = []  # as received, repeats kept (for a proxy that passes them on)
        self.content = b""
        self._conn = conn
        self._loop = conn.loop or running_loop()
        self._chunks: list[bytes] = []
        self._done = False
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._buffered = 0
        self._timeout = timeout
        self._until: float | None = None  # see read_until

    # -- the head, made from what was received when first read -------------------------------
    @property
    def headers(self) -> Headers:
        """Lower-cased names to their text; repeated fields joined with ", " (made once, when first read)."""
        headers = self._headers
        if headers is None:
            headers = self._headers = Headers()
            for name, value in self.raw_headers:
                key = _NAMES.get(name)
                if key is None:
                    key = name.decode("latin-1").lower()
                    if len(_NAMES) < MAX_NAMES:
                        _NAMES[name] = key
                text = value.decode("latin-1")
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
        return headers

    @property
    def content_type(self) -> str:
        """The Content-Type, lower-cased ("" without one), read without making ``headers``
        (the fields as usually spelt; any other spelling through ``headers``)."""
        if self._headers is None:
            for name, value in self.raw_headers:
                if name == b"content-type" or name == b"Content-Type":
                    text = _CTYPES.get(value)  # a server sends the same one or two: decoded once
                    if text is None:
                        text = value.decode("latin-1").lower()
                        if len(_CTYPES) < MAX_NAMES:
                            _CTYPES[value] = text
                    return text
        return self.headers.get("content-type", "").lower()

    @property
    def reason_phrase(self) -> str:
        return self._reason.decode("latin-1")

    # -- fed by the connection ------------------------------------------------------------
    # The waiter is woken inline, not through a method of its own, let go as it is woken (later
    # callbacks find None), and without asking ``done()`` first: it is done already only if its
    # reader was cancelled (InvalidStateError, nothing to do). A Python call or two per wake fewer.
    def _body(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > HIGH_WATER:
            self._conn.pause()
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            try:
                waiter.set_result(None)
            except asyncio.InvalidStateError:
                pass

    def _end(self, error: BaseException | None = None) -> None:
        if not self._done:
            self._done = True
            self._error = error
            waiter = self._waiter
            if waiter is not None:
                self._waiter = None
                try:
                    waiter.set_result(None)
                except asyncio.InvalidStateError:
                    pass

    # -- read by the caller -----------------------------------------------------------------
    def read_until(self, when: float) -> None:
        """Read the body no longer than until loop time ``when``: then ``aiter_bytes`` ends where
        the body is (not complete, so the connection is not reused). What an upstream does
        once its answer has come on a stream the server should end now (an ``asyncio.timeout``
        context per request fewer, bench/profile_call.py --sse)."""
        self._until = when

    def read_for(self, seconds: float) -> None:
        """``read_until`` ``seconds`` from now, on the response's own loop."""
        self._until = self._loop.time() + seconds

    async def _more(self) -> bool:
        """Wait for more of the body; False if ``read_until``'s time has come first."""
        loop = self._loop
        timeout, until, cut = self._timeout, self._until, False
        if until is not None:
            left = until - loop.time()
            if left <= 0:
                return False
            if timeout is None or left <= timeout:
                timeout, cut = left, True
        waiter = self._waiter = loop.create_future()
        handle = loop.call_later(timeout, expire, waiter) if timeout is not None else None
        try:
            await waiter
        except TimeoutError:
            if cut:
                return False
            raise httpx.ReadTimeout("timed out waiting for the response body") from None
        finally:
            self._waiter = None
            if handle is not None:
                handle.cancel()
        return True

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        while True:
            if self._chunks:
                if self._until is not None and self._loop.time() >= self._until:
                    return  # read_until's time has come (a server that keeps sending cannot hold us)
                if self._buffered > HIGH_WATER:  # paused by _body (only then)
                    self._conn.resume()
                chunks, self._chunks, self._buffered = self._chunks, [], 0
                for chunk in chunks:
                    yield chunk
                continue
            if self._done:
                if self._error is not None:
                    raise self._error
                return
            if not await self._more():
                return

    async def read_some(self) -> bytes:
        """The body's next bytes: all that is buffered, in one piece (waiting for some if none is);
        b"" at its end, or once ``read_until``'s time has come (as ``aiter_bytes`` ends). What
        ``aiter_bytes`` gives, without an async generator's frame, and one piece however many
        chunks came at once (one SSE parse for them; bench/profile_call.py --sse)."""
        while True:
            chunks = self._chunks
            if chunks:
                if self._until is not None and self._loop.time() >= self._until:
                    return b""
                if self._buffered > HIGH_WATER:  # paused by _body (only then): a Python call per read fewer
                    self._conn.resume()
                self._chunks, self._buffered = [], 0
                try:
                    [data] = chunks
                except ValueError:
                    data = b"".join(chunks)
                if data:
                    return data
                continue
            if self._done:
                if self._error is not None:
                    raise self._error
                return b""
            # >> inlined copy of _more (a coroutine level fewer on the wait for a stream's end), to the
            # end of this loop body; test_inlined_equivalence.py holds it to aiter_bytes' _more.
            loop = self._loop
            timeout, until, cut = self._timeout, self._until, False
            if until is not None:
                left = until - loop.time()
                if left <= 0:
                    return b""
                if timeout is None or left <= timeout:
                    timeout, cut = left, True
            waiter = self._waiter = loop.create_future()
            handle = loop.call_later(timeout, expire, waiter) if timeout is not None else None
            try:
                await waiter
            except TimeoutError:
                if cut:
                    return b""
                raise httpx.ReadTimeout("timed out waiting for the response body") from None
            finally:
                self._waiter = None
                if handle is not None:
                    handle.cancel()
            # << end of the copy of _more

    async def aread(self) -> bytes:
        if self._done and self._error is None and self._chunks:  # all here already: no iterator
            if self._buffered > HIGH_WATER:  # paused by _body (only then)
                self._conn.resume()
            chunks, self._chunks, self._buffered = self._chunks, [], 0
            self.content = self.content + (chunks[0] if len(chunks) == 1 else b"".join(chunks))
            return self.content
        if not self._done or self._chunks:
            parts = [chunk async for chunk in self.aiter_bytes()]
            self.content = self.content + b"".join(parts)
        elif self._error is not None:
            raise self._error
        return self.content

    def replay(self) -> None:
        """After ``aread``: hand the body out again to the next reader."""
        if self.content:
            self._chunks, self.content = [self.content], b""

    @property
    def is_complete(self) -> bool:
        return self._done and self._error is None
