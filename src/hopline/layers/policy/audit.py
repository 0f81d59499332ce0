"""The audit log (Layer 5; draft §6.5 "Output: the message … plus an audit record").

Contract
- In: records from the interceptor chain (one per routed call, whatever became of it),
  from tool pinning (first pins, rug pulls, shadowing and allowlist refusals) and,
  when ``audit.lists`` is on, from the CEL policy (each visibility decision the first
  time it is computed for an identity).
- Out: one JSON object per line, to a file (appended with one ``write`` per record,
  so lines from several processes never interleave; created ``0600``), to stdout or
  to stderr. Fields, in this order, absent when empty::

      time        RFC 3339 UTC, milliseconds
      event       call | visibility | pin | rug_pull | shadowing | allowlist | new_tool
      decision    allow | deny | hide | pin | flag | withhold
      reason      why, in words (scrubbed, at most 300 characters)
      principal   the caller's subject; issuer: who vouched for it
      direction   to_backend | to_client
      method, backend, target, kind
      trace_id    the 32 hex digits of the W3C traceparent in the request's _meta
      by, point   the interceptor that decided and at which of the four points
      details     audit-safe facts of that decision (e.g. rate limiting's retryAfter)
      mutations   [{by, point, reason, …details}] e.g. DLP's {"redacted": {"aws_access_key": 1}}
      shadow      decisions of interceptors in audit mode, recorded but not applied
      outcome     ok | tool_error | error <code> | cancelled
      duration_ms

- Never: a token, a credential, an argument value, a result, a session id. Only the
  fields above are written; the principal appears by subject; a target URI loses its
  query and fragment (they can carry tokens); free text (reasons, interceptor
  details) is cut to 300 characters and passed through the DLP built-in patterns.
- A failing sink (disk full) never fails a call: the error is logged once per outage.
- ``tap``: a callable also handed each record (as the dict written) — the admin page's
  recent requests (observability/recent.py); with no sink (``write`` None) it is the
  only reader. A tap that raises is ignored like a failing sink.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

import orjson

from hopline.layers.policy.dlp import BUILTINS

log = logging.getLogger("hopline.audit")

MAX_TEXT = 300
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")
_SCRUB: list[tuple[str, re.Pattern[str]]] = []
_FILES: dict[str, int] = {}


def trace_id_of(meta: Mapping[str, Any] | None) -> str | None:
    """The trace id of a valid W3C ``traceparent`` in ``_meta`` (None otherwise)."""
    value = meta.get("traceparent") if meta else None
    if not isinstance(value, str):
        return None
    m = _TRACEPARENT.fullmatch(value.strip())
    if m is None or m.group(1) == "0" * 32:
        return None
    return m.group(1)


def scrub(text: Any) -> str:
    """Free text safe for the log: bounded, with anything secret-shaped redacted."""
    text = str(text)[:MAX_TEXT]
    if not _SCRUB:
        _SCRUB.extend((name, re.compile(rx)) for name, rx in BUILTINS.items())
        _SCRUB.insert(0, ("", re.compile("|".join(f"(?:{rx})" for rx in BUILTINS.values()))))
    if _SCRUB[0][1].search(text) is None:
        return text
    for name, rx in _SCRUB[1:]:
        text = rx.sub(f"[REDACTED:{name}]", text)
    return text


def safe_target(target: str | None) -> str | None:
    """A tool name as is; a URI without its query and fragment (which may hold tokens)."""
    if target is None:
        return None
    cut = min((i for i in (target.find("?"), target.find("#")) if i >= 0), default=-1)
    return scrub(target if cut < 0 else target[:cut] + "?…")


class AuditLog:
    """Writes audit records; ``write`` takes one encoded line (tests pass ``list.append``)."""

    def __init__(
        self,
        write: Callable[[bytes], Any] | None,
        *,
        clock: Callable[[], float] = time.time,
        name: str = "audit",
        tap: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self._write = write
        self.tap = tap
        self._clock = clock
        self._name = name
        self._failing = False

    @classmethod
    def open(cls, sink: str, *, clock: Callable[[], float] = time.time) -> AuditLog:
        """``stdout``, ``stderr`` or a file path (appended; created with mode 0600)."""
        if sink in ("stdout", "stderr"):
            stream = sys.stdout if sink == "stdout" else sys.stderr

            def write(line: bytes) -> None:
                stream.buffer.write(line)
                stream.buffer.flush()

            return cls(write, clock=clock, name=sink)
        path = os.path.realpath(os.path.expanduser(sink))
        fd = _FILES.get(path)
        if fd is None:  # one descriptor per file for the process's life: reloads reuse it
            fd = _FILES[path] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return cls(lambda line: os.write(fd, line), clock=clock, name=sink)

    def record(self, event: str, **fields: Any) -> None:
        """Write one record; ``None`` and empty fields are left out."""
        rec: dict[str, Any] = {"time": _rfc3339(self._clock()), "event": event}
        for key, value in fields.items():
            if value is not None and value != [] and value != {}:
                rec[key] = value
        if self.tap is not None:
            try:
                self.tap(rec)
            except Exception:  # the page's copy must never take a call down either
                log.debug("audit tap failed", exc_info=True)
        if self._write is None:
            return
        try:
            self._write(orjson.dumps(rec, default=str) + b"\n")
        except Exception as exc:  # the log must never take a call down with it
            if not self._failing:
                log.error("audit sink %s failed: %s (records are being lost)", self._name, type(exc).__name__)
            self._failing = True
        else:
            if self._failing:
                log.warning("audit sink %s works again", self._name)
            self._failing = False

    def __repr__(self) -> str:
        return f"<AuditLog {self._name}{' failing' if self._failing else ''}>"


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
