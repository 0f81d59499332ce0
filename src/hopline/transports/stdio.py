"""stdio framing (newline-delimited JSON), a backend child process, and our own stdio.

- :class:`StdioChild` spawns a backend with a clean environment (:func:`child_environment`:
  a short safe list, what the backend's ``inherit_env`` names, its own ``env``), speaks to
  it over stdin/stdout, passes its
  stderr through to ours (prefixed) so it never enters the protocol stream, and
  shuts it down gracefully: close stdin → SIGTERM → SIGKILL, always reaped. On
  Linux the child also gets PDEATHSIG, so a hopline killed with SIGKILL leaves no
  orphan behind.
- :class:`StreamChannel` is the framing over any asyncio reader/writer pair; it
  serves our own stdin/stdout (:func:`open_own_stdio_halves`) as a client-facing listener.

A line that is not a JSON-RPC message is dropped, counted (``garbage_frames``) and
logged (rate-limited: at most 5 lines per 10 s); a flood of them costs one line of
buffer at a time and yields to the event loop every ``GARBAGE_YIELD`` lines. From a
backend (:class:`StdioChild`), a broken *answer* whose id can still be read safely
(:func:`~hopline.jsonrpc.recover_answer_id`: invalid UTF-8, malformed JSON) becomes a
-31003 error response for that id, so its call fails at once instead of waiting for
its timeout (issue 13). A line longer than ``max_frame`` closes the channel with a
clear reason, because the stream cannot be resynchronised safely inside an unbounded line.

What a child says outside the protocol is kept, bounded, for the reason it failed to start
(:meth:`StdioChild.said`, issue 29 item 11): the last ``STDERR_TAIL`` lines of its stderr and
the first line it wrote to stdout that is not JSON-RPC, each quoted by :func:`quote` (at most
``QUOTE`` characters, credentials redacted). The exit status is in the channel's close reason
(``backend exited with status 7``), also when the child was gone before its first message
could be written; the stderr tail is not (a client sees that reason; serve's log and status
see ``said()``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fnmatch
import logging
import os
import re
import signal
import stat
import sys
from typing import Any, Mapping, Sequence

import orjson

from hopline.jsonrpc import Message, ProtocolError, malformed_answer, parse, recover_answer_id
from hopline.layers.transport.channel import ChannelClosed
from hopline.observability.redact import REDACTED, url_scrub
from hopline.transports.garbage import RateLimitedLog

log = logging.getLogger("hopline.stdio")

DEFAULT_MAX_FRAME = 16 * 1024 * 1024
GARBAGE_YIELD = 64  # garbage lines in a row read before yielding to the event loop
HIGH_WATER = 65536  # bytes buffered for the pipe above which a write waits for it to drain
QUOTE = 120  # characters of a line a log or a failure quotes
STDERR_TAIL = 5  # lines of a child's stderr kept for the reason it failed
# What a quoted line must not show: "token=X", "Authorization: Bearer X", "api-key: X", a lone
# "Bearer X", and long random-looking words (letters and digits, 24+ characters: API keys).
_CREDENTIAL = re.compile(
    r"(?i)((?:authorization|api[-_]?key|x-api-key|access[-_]?key|token|secret|password|passwd|pwd|credentials?"
    r"|cookie|auth)[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?[^\s\"',;&]+"
)
_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_TOKEN = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{24,}")


def quote(text: bytes | str, secrets: Sequence[str] = ()) -> str:
    """``text`` as a log line or a failure may quote it: one line, at most ``QUOTE``
    characters, URLs' credentials, credential-looking values and ``secrets`` (values of at
    least 8 characters, e.g. the backend's own ``env``) replaced by ``<redacted>``."""
    if isinstance(text, bytes):
        text = text[: 4 * QUOTE].decode("utf-8", "backslashreplace")
    text = " ".join(text[: 4 * QUOTE].split())
    for secret in secrets:
        if len(secret) >= 8:
            text = text.replace(secret, REDACTED)
    text = url_scrub(text)
    text = _CREDENTIAL.sub(lambda m: m.group(1) + REDACTED, text)
    text = _SCHEME.sub(lambda m: m.group(1) + " " + REDACTED, text)
    text = _TOKEN.sub(REDACTED, text)
    return text if len(text) <= QUOTE else text[: QUOTE - 1] + "…"


