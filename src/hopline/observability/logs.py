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
import time
from typing import Any, Callable, Literal

import orjson

from hopline.jsonrpc import Message
from hopline.observability.kinds import error_code, kind_of
from hopline.observability.propagation import trace_of
from hopline.pipeline import Call, Next

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
        # makeRecord + handle: logger.info() would also walk the stack for the caller's
        # file and line, which a request line does not show (a third of its cost).
        logger = self.logger
        logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, "request", (), None, extra={FIELD: fields}))

    def __repr__(self) -> str:
        return f"<RequestLog {self.logger.name}>"


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
            line += "".join(f" {k}={v}" for k, v in fields.items() if v is not None)
        return line


def _iso(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int((created % 1) * 1000):03d}Z"


FORMATTERS: dict[str, Callable[[], logging.Formatter]] = {"json": JsonFormatter, "console": ConsoleFormatter}


def configure(fmt: Literal["json", "console"] = "console", *, requests: bool = True, root: logging.Logger | None = None) -> None:
    """Use ``fmt`` on every handler of the root logger; switch request lines on or off.

    Also stops ``logging`` from looking up thread and process names for every record:
    neither format shows them, and the look-ups cost more than the line itself."""
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = root or logging.getLogger()
    formatter = FORMATTERS[fmt]()
    for handler in root.handlers:
        handler.setFormatter(formatter)
    REQUESTS.disabled = not requests
