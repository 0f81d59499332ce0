"""One word for how a call ended, shared by metrics, logs and spans.

``ok``; ``tool_error`` (a result with ``isError: true``: the tool ran and said no);
``error`` (a JSON-RPC error the backend answered); ``unavailable``, ``timeout``,
``peer`` (hopline's own -31001/-31002/-31003, whoever made them); ``circuit_open``;
``rejected`` (hopline refused the request: bad params, loop, policy);
``cancelled`` (the client gave up); ``internal`` (a bug). A closed set, so it can
be a metric label.
"""

from __future__ import annotations

import asyncio

from hopline.jsonrpc import BackendTimeout, HoplineError, Message, PeerError, UnavailableError

KINDS = (
    "ok",
    "tool_error",
    "error",
    "unavailable",
    "timeout",
    "peer",
    "circuit_open",
    "rejected",
    "cancelled",
    "internal",
)
_BY_CODE = {-31001: "unavailable", -31002: "timeout", -31003: "peer"}


def kind_of(answer: Message | None, error: BaseException | None) -> str:
    if error is not None:
        if isinstance(error, BackendTimeout):
            return "timeout"
        if isinstance(error, UnavailableError):
            data = error.data if isinstance(error.data, dict) else {}
            return "circuit_open" if data.get("reason") == "circuit_open" else "unavailable"
        if isinstance(error, PeerError):
            return "peer"
        if isinstance(error, HoplineError):
            return "rejected"
        if isinstance(error, asyncio.TimeoutError):
            return "timeout"  # a gateway-side wait (the list timeout) ran out
        if isinstance(error, asyncio.CancelledError):
            return "cancelled"
        return "internal"
    body = answer.body if answer is not None else {}
    err = body.get("error")
    if err is not None:
        code = err.get("code") if isinstance(err, dict) else None
        return _BY_CODE.get(code, "error")  # type: ignore[arg-type]
    result = body.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return "tool_error"
    return "ok"


def error_code(answer: Message | None, error: BaseException | None) -> int | None:
    if isinstance(error, HoplineError):
        return error.code
    err = answer.body.get("error") if answer is not None else None
    code = err.get("code") if isinstance(err, dict) else None
    return code if isinstance(code, int) else None
