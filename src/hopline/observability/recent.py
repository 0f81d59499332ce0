"""Recent calls, in memory, for the admin page and ``/status``: bounded rings, no secrets.

:class:`Recent` keeps, per backend, its last :data:`DURATIONS` calls as samples (when,
seconds, ok): their median is the ``p50`` that ``/status`` shows, the last
:data:`SERIES` of them are the points of the page's latency and error-rate charts;
its call and error counts and its last error (kind, code, when); and, for the whole
gateway, the last :data:`REQUESTS` requests (when, backend, method, tool, kind, code,
milliseconds, subject, policy decision). It holds what the request log writes
(logs.py) and the audit log's decision fields, nothing more: never params, arguments,
results, URLs, tokens or session ids. :class:`~hopline.observability.metrics.Metrics`
feeds it from the call it already measures, so it costs a few appends per call, and
only where the admin listener is on.

Policy decisions come from the audit log (layers/policy/audit.py) through its ``tap``
(:meth:`Recent.audit`): a ``call`` record written while the metrics layer measures a
call (the interceptor chain runs inside it) is that call's decision, found through
:data:`DECIDED`, a context variable the metrics layer sets per call; a ``call`` record
written outside any measured call is an invoke the gateway refused before the call
layers (its visibility check) and is listed as a request of its own, kind ``denied``.
"""

from __future__ import annotations

import collections
import contextvars
import statistics
import time
from typing import Any, Callable

DURATIONS = 256  # per backend: the window the p50 is taken over
SERIES = 60  # per backend: the samples the charts show
REQUESTS = 100  # the whole gateway: the requests the page lists
MAX_BY = 8  # interceptor names kept per decision (mutations)

# Set by the metrics layer around one call: the audit records written meanwhile.
DECIDED: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("hopline_decided", default=None)


class _Backend:
    __slots__ = ("samples", "calls", "errors", "last_error", "last_ok")

    def __init__(self) -> None:
        self.samples: collections.deque[tuple[float, float, bool]] = collections.deque(maxlen=DURATIONS)
        self.calls = 0
        self.errors = 0
        self.last_error: dict[str, Any] | None = None
        self.last_ok: float | None = None


def decision_of(record: dict[str, Any]) -> dict[str, Any]:
    """The decision fields of an audit ``call`` record (already scrubbed by the audit log)."""
    out: dict[str, Any] = {"decision": record.get("decision", "allow")}
    for key in ("by", "point", "reason"):
        if record.get(key) is not None:
            out[key] = record[key]
    mutated = [m.get("by") for m in record.get("mutations") or () if isinstance(m, dict)]
    if mutated:
        out["mutated_by"] = mutated[:MAX_BY]
    shadow = [s.get("by") for s in record.get("shadow") or () if isinstance(s, dict)]
    if shadow:
        out["shadow_by"] = shadow[:MAX_BY]
    return out


class Recent:
    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._backends: dict[str, _Backend] = {}
        self.requests: collections.deque[tuple] = collections.deque(maxlen=REQUESTS)

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
        ok = kind == "ok" or kind == "tool_error"
        b.samples.append((now, seconds, ok))
        b.calls += 1
        if ok:
            b.last_ok = now
        else:
            b.errors += 1
            b.last_error = {"at": now, "method": method, "kind": kind, "code": code}
        decided = DECIDED.get()
        decision = decision_of(decided[-1]) if decided else None
        self.requests.append(
            (now, backend, method, tool, kind, code, seconds, subject, decision)
        )  # a tuple: made into a dict when read

    def audit(self, record: dict[str, Any]) -> None:
        """The audit log's tap: keep a ``call`` record's decision for the request it belongs to."""
        if record.get("event") != "call":
            return
        decided = DECIDED.get()
        if decided is not None:  # inside a measured call: add() takes it
            decided.append(record)
            return
        outcome = str(record.get("outcome", ""))
        code = outcome[6:] if outcome.startswith("error ") else ""
        self.requests.append(
            (
                self._clock(),
                str(record.get("backend", "")),
                str(record.get("method", "")),
                record.get("target"),
                "denied" if record.get("decision") == "deny" else "error",
                int(code) if code.lstrip("-").isdigit() else None,
                0.0,
                record.get("principal"),
                decision_of(record),
            )
        )

    def backend(self, backend: str) -> dict[str, Any]:
        """``calls``, ``errors``, ``p50_ms`` (None before a call), ``last_error``, ``last_ok``."""
        b = self._backends.get(backend)
        if b is None:
            return {"calls": 0, "errors": 0, "p50_ms": None, "last_error": None, "last_ok": None}
        p50 = round(statistics.median(s for _, s, _ in b.samples) * 1000, 3) if b.samples else None
        return {"calls": b.calls, "errors": b.errors, "p50_ms": p50, "last_error": b.last_error, "last_ok": b.last_ok}

    def series(self, backend: str) -> list[list[Any]]:
        """The chart points: the last :data:`SERIES` calls as ``[at, ms, ok]``, oldest first."""
        b = self._backends.get(backend)
        if b is None:
            return []
        samples = list(b.samples)[-SERIES:]
        return [[at, round(seconds * 1000, 3), ok] for at, seconds, ok in samples]

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
                "decision": decision,
            }
            for at, backend, method, tool, kind, code, seconds, subject, decision in reversed(self.requests)
        ]

    def __repr__(self) -> str:
        return f"<Recent backends={len(self._backends)} requests={len(self.requests)}>"