class _Quoted:
    """A frame as a log line quotes it (:func:`quote`), computed when the line is written."""

    __slots__ = ("frame", "secrets")

    def __init__(self, frame: bytes, secrets: Sequence[str]) -> None:
        self.frame, self.secrets = frame, secrets

    def __repr__(self) -> str:
        return repr(quote(self.frame, self.secrets))


class StreamChannel:
    """Newline-delimited JSON-RPC over an asyncio StreamReader/StreamWriter."""

    #: Answer a broken response frame with a -31003 error for its id (the peer is a backend).
    recover_answers = False

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter | None,
        *,
        name: str,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self._reader = reader
        self._writer = writer
        # Written to directly: StreamWriter.write and is_closing are the transport's, through a
        # Python call each (bench/profile_call.py --relay: two calls per message written fewer).
        self._transport: Any = writer.transport if writer is not None else None
        self._max_frame = max_frame
        self._closed = False
        self._close_reason = "closed"
        self._garbage = RateLimitedLog(log)
        self.name = name
        self.garbage_frames = 0
        self.replies: StreamChannel | None = None  # where a read-only half answers a malformed request
        self.junk: str | None = None  # the first line that was not JSON-RPC, quoted (redacted)
        self._secrets: Sequence[str] = ()  # values a quote never shows (a child's own env)

    async def send(self, message: Message) -> None:
        transport = self._transport
        if self._closed or transport is None or transport.is_closing():
            raise ChannelClosed(f"{self.name}: {self._close_reason}")
        transport.write(message.encode() + b"\n")
        # Only wait for the pipe when its buffer is above the high-water mark.
        if transport.get_write_buffer_size() > HIGH_WATER:
            assert self._writer is not None
            try:
                await self._writer.drain()
            except (ConnectionError, BrokenPipeError) as exc:
                self._closed, self._close_reason = True, f"write failed: {exc}"
                raise ChannelClosed(f"{self.name}: {self._close_reason}") from None

    def send_nowait(self, message: Message) -> bool:
        """Write ``message`` now if the pipe takes it without waiting; False (nothing written)
        if the channel is closed or the pipe's buffer is above the high-water mark (``send``
        then waits for it, or says why it cannot)."""
        transport = self._transport
        if self._closed or transport is None or transport.is_closing():
            return False
        if transport.get_write_buffer_size() > HIGH_WATER:
            return False
        transport.write(message.encode() + b"\n")
        return True

    async def receive(self) -> Message:
        while True:
            if self._closed:
                raise ChannelClosed(f"{self.name}: {self._close_reason}")
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    self._garbage.warn("%s: dropped a truncated frame at EOF (%d bytes)", self.name, len(exc.partial))
                self._closed, self._close_reason = True, self._eof_reason()
                raise ChannelClosed(f"{self.name}: {self._close_reason}") from None
            except asyncio.LimitOverrunError:
                self._closed = True
                self._close_reason = f"a frame exceeded the {self._max_frame}-byte limit"
                raise ChannelClosed(f"{self.name}: {self._close_reason}") from None
            except (ConnectionError, OSError) as exc:
                self._closed, self._close_reason = True, f"read failed: {exc}"
                raise ChannelClosed(f"{self.name}: {self._close_reason}") from None
            # Strip the frame's newline (and a CR from CRLF peers) so the bytes kept for
            # forwarding are exactly the message.
            end = len(line) - 1
            if end and line[end - 1] == 13:
                end -= 1
            if not line[:end].strip():
                continue
            try:
                return parse(line[:end])
            except ProtocolError as exc:
                answer = await self._not_jsonrpc(line[:end], exc)
                if answer is not None:
                    return answer

    async def _not_jsonrpc(self, frame: bytes, exc: ProtocolError) -> Message | None:
        """A frame that is not JSON-RPC: counted and logged, and answered if it is a broken answer
        whose id can be read (``recover_answers``); else None (dropped). A request that is JSON
        but no valid JSON-RPC, with an id that can be read, gets its error back on this channel
        (the HTTP listener answers it too), so that its sender does not wait for it forever."""
        self.garbage_frames += 1
        if exc.request_id is not None:
            self._refuse(frame, exc)
        answer = self._broken_answer(frame) if self.recover_answers else None
        if answer is not None:  # no preview: an answer's content is the client's, not the log's
            self._garbage.warn(
                "%s: answered id %r with an error: its response is not JSON-RPC (%s)",
                self.name,
                answer.id,
                exc.message,
            )
            return answer
        if self.junk is None:
            self.junk = quote(frame, self._secrets)
        preview = _Quoted(frame[: 4 * QUOTE], self._secrets)  # quoted only if the rate limit lets the line out
        self._garbage.warn("%s: dropped a frame that is not JSON-RPC (%s): %r", self.name, exc.message, preview)
        if self.garbage_frames % GARBAGE_YIELD == 0:
            await asyncio.sleep(0)  # buffered garbage never monopolises the loop
        return None

    def _refuse(self, frame: bytes, exc: ProtocolError) -> None:
        """Write ``exc`` to the peer as the answer to its request ``exc.request_id`` (a request:
        a broken response is never answered), through ``replies`` (the sending half, where this
        channel only reads); not if the peer does not read what it is sent (``send_nowait``)."""
        try:
            body = orjson.loads(frame)
        except orjson.JSONDecodeError:
            return
        if isinstance(body, dict) and "method" in body:
            (self.replies or self).send_nowait(exc.to_response(exc.request_id))

    def _broken_answer(self, frame: bytes) -> Message | None:
        msg_id = recover_answer_id(frame)
        return None if msg_id is None else malformed_answer(self.name, msg_id)

    def _eof_reason(self) -> str:
        return "end of stream"

    async def aclose(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.close()
        self._closed = True

    def is_closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} closed={self._closed}>"


