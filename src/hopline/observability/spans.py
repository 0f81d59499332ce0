"""The span interface the propagation layer uses, and its do-nothing implementation.

A *span* here is this hop's share of a trace: it has a :class:`SpanContext` (the
one the next hop sees as its parent) and is ended with the call's outcome.
:class:`NoSpans` only mints ids (what trace propagation needs without an
exporter); :mod:`hopline.observability.otel` records real OpenTelemetry spans.
An absent feature is a real do-nothing implementation, not a flag.
"""

from __future__ import annotations

from typing import Protocol

from hopline.jsonrpc import Message
from hopline.observability.trace import SpanContext, new_root
from hopline.pipeline import Call


class Span(Protocol):
    context: SpanContext

    def end(self, call: Call, answer: Message | None, error: BaseException | None) -> None: ...


class Spans(Protocol):
    def start(self, call: Call, parent: SpanContext | None) -> Span: ...

    def session_ended(self, seconds: float, version: str | None) -> None: ...

    def listening(self, transport: str) -> None: ...

    def close(self) -> None: ...


class _Plain:
    __slots__ = ("context",)

    def __init__(self, context: SpanContext) -> None:
        self.context = context

    def end(self, call: Call, answer: Message | None, error: BaseException | None) -> None:
        pass


class NoSpans:
    """Ids only: a new span id per hop, parent = incoming; nothing recorded."""

    def start(self, call: Call, parent: SpanContext | None) -> Span:
        return _Plain(parent.child() if parent is not None else new_root())

    def session_ended(self, seconds: float, version: str | None) -> None:
        pass

    def listening(self, transport: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "<NoSpans>"
