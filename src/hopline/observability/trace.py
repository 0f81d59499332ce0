"""W3C Trace Context in METADATA-FIELD (draft §12.1, MCP SEP-414).

Rules this module implements, as pure functions over a ``_meta`` dict:

- ``traceparent`` and ``tracestate`` are propagated **verbatim**: never re-encoded,
  never re-cased, never replaced, even when malformed (the draft forbids altering a
  propagated value in place).
- When a request carries no ``traceparent`` one is **generated** (a new trace, with
  this hop's span as the parent the next hop sees).
- Each hop has its **own span id**; its parent is the incoming context. That
  transformed value cannot travel in ``traceparent`` (that would alter it), so it
  travels separately under :data:`HOP_PARENT` (``io.hopline/traceparent``): the
  next hopline parents its span to it, so two chained hoplines produce one trace
  with both hops. :data:`HOP_PARENT` is hop-scoped: each hop replaces it with its
  own span's context (it is hopline's own key, not a propagated W3C field).
- Parent selection: a valid :data:`HOP_PARENT`, else a valid ``traceparent``,
  else none (a new trace). A malformed ``traceparent`` therefore still travels
  verbatim while this hop starts a fresh trace (test-battery BAD-15).

Ids come from a PRNG seeded from the OS: trace ids are identifiers, not secrets.
"""

from __future__ import annotations

import random
import re
from typing import Any

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
HOP_PARENT = "io.hopline/traceparent"

# version "00" has exactly four fields; a future version may append fields after a "-".
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_ids = random.Random()  # seeded from os.urandom


class SpanContext:
    """A parsed ``traceparent``: trace id, span id (both lower-case hex), flags."""

    __slots__ = ("trace_id", "span_id", "flags")

    def __init__(self, trace_id: str, span_id: str, flags: int = 1) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.flags = flags

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 1)

    def header(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags:02x}"

    def child(self) -> SpanContext:
        """A new span in the same trace (this hop's span, whose parent is ``self``)."""
        return SpanContext(self.trace_id, new_span_id(), self.flags)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpanContext) and (self.trace_id, self.span_id, self.flags) == (
            other.trace_id,
            other.span_id,
            other.flags,
        )

    def __hash__(self) -> int:
        return hash((self.trace_id, self.span_id, self.flags))

    def __repr__(self) -> str:
        return f"<SpanContext {self.header()}>"


def new_trace_id() -> str:
    while True:
        value = f"{_ids.getrandbits(128):032x}"
        if value != _ZERO_TRACE:
            return value


def new_span_id() -> str:
    while True:
        value = f"{_ids.getrandbits(64):016x}"
        if value != _ZERO_SPAN:
            return value


def new_root(sampled: bool = True) -> SpanContext:
    return SpanContext(new_trace_id(), new_span_id(), 1 if sampled else 0)


def parse(value: Any) -> SpanContext | None:
    """The context in a ``traceparent`` value, or None if it is not a valid one."""
    if not isinstance(value, str) or len(value) < 55:
        return None
    m = _TRACEPARENT.fullmatch(value)
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    if version == "00" and rest is not None:
        return None  # version 00 has exactly four fields
    return SpanContext(trace_id, span_id, int(flags, 16))


def incoming_parent(meta: dict[str, Any]) -> SpanContext | None:
    """The context this hop's span is the child of (see the module docstring)."""
    hop, traceparent = meta.get(HOP_PARENT), meta.get(TRACEPARENT)
    found = None if hop is None else parse(hop)  # absent (the common case): no parse call
    if found is None and traceparent is not None:
        found = parse(traceparent)
    return found


def outgoing(meta: dict[str, Any], span: SpanContext, *, generate: bool = True) -> dict[str, Any]:
    """A new ``_meta`` for the next hop: ``meta`` verbatim, plus this hop's span context.

    ``traceparent`` is added only when absent (``generate``); an existing one, valid
    or not, and ``tracestate`` are left exactly as they came. ``meta`` is not changed.
    """
    out = dict(meta)
    header = span.header()
    if generate and TRACEPARENT not in meta:
        out[TRACEPARENT] = header
    out[HOP_PARENT] = header
    return out
