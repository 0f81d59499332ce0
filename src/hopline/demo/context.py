"""What one request looks like to a demo handler: :class:`Request`.

Contract
- The protocol layer (:mod:`hopline.demo.protocol`) builds a ``Request`` after
  the era lock and the 2026-07-28 envelope checks have passed, so a handler
  never re-validates ``_meta``: ``era``, ``version``, ``client_info`` and
  ``client_capabilities`` are already the facts for *this* request.
- Handlers talk back only through :meth:`Request.progress` and
  :meth:`Request.log`, which respect the rules of the era: progress only when
  the request carried ``_meta.progressToken``; ``notifications/message`` only
  when logging was opted into (``logging/setLevel`` in the handshake era, the
  per-request ``io.modelcontextprotocol/logLevel`` in the modern era).
- ``outbox`` is the raw line writer. Only deliberately misbehaving test servers
  (``tests/servers/fault_server.py``) use it directly.

A handler reports a failure the model should see by raising :class:`ToolError`
(answered as a result with ``isError: true``); a request the client got wrong
raises one of :mod:`hopline.jsonrpc`'s protocol errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hopline.binding import Era
from hopline.jsonrpc import Id

# RFC 5424 severities, lowest first, as MCP names them.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class Outbox(Protocol):
    """Where messages to the client go (one JSON object per line)."""

    def send(self, body: dict[str, Any]) -> None: ...

    def send_raw(self, line: bytes) -> None: ...

    async def drain(self) -> None: ...


class ToolError(Exception):
    """A tool failed in a way the caller should read: ``isError: true``."""


@dataclass(slots=True)
class Request:
    id: Id
    method: str
    params: dict[str, Any]
    era: Era
    version: str
    outbox: Outbox
    client_info: dict[str, Any] | None = None
    client_capabilities: dict[str, Any] | None = None
    log_threshold: str | None = None  # None: this request may not log
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def progress_token(self) -> str | int | None:
        token = self.meta.get("progressToken")
        return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Send ``notifications/progress`` if the caller asked for it; say whether it did."""
        token = self.progress_token
        if token is None:
            return False
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.outbox.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        return True

    def log(self, level: str, data: Any, logger: str = "hopline-demo") -> bool:
        """Send ``notifications/message`` if logging is on at ``level``; say whether it did."""
        if self.log_threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_threshold):
            return False
        params = {"level": level, "logger": logger, "data": data}
        self.outbox.send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        return True
