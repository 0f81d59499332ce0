"""Structured logs: one line per request at INFO, with the trace id; JSON or console.

:class:`RequestLog` is a call layer that writes, for each routed request, one
record on the ``hopline.requests`` logger carrying (as ``record.hopline``)::

    method, backend, tool, kind, code, duration_ms, trace_id, span_id, subject, retries

and nothing else: never params, arguments, results, URLs, tokens or session ids
(error *messages* can name a backend URL, so only the code and kind are logged).
``subject`` is the authenticated principal's subject, an identifier, not a secret.

:func:`configure` installs :class:`JsonFormatter` (one JSON object per line, for log
pipelines) or :class:`ConsoleFormatter` (``key=value`` after the message, for
people) on the root handlers that ``hopline`` set up.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any, Callable, Literal

import orjson

from hopline.jsonrpc import Message
from hopline.observability.kinds import error_code, kind_of
from hopline.observability.trace_layer import trace_of
from hopline.pipeline import Call, Next
from hopline.layers.transport.loop import running_loop

REQUESTS = logging.getLogger("hopline.requests")
FIELD = "hopline"  # the LogRecord attribute holding the structured fields


class RequestLog:
    __slots__ = ("logger", "_clock")

    def __init__(self, logger: logging.Logger = REQUESTS, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.logger = logger
        self._clock = clock

    async def __call__(self, call: Call, next: Next) -> Message:
        if not self.logger.isEnabledFor(logging.INFO):
            return await next(call)
        started = self._clock()
        answer: Message | None = None
        error: BaseException | None = None
        try:
            answer = await next(call)
            return answer
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._write(call, answer, error, self._clock() - started)

    def _write(self, call: Call, answer: Message | None, error: BaseException | None, seconds: float) -> None:
        trace = trace_of(call) or {}
        fields: dict[str, Any] = {
            "method": call.method,
            "backend": call.backend,
            "tool": call.target if call.method in ("tools/call", "prompts/get") else None,
            "kind": kind_of(answer, error),
            "code": error_code(answer, error),
            "duration_ms": round(seconds * 1000, 3),
            "trace_id": trace.get("trace_id"),
            "span_id": trace.get("span_id"),
            "subject": call.principal.subject,
        }
        retries = sum(1 for name, _ in call.events if name == "retry")
        if retries:
            fields["retries"] = retries
        if call.direction != "to_backend":
            fields["direction"] = call.direction
        logger = self.logger
        logger.handle(_record(logger.name, fields))

    def __repr__(self) -> str:
        return f"<RequestLog {self.logger.name}>"


_TEMPLATES: dict[str, dict[str, Any]] = {}


def _record(name: str, fields: dict[str, Any]) -> logging.LogRecord:
    """The request line's record. logger.info() would walk the stack for the caller's file
    and line, which a request line does not show; and every request line has the same
    name, level, message and origin, so its record is a copy of one made once with only the
    time and the fields new (LogRecord.__init__ was ~20 Python calls of the line's cost,
    bench/profile_call.py --log-level info). A record factory someone installed (OpenTelemetry's
    logging instrumentation does) is honoured: then every record is made through it."""
    if logging.getLogRecordFactory() is not logging.LogRecord:
        return logging.getLogger(name).makeRecord(
            name, logging.INFO, __file__, 0, "request", (), None, extra={FIELD: fields}
        )
    template = _TEMPLATES.get(name)
    if template is None:
        template = _TEMPLATES[name] = vars(logging.LogRecord(name, logging.INFO, __file__, 0, "request", (), None))
    record = logging.LogRecord.__new__(logging.LogRecord)
    d = record.__dict__
    d.update(template)
    now = time.time()
    d["created"] = now
    d["msecs"] = int((now - int(now)) * 1000) + 0.0
    d["relativeCreated"] = (now - logging._startTime) * 1000
    d[FIELD] = fields
    return record


class BatchedStream:
    """A log handler's stream (stderr) that, inside the event loop, writes what one loop
    iteration logged in one write at the end of that iteration (``call_soon``) instead of
    one write and flush per line: a request line per call is then not a syscall per call.
    Outside a running loop (start-up, shutdown, another thread) a flush writes at once, so
    nothing is held past ``logging.shutdown``. Order is kept: every line goes through the
    one buffer."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._parts: list[str] = []
        self._scheduled = False
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._parts.append(text)
        return len(text)

    def flush(self) -> None:
        if not self._parts:
            return
        try:
            loop = running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._drain()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._drain_soon)

    def _drain_soon(self) -> None:
        self._scheduled = False
        self._drain()

    def _drain(self) -> None:
        with self._lock:
            parts, self._parts = self._parts, []
            if parts:
                try:
                    self._stream.write("".join(parts))
                    self._stream.flush()
                except (OSError, ValueError):  # stderr closed: nothing to do about it
                    pass

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, ...
        return getattr(self._stream, name)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, then the structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, FIELD, None)
        if isinstance(fields, dict):
            out.update((k, v) for k, v in fields.items() if v is not None)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class ConsoleFormatter(logging.Formatter):
    """The usual line, with the structured fields appended as ``key=value``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, FIELD, None)
        if isinstance(fields, dict):
            line += "".join([f" {k}={v}" for k, v in fields.items() if v is not None])
        return line


def _iso(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int((created % 1) * 1000):03d}Z"


FORMATTERS: dict[str, Callable[[], logging.Formatter]] = {"json": JsonFormatter, "console": ConsoleFormatter}


def configure(
    fmt: Literal["json", "console"] = "console", *, requests: bool = True, root: logging.Logger | None = None
) -> None:
    """Use ``fmt`` on every handler of the root logger; switch request lines on or off.

    Also stops ``logging`` from looking up thread and process names for every record:
    neither format shows them, and the look-ups cost more than the line itself. On the
    process's own root logger, stderr/stdout handlers write through :class:`BatchedStream`
    (one write per loop iteration)."""
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    process_root = root is None
    root = root or logging.getLogger()
    formatter = FORMATTERS[fmt]()
    for handler in root.handlers:
        handler.setFormatter(formatter)
        if process_root and type(handler) is logging.StreamHandler and handler.stream in (sys.stderr, sys.stdout):
            handler.setStream(BatchedStream(handler.stream))
    REQUESTS.disabled = not requests
