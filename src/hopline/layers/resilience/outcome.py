"""What happened to one routed call, as resilience sees it (draft §11).

The breaker, the retry layer and the metrics all ask the same question of an
answer or an exception: did the *backend* fail, or did it answer? Only a failure
of the hop itself counts against a backend:

- ``FAILED``: hopline could not get an answer (the connection broke, the process
  exited mid-call, the peer sent garbage, HTTP 5xx from the transport).
- ``TIMEOUT``: the deadline passed without an answer (:class:`BackendTimeout`).
- ``NEVER_SENT``: hopline knows the request never left (no live session, the
  channel was closed before the write, the TCP connect failed). Safe to retry
  for any method.
- ``ANSWERED``: the backend answered with a JSON-RPC error on purpose. It is
  alive; the error is the request's business, not the breaker's.
- ``OK``: a result, including a tool result with ``isError: true``.
- ``REJECTED``: hopline refused the request itself (bad request, circuit open,
  a backend at its child cap, a policy or loop rejection); neutral for the breaker.

Transports turn most hop failures into *error responses* rather than exceptions
(``RpcPeer`` answers every waiting request with ``UnavailableError`` when a
child exits; the HTTP upstream answers a reset or a 5xx the same way), so an
error response is a failure only when it carries one of hopline's own codes
(-31001/-31002/-31003) *and* names this hop's backend (its id, its URL, or the
multiplexer's ``id/era`` name) or no backend at all (``PeerError``). The same
code naming another backend is a deliberate answer from a downstream
intermediary (federation: I' telling us that *its* backend is down), which
must not open our breaker on I' as a whole.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any, Iterable, Mapping

from hopline.jsonrpc import BackendTimeout, HoplineError, Message, PeerError, UnavailableError
from hopline.layers.transport.channel import ChannelClosed

HOPLINE_CODES = frozenset({-31001, -31002, -31003})
TIMEOUT_CODE = BackendTimeout.code
# Reasons that prove the request was never written to the backend. ``connect_failed``
# is what the HTTP upstream should say for httpx.ConnectError (see the report).
NEVER_SENT_REASONS = frozenset({"backend_closed", "backend_unavailable", "connect_failed", "start_failed"})
# hopline's own back-pressure (a backend at its child cap, a listener shedding): the backend did
# nothing wrong, so these are neutral for the breaker, like a circuit that is already open.
BACK_PRESSURE_REASONS = frozenset({"circuit_open", "at_capacity", "overloaded"})


class Outcome(enum.Enum):
    OK = "ok"
    ANSWERED = "answered"
    REJECTED = "rejected"
    NEVER_SENT = "never_sent"
    FAILED = "failed"
    TIMEOUT = "timeout"

    @property
    def is_failure(self) -> bool:
        """Counts against the backend (breaker, error metrics)."""
        # By identity: membership of a set would hash the member (Enum.__hash__ is Python).
        return self is Outcome.NEVER_SENT or self is Outcome.FAILED or self is Outcome.TIMEOUT


class Classifier:
    """Classifies answers and exceptions; knows each backend's names for this hop."""

    __slots__ = ("_names",)

    def __init__(self, names: Mapping[str, Iterable[str]] | None = None) -> None:
        self._names = {backend: frozenset({backend, *extra}) for backend, extra in (names or {}).items()}

    def names(self, backend: str) -> frozenset[str]:
        return self._names.get(backend) or frozenset({backend})

    def answer(self, backend: str, answer: Message) -> Outcome:
        error = answer.body.get("error")
        if error is None:
            return Outcome.OK
        code = error.get("code") if isinstance(error, dict) else None
        if code not in HOPLINE_CODES:
            return Outcome.ANSWERED
        data = error.get("data")
        named = data.get("backend") if isinstance(data, dict) else None
        if named and not self._ours(backend, named):
            return Outcome.ANSWERED  # a downstream intermediary speaking about its own backend
        if code == TIMEOUT_CODE:
            return Outcome.TIMEOUT
        reason = data.get("reason") if isinstance(data, dict) else None
        if reason in BACK_PRESSURE_REASONS:
            return Outcome.REJECTED
        return Outcome.NEVER_SENT if reason == "connect_failed" else Outcome.FAILED

    def _ours(self, backend: str, named: Any) -> bool:
        if not isinstance(named, str):
            return False
        names = self.names(backend)
        return named in names or named.split("/", 1)[0] in names

    def error(self, exc: BaseException) -> Outcome:
        if isinstance(exc, BackendTimeout):
            return Outcome.TIMEOUT
        if isinstance(exc, UnavailableError):
            data = exc.data if isinstance(exc.data, dict) else {}
            reason = data.get("reason")
            if reason in BACK_PRESSURE_REASONS:
                return Outcome.REJECTED
            if reason == "backend_error":
                return Outcome.ANSWERED  # discovery: the backend answered a list with an error
            return Outcome.NEVER_SENT if reason in NEVER_SENT_REASONS else Outcome.FAILED
        if isinstance(exc, PeerError):
            return Outcome.FAILED
        if isinstance(exc, HoplineError):
            return Outcome.REJECTED  # the request was wrong (or a layer refused it)
        if isinstance(exc, ChannelClosed):
            return Outcome.NEVER_SENT  # raised by a send: nothing was written
        if isinstance(exc, asyncio.TimeoutError):
            return Outcome.TIMEOUT  # a gateway-side wait (the list timeout) ran out
        if isinstance(exc, (OSError, EOFError)):
            return Outcome.FAILED  # a transport error that escaped translation
        return Outcome.REJECTED  # a bug in hopline is not the backend's failure

    def __repr__(self) -> str:
        return f"<Classifier {sorted(self._names)}>"
