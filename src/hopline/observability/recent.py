"""Recent calls, in memory, for the admin page and ``/status``: bounded rings, no secrets.

:class:`Recent` keeps, per backend, the durations of its last :data:`DURATIONS` calls
(their median is the ``p50`` that ``/status`` shows), its call and error counts and its
last error (kind, code, when); and, for the whole gateway, the last :data:`REQUESTS`
requests (when, backend, method, tool, kind, code, milliseconds, subject). It holds
what the request log writes (logs.py) and nothing more: never params, arguments,
results, URLs, tokens or session ids. :class:`~hopline.observability.metrics.Metrics`
feeds it from the call it already measures, so it costs a few appends per call, and
only where the admin listener is on.
"""

from __future__ import annotations

import collections
import statistics
import time
from typing import Any, Callable

DURATIONS = 256  # per backend: the window the p50 is taken over
REQUESTS = 100  # the whole gateway: the requests the page lists


class _Backend:
    __slots__ = ("durations", "calls", "errors", "last_error", "last_ok")

    def __init__(self) -> None:
        self.durations: collections.deque[float] = collections.deque(maxlen=DURATIONS)
        self.calls = 0
        self.errors = 0
        self.last_error: dict[str, Any] | None = None
        self.last_ok: float | None = None


class Recent:
    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._backends: dict[str, _Backend] = {}
        self.requests: collections.deque[dict[str, Any]] = collections.deque(maxlen=REQUESTS)

    def add(
        self,
        backend: str,
        method: str,
        tool: str | None,
        kind: str,
        code: int | None,
        seconds: float,
        subject: str | None,
    ) -> None:
        b = self._backends.get(backend)
        if b is None:
            if len(self._backends) >= 10_000:  # backend ids are the operator's; bounded all the same
                return
            b = self._backends[backend] = _Backend()
        now = self._clock()
        b.durations.append(seconds)
        b.calls += 1
        if kind == "ok" or kind == "tool_error":
            b.last_ok = now
        else:
            b.errors += 1
            b.last_error = {"at": now, "method": method, "kind": kind, "code": code}
        self.requests.append(
            (now, backend, method, tool, kind, code, seconds, subject)
        )  # a tuple: made into a dict when read

    def backend(self, backend: str) -> dict[str, Any]:
        """``calls``, ``errors``, ``p50_ms`` (None before a call), ``last_error``, ``last_ok``."""
        b = self._backends.get(backend)
        if b is None:
            return {"calls": 0, "errors": 0, "p50_ms": None, "last_error": None, "last_ok": None}
        p50 = round(statistics.median(b.durations) * 1000, 3) if b.durations else None
        return {"calls": b.calls, "errors": b.errors, "p50_ms": p50, "last_error": b.last_error, "last_ok": b.last_ok}

    def recent_requests(self) -> list[dict[str, Any]]:
        """The last requests, newest first."""
        return [
            {
                "at": at,
                "backend": backend,
                "method": method,
                "tool": tool or None,
                "kind": kind,
                "code": code,
                "ms": round(seconds * 1000, 3),
                "subject": subject,
            }
            for at, backend, method, tool, kind, code, seconds, subject in reversed(self.requests)
        ]

    def __repr__(self) -> str:
        return f"<Recent backends={len(self._backends)} requests={len(self.requests)}>"
