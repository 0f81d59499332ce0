"""JSON-RPC 2.0 messages as hopline carries them, and the error tree.

Contract
- ``parse(data)`` turns one frame (bytes) into a :class:`Message` or raises a
  :class:`ProtocolError` (-32700 not JSON, -32600 not a single JSON-RPC message).
- A :class:`Message` keeps the bytes it was parsed from for as long as nobody
  changes it, so forwarding an untouched message costs no re-encoding
  (DESIGN §3.1). Changing one goes through :meth:`Message.replace`, which drops
  the bytes.
- Unknown fields and unknown methods are never dropped: the body dict is the
  message; nothing is validated beyond the envelope.
- orjson reads integers beyond 64 bits as floats. An unmodified message still
  travels as its original bytes; a message hopline must rewrite (an id remapped)
  carries such a number as a float. An id beyond 64 bits is refused (-32600).

Error tree (STYLE habit 4): every error knows its JSON-RPC code and the HTTP
status a Streamable HTTP front end should use. Three families are kept apart:
``ProtocolError`` (the request is wrong), ``UnavailableError`` (a backend cannot
serve it) and ``PeerError`` (a peer broke the protocol). hopline's own codes sit
outside the JSON-RPC reserved band -32768..-32000 (reference/mcp-wire.md §2).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from hopline.context import Principal

JSONRPC = "2.0"

# JSON-RPC ids are strings or integers (never null, never float/bool in MCP).
Id = str | int


class Message:
    """One JSON-RPC message: the decoded body plus, while unmodified, its bytes.

    ``method`` and ``id`` are the body's (None where it has none), read once when the
    message is made: a body is never changed in place (:meth:`replace` makes a new
    message), and as plain attributes they cost no Python call per read (a proxied call
    reads them a dozen times, bench/profile_call.py).

    ``principal`` is who sent it, as the listener's authentication established it
    (layers/policy/auth.py); None where no authentication ran (no ``auth`` configured,
    or a message hopline or a backend made).

    ``deadline`` is the exchange's one deadline (event-loop time, ``loop.time()``), made by
    the listener as the request arrived: the response writer and the gateway's context (hence
    the pipeline's timeouts and the RPC peer) read this one. None: no listener made one (the
    reader then falls back to its own setting, from now).
    """

    __slots__ = ("body", "raw", "principal", "deadline", "method", "id", "params", "_meta")

    def __init__(self, body: dict[str, Any], raw: bytes | None = None) -> None:
        self.body = body
        self.raw = raw
        self.principal: Principal | None = None
        self.deadline: float | None = None
        self.method: str | None = body.get("method")
        self.id: Id | None = body.get("id")
        # The body's params object, or an empty dict where it has none: read once, like method
        # and id (a property was a call or three per read, ~6 reads per proxied call).
        p = body.get("params")
        self.params: dict[str, Any] = p if p.__class__ is dict or isinstance(p, dict) else {}
        self._meta: dict[str, Any] | bool | None = None  # params._meta once found, False once known absent (see meta)

    # -- classification ---------------------------------------------------------

    def is_request(self) -> bool:
        return "method" in self.body and "id" in self.body

    def is_notification(self) -> bool:
        return "method" in self.body and "id" not in self.body

    def is_response(self) -> bool:
        """A result or an error (the answer to a request)."""
        return "method" not in self.body

    @property
    def meta(self) -> dict[str, Any]:
        """``params._meta`` (the body's own dict, found once and kept: a body is not changed
        in place), or a new empty dict where there is none (also known after the first look)."""
        m = self._meta
        if m is not None:
            return {} if m is False else m  # type: ignore[return-value]
        m = self.params.get("_meta")
        if m.__class__ is dict or isinstance(m, dict):
            self._meta = m
            return m
        self._meta = False
        return {}

    # -- encoding ---------------------------------------------------------------
    def encode(self) -> bytes:
        """The wire bytes: the original ones if the message was never changed."""
        if self.raw is None:
            self.raw = orjson.dumps(self.body)
        return self.raw

    def replace(self, **fields: Any) -> Message:
        """A copy with top-level fields replaced (the original is untouched)."""
        body = dict(self.body)
        body.update(fields)
        copy = Message(body)
        copy.principal = self.principal
        copy.deadline = self.deadline
        return copy

    def __repr__(self) -> str:
        kind = "request" if self.is_request() else "notification" if self.is_notification() else "response"
        return f"<Message {kind} id={self.id!r} method={self.method!r}>"


def parse(data: bytes | str) -> Message:
    """Decode one frame into a message, checking only the JSON-RPC envelope."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"Parse error: {exc.msg} at position {exc.pos}") from None
    if body.__class__ is not dict:  # orjson makes plain dicts; anything else is refused below
        if isinstance(body, list):
            raise InvalidRequest("JSON-RPC batches are not supported (removed in MCP 2025-06-18)")
        raise InvalidRequest("a JSON-RPC message must be a JSON object")
    check_envelope(body)
    return Message(body, data if data.__class__ is bytes or isinstance(data, bytes) else None)


