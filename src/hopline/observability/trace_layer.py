"""Trace context and hop metadata on every forwarded request: one call layer.

For each routed invoke on its way to a backend (draft §12): check the incoming hop
sequence (loop, depth), start this hop's span (parent = the incoming context),
and send the request on with ``_meta`` = the client's ``_meta`` verbatim, plus a
generated ``traceparent`` only if there was none, plus this hop's span context
(``io.hopline/traceparent``), plus the hop sequence with this hop appended. The
client's own dict is never changed: ``call.params`` is replaced, not mutated.
The span ends with the call's outcome. Server→client requests pass untouched.

Records ``call.event("trace", trace_id=…, span_id=…, parent_id=…)`` so that logs,
metrics and audit can name the trace.
"""

from __future__ import annotations

from typing import Any

from hopline.jsonrpc import Message
from hopline.observability.hops import Hops
from hopline.observability.spans import NoSpans, Spans
from hopline.observability.trace import incoming_parent, outgoing
from hopline.pipeline import Call, Next

META = "_meta"


class Propagation:
    __slots__ = ("hops", "spans", "trace", "generate")

    def __init__(
        self, *, hops: Hops | None = None, spans: Spans | None = None, trace: bool = True, generate: bool = True
    ) -> None:
        self.hops = hops
        self.spans: Spans = spans or NoSpans()
        self.trace = trace
        self.generate = generate

    async def __call__(self, call: Call, next: Next) -> Message:
        if call.direction != "to_backend":
            return await next(call)
        params = call.params
        meta: Any = params.get(META)
        if not isinstance(meta, dict):
            meta = {}
        path = self.hops.extended(meta) if self.hops is not None else None  # raises on a loop
        parent = incoming_parent(meta)
        span = self.spans.start(call, parent)
        out = outgoing(meta, span.context, generate=self.generate) if self.trace else dict(meta)
        if path is not None:
            out[self.hops.key] = path  # type: ignore[union-attr]
        call.params = {**params, META: out}
        ctx = span.context
        call.event(
            "trace",
            trace_id=ctx.trace_id,
            span_id=ctx.span_id,
            parent_id=parent.span_id if parent is not None else None,
        )
        try:
            answer = await next(call)
        except BaseException as exc:
            span.end(call, None, exc)
            raise
        span.end(call, answer, None)
        return answer

    def __repr__(self) -> str:
        return f"<Propagation trace={self.trace} hops={self.hops!r} spans={self.spans!r}>"


def trace_of(call: Call) -> dict[str, Any] | None:
    """The ``trace`` event's attributes, if the propagation layer ran for this call."""
    for name, attributes in call.events:
        if name == "trace":
            return attributes
    return None
