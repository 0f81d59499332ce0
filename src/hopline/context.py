"""Who is calling, and the context of one exchange.

:class:`Principal` is the caller as the authentication layer established it;
:class:`Authenticator` is what a listener asks of that layer. :class:`Context` is
the per-exchange context: it is made once when a client's request reaches its
session (the listener has authenticated it), and passed explicitly down the layers
(never looked up from a context variable). An exchange has one deadline, fixed as it
arrives; the call layers and the backend call read what is left of it
(:meth:`Context.remaining`) for their timeout.

Nothing here does I/O; this module imports only the standard library and
:mod:`hopline.binding`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hopline.binding import Era


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling, as the authentication layer established it.

    ``subject`` is stable per caller (the JWT ``sub``, an API key's name, or
    ``"anonymous"``/``"local"`` where no authentication is configured). ``claims`` is the
    verified claim set (CEL sees it as ``jwt``). ``token`` is the raw credential and is
    only ever read by token propagation configured as passthrough or exchange; it never
    appears in ``repr``, logs, metrics or audit records.
    """

    subject: str
    claims: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    scopes: frozenset[str] = frozenset()
    issuer: str | None = None
    token: str | None = field(default=None, repr=False, hash=False, compare=False)

    @property
    def key(self) -> tuple[str | None, str]:
        """What a session is bound to and what per-identity caches are keyed by."""
        return (self.issuer, self.subject)


ANONYMOUS = Principal("anonymous")


def principal_fields(principal: Principal, session: str | None = None) -> dict[str, Any]:
    """Who asks, as plain data another replica can act on (never the token), and the
    client session the request belongs to (tasks of anonymous callers are bound to it)."""
    return {
        "subject": principal.subject,
        "claims": principal.claims,
        "scopes": sorted(principal.scopes),
        "issuer": principal.issuer,
        "session": session,
    }


def principal_of(fields: dict[str, Any]) -> Principal:
    """The :class:`Principal` :func:`principal_fields` described (without a token)."""
    claims = fields.get("claims")
    return Principal(
        str(fields.get("subject", "anonymous")),
        claims=claims if isinstance(claims, dict) else {},
        scopes=frozenset(str(s) for s in fields.get("scopes") or ()),
        issuer=fields.get("issuer") if isinstance(fields.get("issuer"), str) else None,
    )


@dataclass(slots=True)
class Context:
    """One exchange's context: made once as a request reaches the client session
    (``GatewaySession.context``), passed explicitly to the handler, the call layers
    (``Call.context``) and a tool mode's inner calls, which share its deadline.

    ``principal``: who is calling. ``session``: the client session the exchange belongs
    to (``None`` for a stateless exchange). ``era``: the protocol era it was made in.
    ``deadline``: the event-loop time (``loop.time()``) by which the exchange must have
    been answered, one per exchange (``None``: no deadline). ``hops``: the hop sequence
    (draft §12.2; one ``dict`` per intermediary, see :mod:`hopline.observability.hops`).
    ``trace``: the W3C ``traceparent`` the exchange arrived with, or ``None``.
    ``request_id``: the client's JSON-RPC id. ``protocol_version``: the MCP version the
    exchange is in (the negotiated one, or the request's own in the 2026-07-28 era), if known.
    """

    principal: Principal = ANONYMOUS
    session: str | None = None
    era: Era = Era.HANDSHAKE
    deadline: float | None = None
    hops: list[dict[str, Any]] = field(default_factory=list)
    trace: str | None = None
    request_id: Any = None
    protocol_version: str | None = None

    def remaining(self, now: float) -> float | None:
        """Seconds left before the deadline at loop time ``now`` (never negative), or ``None``."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - now)


class Refusal(Protocol):
    """An authentication layer's refusal, as a listener answers it (its ``AuthError``)."""

    status: int
    description: str

    def body(self) -> bytes: ...

    def headers(self, metadata_url: str) -> dict[str, str]: ...


class Authenticator(Protocol):
    """What a listener asks of the authentication layer (``hopline.layers.policy.auth``):
    the caller of a request, or the refusal to answer with; and the RFC 9728 protected
    resource metadata it serves, unauthenticated, at ``metadata_paths``."""

    metadata_url: str

    def metadata(self) -> dict[str, Any]: ...

    def metadata_paths(self, *local_paths: str) -> frozenset[str]: ...

    async def check(self, headers: Any, query: bytes = b"") -> Principal | Refusal: ...