# What a child inherits from hopline's environment without being asked: the MCP Python SDK's
# list (mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS), plus locale, time zone, temp and XDG base
# directories and CA bundle paths: settings and paths, never credentials. npx and uvx need no more
# (their caches are found through HOME / XDG_CACHE_HOME; a TLS-inspecting network needs the CA
# paths). Deliberately not: proxies (*_PROXY may carry user:password), npm_config_* and UV_* (may
# carry registry tokens), PYTHONPATH / NODE_PATH. ``inherit_env`` opts in to more.
SAFE_ENV: tuple[str, ...] = (
    (
        "APPDATA",
        "HOMEDRIVE",
        "HOMEPATH",
        "LOCALAPPDATA",
        "PATH",
        "PATHEXT",
        "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE",
        "SYSTEMROOT",
        "TEMP",
        "TMP",
        "USERNAME",
        "USERPROFILE",
    )
    if sys.platform == "win32"
    else (
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "LANG",
        "LANGUAGE",
        "LC_*",
        "TZ",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
    )
) + ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE")


def child_environment(
    env: Mapping[str, str] | None, inherit: bool | Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a stdio child starts with (DESIGN §7: children get a clean environment).

    :data:`SAFE_ENV` taken from ``environ`` (default ``os.environ``; a value starting with ``()``,
    an exported shell function, is skipped as the SDK does), plus the variables ``inherit`` names
    (names or ``fnmatch`` patterns such as ``AWS_*``; ``True``: everything), plus ``env``, which
    wins. So one backend's secrets, interpolated into hopline's environment, reach no other backend.
    """
    source = os.environ if environ is None else environ
    if inherit is True:
        out = dict(source)
    else:
        out = {name: value for name, value in source.items() if _matches(name, SAFE_ENV) and not value.startswith("()")}
        if inherit:
            out.update((name, value) for name, value in source.items() if _matches(name, inherit))
    if env:
        out.update(env)
    return out


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(name == p or (("*" in p or "?" in p or "[" in p) and fnmatch.fnmatch(name, p)) for p in patterns)


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class StdioChild(StreamChannel):
    """A backend server process spoken to over its stdin/stdout."""

    recover_answers = True

    def __init__(self, process: asyncio.subprocess.Process, *, name: str, max_frame: int) -> None:
        assert process.stdout is not None and process.stdin is not None
        super().__init__(process.stdout, process.stdin, name=name, max_frame=max_frame)
        self.process = process
        self._stderr_task: asyncio.Task | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)  # quoted, redacted

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        inherit: bool | Sequence[str] = (),
        cwd: str | None = None,
        name: str | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        stderr_prefix: bool = True,
    ) -> StdioChild:
        """Start ``argv`` with :func:`child_environment` (``env``, ``inherit``) in ``cwd``."""
        if not argv:
            raise ValueError("no command given for the stdio backend")
        full_env = child_environment(env, inherit)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=full_env,
                cwd=cwd,
                limit=max_frame,
                preexec_fn=_set_pdeathsig if sys.platform.startswith("linux") else None,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ChannelClosed(f"cannot start {argv[0]!r}: {exc.strerror}") from None
        child = cls(process, name=name or os.path.basename(argv[0]), max_frame=max_frame)
        child._secrets = [v for v in (env or {}).values() if isinstance(v, str)]
        child._stderr_task = asyncio.create_task(child._pump_stderr(stderr_prefix))
        return child

    async def _pump_stderr(self, prefix: bool) -> None:
        stream = self.process.stderr
        assert stream is not None
        out = sys.stderr.buffer
        tag = f"[{self.name} {self.process.pid}] ".encode() if prefix else b""
        with contextlib.suppress(Exception):
            while line := await stream.readline():
                out.write(tag + line)
                out.flush()
                if line.strip():
                    self.stderr_tail.append(quote(line, self._secrets))

    def _eof_reason(self) -> str:
        code = self.process.returncode
        return "backend closed its stdout" if code is None else f"backend exited with status {code}"

    def said(self) -> str | None:
        """What this child said outside the protocol, for a line about its failed start:
        the first line of its stdout that was not JSON-RPC, the tail of its stderr."""
        parts = []
        if self.junk is not None:
            parts.append(f"it wrote to stdout what is not JSON-RPC: {self.junk!r}")
        if self.stderr_tail:
            parts.append("its stderr ended: " + " / ".join(repr(line) for line in self.stderr_tail))
        return "; ".join(parts) or None

    async def _exited(self) -> None:
        """Give the exit status (and the rest of stderr) a moment to arrive so the reason names it."""
        if self.process.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.process.wait(), 0.2)
        if self.process.returncode is not None and self._stderr_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 0.2)

    async def receive(self) -> Message:
        try:
            return await super().receive()
        except ChannelClosed:
            if self.process.returncode is None:
                await self._exited()
                self._close_reason = self._eof_reason()
            raise ChannelClosed(f"{self.name}: {self._close_reason}") from None

    async def send(self, message: Message) -> None:
        try:
            await super().send(message)
        except ChannelClosed:
            # A child gone before this write (it exited at once): its status, not "closed".
            if self._close_reason == "closed":
                await self._exited()
                if self.process.returncode is not None:
                    self._close_reason = self._eof_reason()
            raise ChannelClosed(f"{self.name}: {self._close_reason}") from None

    async def aclose(self, grace: float = 2.0) -> None:
        """Close stdin, then SIGTERM, then SIGKILL; always reap."""
        await super().aclose()
        proc = self.process
        for step in ("eof", "term", "kill"):
            if proc.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                if step == "term":
                    proc.terminate()
                elif step == "kill":
                    proc.kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), grace if step != "kill" else 10)
        if self._stderr_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._stderr_task, 1)

    def is_alive(self) -> bool:
        return self.process.returncode is None

    def __repr__(self) -> str:
        return f"<StdioChild {self.name} pid={self.process.pid} rc={self.process.returncode}>"


class _FileWriter:
    """Just enough of ``asyncio.StreamWriter`` for :class:`StreamChannel` over a regular file
    (asyncio pipes refuse files; writes to a file never block on a peer)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.closed = fd, False
        self.transport = self

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def get_write_buffer_size(self) -> int:
        return 0

    async def drain(self) -> None:
        return None

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


class _Lines(asyncio.Protocol):
    """Our own stdin cut into lines as they arrive: what :class:`StreamChannel` reads of an
    ``asyncio.StreamReader`` (``readuntil(b"\\n")``), without its Python calls per line (its
    buffer, waiter and pause checks: ~20 per relayed call, bench/profile_call.py --relay).
    The same rules: a line (or an unfinished one) longer than ``limit`` is an overrun, after
    the lines before it; a read error is raised before any line still waiting, as
    ``readuntil`` raises it; the end of the input after the last full line gives what was left
    unfinished; reading pauses while more than ``2 * limit`` bytes wait and resumes at
    ``limit``. Also fed by hand (``feed_data``, ``feed_eof``) for a regular file."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.get_running_loop()  # the waits' (see _StdinChannel.receive)
        self.lines: collections.deque[bytes] = collections.deque()  # full lines, without their "\\n"
        self.chunks: list[bytes] = []  # the unfinished line, as read (joined once, when its end comes)
        self._partial = 0  # its length
        self.eof = False
        self.error: BaseException | None = None  # a read error (connection_lost)
        self.overrun = False  # a line longer than the limit follows the lines waiting
        self.paused = False
        self._limit = limit
        self._size = 0  # bytes waiting (counted from when none were; see feed_data)
        self.waiter: asyncio.Future[None] | None = None  # the reader's, while it waits for a line
        self._transport: asyncio.ReadTransport | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def eof_received(self) -> bool:
        self.feed_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self.error = exc
        self.feed_eof()

    # -- fed -------------------------------------------------------------------------------------
    def feed_data(self, data: bytes) -> None:
        if self.eof or self.overrun:
            return
        if not self.lines:
            self._size = self._partial  # what waits is the unfinished line only; the new bytes are added below
        lines = data.split(b"\n")
        size = len(data)
        chunks = self.chunks
        if len(lines) == 1:  # no line ends in this read: kept as it is, joined once with the rest of its line
            chunks.append(data)
            self._partial += size
            if self._partial > self._limit:
                self._overran([])
                return
        else:
            whole = size
            if chunks:  # the end of the unfinished line: its pieces are copied once, here
                whole += self._partial
                if len(chunks) == 1:
                    lines[0] = chunks[0] + lines[0]
                else:
                    chunks.append(lines[0])
                    lines[0] = b"".join(chunks)
                chunks.clear()
            tail = lines.pop()
            if tail:
                chunks.append(tail)
                self._partial = len(tail)
            else:
                self._partial = 0
            if whole > self._limit and self._overran(lines):
                return
            self.lines.extend(lines)
            # >> inlined copy of _wake (done only if its reader was cancelled); test_inlined_equivalence.py
            waiter = self.waiter
            if waiter is not None:
                self.waiter = None
                try:
                    waiter.set_result(None)
                except asyncio.InvalidStateError:
                    pass
            # << end of the copy of _wake
        self._size += size
        if self._size > 2 * self._limit and not self.paused and self._transport is not None:
            self.paused = True
            self._transport.pause_reading()

    data_received = feed_data  # asyncio.Protocol's, itself (a Python call per read fewer)

    def _overran(self, lines: list[bytes]) -> bool:
        """True if a line of ``lines`` or the unfinished one is longer than the limit: the lines
        before it are kept, then ``overrun``."""
        for i, line in enumerate(lines):
            if len(line) > self._limit:
                del lines[i:]
                break
        else:
            if self._partial <= self._limit:
                return False
        self.lines.extend(lines)
        self.chunks.clear()
        self._partial = 0
        self.overrun = True
        self._wake()
        return True

    def take_partial(self) -> bytes:
        """The unfinished line (at the end of the input), and none is left."""
        partial = b"".join(self.chunks)
        self.chunks.clear()
        self._partial = 0
        return partial

    def feed_eof(self) -> None:
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # -- read --------------------------------------------------------------------------------------
    def consumed(self, size: int) -> None:
        """``size`` bytes were read while reading was paused: it resumes once ``limit`` or fewer wait."""
        self._size -= size
        if self.paused and self._size <= self._limit and self._transport is not None:
            self.paused = False
            self._transport.resume_reading()


class _StdinChannel(StreamChannel):
    """:class:`StreamChannel` reading our own stdin through :class:`_Lines`: the same frames,
    the same reasons to close, the same handling of what is not JSON-RPC."""

    _reader: _Lines  # type: ignore[assignment]

    async def receive(self) -> Message:
        reader = self._reader
        lines = reader.lines
        while True:
            if self._closed:
                raise ChannelClosed(f"{self.name}: {self._close_reason}")
            if reader.error is not None:
                self._closed, self._close_reason = True, f"read failed: {reader.error}"
                raise ChannelClosed(f"{self.name}: {self._close_reason}")
            if not lines:
                if reader.overrun:
                    self._closed = True
                    self._close_reason = f"a frame exceeded the {self._max_frame}-byte limit"
                    raise ChannelClosed(f"{self.name}: {self._close_reason}")
                if reader.eof:
                    partial = reader.take_partial()
                    if partial.strip():
                        self._garbage.warn("%s: dropped a truncated frame at EOF (%d bytes)", self.name, len(partial))
                    self._closed, self._close_reason = True, self._eof_reason()
                    raise ChannelClosed(f"{self.name}: {self._close_reason}")
                waiter = reader.waiter = reader.loop.create_future()  # until a line, the end or an error
                try:
                    await waiter
                finally:
                    if reader.waiter is waiter:
                        reader.waiter = None
                continue
            line = lines.popleft()
            if reader.paused:
                reader.consumed(len(line) + 1)
            if line[-1:] == b"\r":  # a CR from CRLF peers: the bytes kept for forwarding are exactly the message
                line = line[:-1]
            if line[:1] != b"{" and not line.strip():
                continue
            try:
                return parse(line)
            except ProtocolError as exc:
                answer = await self._not_jsonrpc(line, exc)
                if answer is not None:
                    return answer


async def _feed_from_file(fd: int, reader: asyncio.StreamReader | _Lines) -> None:
    loop = asyncio.get_running_loop()
    while chunk := await loop.run_in_executor(None, os.read, fd, 1 << 16):
        reader.feed_data(chunk)
    reader.feed_eof()


def _is_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


async def open_own_stdio_halves(
    max_frame: int = DEFAULT_MAX_FRAME,
) -> tuple[StreamChannel, StreamChannel, asyncio.Task | None]:
    """hopline's own stdin and stdout as two half channels (receiving, sending, feeder task).

    Separate halves, because output must go on after stdin ends (``printf … | hopline …``
    still wants every answer). Pipes, ttys and regular files all work.
    """
    loop = asyncio.get_running_loop()
    reader = _Lines(limit=max_frame, loop=loop)
    feeder = None
    if _is_file(0):
        feeder = asyncio.create_task(_feed_from_file(0, reader))
    else:
        await loop.connect_read_pipe(lambda: reader, sys.stdin)
    writer: Any
    if _is_file(1):
        writer = _FileWriter(1)
    else:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    receiving = _StdinChannel(reader, None, name="stdio-client", max_frame=max_frame)  # type: ignore[arg-type]
    sending = StreamChannel(asyncio.StreamReader(), writer, name="stdio-client", max_frame=max_frame)
    receiving.replies = sending
    return receiving, sending, feeder
