"""What an interceptor sees and returns (the SEP-1763 shape; ``chain.py`` runs them).

The four points, each a frozen view holding exactly what an interceptor may see at that
point: :class:`PreRoute` (the call as the client named it), :class:`PostRoute` (routed:
backend, the backend's own name, the params it will receive), :class:`PreResponse` (plus
the answer) and :class:`PostResponse` (plus the chain's decision; observe only). A hook
returns ``None``/:data:`CONTINUE`, :func:`mutate` (new params or result) or
:func:`reject` (an error for the client). Operators write interceptors against this
module alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from hopline.context import Principal
from hopline.jsonrpc import HoplineError, Message
from hopline.pipeline import Direction


class PolicyDenied(HoplineError):
    """An interceptor refused the request. (Proposed for jsonrpc.py's error tree.)"""

    code = -31005
    http_status = 200  # a JSON-RPC answer to a well-formed request, like UnavailableError


# -- the four views ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PreRoute:
    direction: Direction
    method: str
    name: str | None  # what the client named (exposed tool/prompt name or URI)
    params: dict[str, Any]
    meta: dict[str, Any]
    principal: Principal
    session: str


@dataclass(frozen=True, slots=True)
class PostRoute:
    direction: Direction
    method: str
    name: str | None
    backend: str
    target: str | None  # the backend's own name or URI
    params: dict[str, Any]  # what the backend (or, to_client, the client) will receive
    meta: dict[str, Any]
    principal: Principal
    session: str
    definition: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class PreResponse(PostRoute):
    answer: Message

    @property
    def result(self) -> dict[str, Any] | None:
        value = self.answer.body.get("result")
        return value if isinstance(value, dict) else None

    @property
    def error(self) -> dict[str, Any] | None:
        value = self.answer.body.get("error")
        return value if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class PostResponse(PreResponse):
    decision: str  # "allow" or "deny" (the chain refused it)


# -- decisions ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Decision:
    action: Literal["continue", "mutate", "reject"]
    value: Any = None  # mutate: the new params / result / error object
    error: HoplineError | None = None  # reject: what the client receives
    reason: str = ""  # for the audit log (scrubbed, never shown to the client)
    details: Mapping[str, Any] = field(default_factory=dict)  # audit-safe facts (no secrets)


CONTINUE = Decision("continue")


def mutate(value: dict[str, Any], *, reason: str = "", **details: Any) -> Decision:
    return Decision("mutate", value=value, reason=reason, details=details)


def reject(error: HoplineError | str, *, reason: str = "", **details: Any) -> Decision:
    err = error if isinstance(error, HoplineError) else PolicyDenied(error)
    return Decision("reject", error=err, reason=reason or err.message, details=details)