# The id of an answer whose JSON is broken, where it can be read without trusting the rest:
# the frame's first or last top-level member. A bounded, simple id only (ASCII, no escapes).
_ID = rb'(-?[0-9]{1,16}|"[ !#-\[\]-~]{1,256}")'
_HEAD_ID = re.compile(rb'\A\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*' + _ID + rb'\s*,\s*"(?:result|error)"\s*:')
_TAIL_ID = re.compile(
    rb'\A\s*\{\s*"(?:result|error)"\s*:.*,\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*' + _ID + rb"\s*\}\s*\Z", re.S
)


def recover_answer_id(frame: bytes) -> Id | None:
    """The id of a frame that :func:`parse` refused, if it is recognisably a response (result or
    error, never a request) and its id can be read safely; else None.

    For the one call a backend broke, so that it gets an answer at once instead of waiting for its
    timeout (issue 13). Invalid UTF-8 is decoded with U+FFFD and the frame parsed again, reading
    only ``id``; malformed JSON yields an id only from the strict head form
    ``{"jsonrpc":"2.0","id":…,"result"|"error":`` or the tail form ``…,"jsonrpc":"2.0","id":…}``.
    Whatever it returns only addresses an error answer to a request in flight on the backend's own
    connection (the backend could have sent that error itself); nothing of the frame is forwarded.
    """
    try:
        body = orjson.loads(frame.decode("utf-8", "replace"))
    except orjson.JSONDecodeError:
        match = _HEAD_ID.match(frame) or _TAIL_ID.match(frame)
        return None if match is None else orjson.loads(match.group(1))
    if (
        not isinstance(body, dict)
        or body.get("jsonrpc") != JSONRPC
        or "method" in body
        or ("result" not in body and "error" not in body)
    ):
        return None
    return _echoable(body.get("id"))


def check_envelope(body: dict[str, Any]) -> None:
    # ``x.__class__ is int/str/dict`` first: the common case without a Python call (bool is not int here)
    msg_id = body.get("id")
    if body.get("jsonrpc") != JSONRPC:
        raise InvalidRequest('"jsonrpc" must be "2.0"', request_id=_echoable(msg_id))
    if "id" in body and not (msg_id.__class__ is int or msg_id.__class__ is str or _valid_id(msg_id)):
        if "method" in body or msg_id is not None:
            raise InvalidRequest("id must be a string or an integer")
    if "method" in body:
        method = body["method"]
        if not (method.__class__ is str or isinstance(method, str)):
            raise InvalidRequest('"method" must be a string', request_id=_echoable(msg_id))
        params = body.get("params")
        if params is not None and not (params.__class__ is dict or isinstance(params, dict)):
            raise InvalidRequest('"params" must be an object', request_id=_echoable(msg_id))
    elif "result" not in body and "error" not in body:
        raise InvalidRequest("neither a request, a notification nor a response", request_id=_echoable(msg_id))


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _echoable(value: Any) -> Id | None:
    return value if _valid_id(value) else None


# -- building messages ------------------------------------------------------------
def request(msg_id: Id, method: str, params: dict[str, Any] | None = None) -> Message:
    body: dict[str, Any] = {"jsonrpc": JSONRPC, "id": msg_id, "method": method}
    if params is not None:
        body["params"] = params
    return Message(body)


def notification(method: str, params: dict[str, Any] | None = None) -> Message:
    body: dict[str, Any] = {"jsonrpc": JSONRPC, "method": method}
    if params is not None:
        body["params"] = params
    return Message(body)


def result(msg_id: Id | None, value: dict[str, Any]) -> Message:
    return Message({"jsonrpc": JSONRPC, "id": msg_id, "result": value})


def error_response(msg_id: Id | None, error: HoplineError) -> Message:
    return Message({"jsonrpc": JSONRPC, "id": msg_id, "error": error.to_error_object()})


# -- the error tree ---------------------------------------------------------------
class HoplineError(Exception):
    """Base of every error hopline answers with. Subclasses fix code and status."""

    code: int = -32603
    http_status: int = 500

    def __init__(self, message: str, *, data: Any = None, request_id: Id | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.request_id = request_id

    def to_error_object(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            obj["data"] = self.data
        return obj

    def to_response(self, msg_id: Id | None = None) -> Message:
        return error_response(msg_id if msg_id is not None else self.request_id, self)


class ProtocolError(HoplineError):
    """The client's message is wrong; retrying it unchanged will fail again."""

    http_status = 400


class ParseError(ProtocolError):
    code = -32700


class InvalidRequest(ProtocolError):
    code = -32600


class MethodNotFound(ProtocolError):
    code = -32601
    http_status = 404


class InvalidParams(ProtocolError):
    code = -32602


class HeaderMismatch(ProtocolError):
    """2026-07-28: a routing header disagrees with the body (or is missing)."""

    code = -32020


class UnsupportedProtocolVersion(ProtocolError):
    code = -32022


class PayloadTooLarge(ProtocolError):
    code = -32600
    http_status = 413


class SessionRequired(ProtocolError):
    """A handshake-era request without ``Mcp-Session-Id`` where one is needed."""

    code = -32600


class SessionNotFound(ProtocolError):
    """Unknown or terminated session: the client must re-initialize (HTTP 404)."""

    code = -32600
    http_status = 404


class Forbidden(ProtocolError):
    """Origin / Host refused (DNS-rebinding protection)."""

    code = -32600
    http_status = 403


class NotAcceptable(ProtocolError):
    code = -32600
    http_status = 406


class UnsupportedMediaType(ProtocolError):
    """A POST whose body is not declared ``application/json`` (415, as both official SDKs answer)."""

    code = -32600
    http_status = 415


class MethodNotAllowed(ProtocolError):
    code = -32600
    http_status = 405


class InternalError(HoplineError):
    """A bug in hopline. The message never carries a traceback."""

    code = -32603
    http_status = 500


class UnavailableError(HoplineError):
    """A backend cannot serve the request; the request itself may be fine.

    Answered with HTTP 200 and a JSON-RPC error, so that clients do not mistake it
    for a transport failure of the gateway itself.
    """

    code = -31001
    http_status = 200

    def __init__(
        self, message: str, *, backend: str = "", reason: str = "unavailable", request_id: Id | None = None
    ) -> None:
        super().__init__(message, data={"backend": backend, "reason": reason}, request_id=request_id)


class BackendTimeout(UnavailableError):
    code = -31002

    def __init__(self, message: str, *, backend: str = "", request_id: Id | None = None) -> None:
        super().__init__(message, backend=backend, reason="timeout", request_id=request_id)


class PeerError(HoplineError):
    """A peer (backend or client) broke the protocol: garbage, unknown ids, overlong frames."""

    code = -31003
    http_status = 502


def malformed_answer_error(backend: str) -> PeerError:
    """The -31003 error for a request whose response arrived but could not be read."""
    text = f"{backend}: backend sent invalid UTF-8 / malformed JSON in its answer to this request"
    return PeerError(text, data={"backend": backend, "reason": "malformed_answer"})


def malformed_answer(backend: str, msg_id: Id) -> Message:
    return malformed_answer_error(backend).to_response(msg_id)


def error_from_response(body: dict[str, Any]) -> dict[str, Any] | None:
    err = body.get("error")
    return err if isinstance(err, dict) else None
