"""Layer 5's visibility decision, as the gateway's lists and invokes consult it.

The surface layers (CEL rules, tool pinning) decide per caller whether an item is part
of that caller's surface; :func:`surface_key` is what their decisions depend on for a
caller now (the claims they read), so a filtered list can be cached per key (the lists'
filtering is the catalogue's, ``layers/capability/lists.py``). An invoke of a hidden item
is refused exactly as an unknown one by the :class:`Visibility` call layer, the first of
the pipeline, and :func:`refused` has the audit interceptor record it.
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

from hopline.binding import PROMPTS_GET, RESOURCES_READ, TOOLS_CALL
from hopline.context import Principal
from hopline.jsonrpc import HoplineError, InvalidParams, Message
from hopline.layers.policy.chain import InterceptorChain
from hopline.pipeline import Call, CallLayer, Item, Kind, Next, SurfaceLayer

_SUBSCRIPTIONS = ("resources/subscribe", "resources/unsubscribe")


class Hidden(InvalidParams):
    """An invoke of an item the caller's surface hides, answered as an unknown name. Its own
    type so that a mode answering unknown names with the backend's own words (Reverse,
    Sidecar: ``GatewaySession._as_unknown``) can tell it from a name that is truly unknown."""


def refused(calls: Sequence[CallLayer], call: Call, error: HoplineError) -> None:
    """Audit an invoke refused by the gateway's own visibility check (no-op without audit)."""
    for layer in calls:
        if isinstance(layer, InterceptorChain):
            layer.refused(call, error)


def surface_key(surface: Sequence[SurfaceLayer], principal: Principal) -> tuple[Hashable, ...]:
    """Everything the policy surface layers' decisions depend on for ``principal`` now."""
    return tuple(layer.decision_key(principal) for layer in surface if hasattr(layer, "decision_key"))


def judged(call: Call) -> tuple[Item, str, str] | None:
    """The item an invoke acts on as the lists showed it, what the client named it, and what
    to call it in the error (``None``: not an invoke of a listed item, e.g. ``tasks/*``)."""
    method = call.method
    if method == TOOLS_CALL or method == PROMPTS_GET:
        name = call.target
        if name is None:
            return None
        kind: Kind = "tool" if method == TOOLS_CALL else "prompt"
        return Item(kind, call.backend, name, call.definition or {}), call.exposed or name, kind
    if method == RESOURCES_READ or method in _SUBSCRIPTIONS:
        uri = call.target
        return (
            None
            if uri is None
            else (Item("resource", call.backend, uri, {"uri": uri}), call.exposed or uri, "resource")
        )
    if method == "completion/complete":
        ref: Any = call.params.get("ref")
        if not isinstance(ref, dict):
            return None
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            name = ref["name"]
            return Item("prompt", call.backend, name, call.definition or {}), call.exposed or name, "prompt"
        if isinstance(ref.get("uri"), str):
            uri = ref["uri"]
            item = Item("resourceTemplate", call.backend, uri, {"uriTemplate": uri})
            return item, call.exposed or uri, "resource"
    return None


class Visibility:
    """The call layer refusing an invoke of an item the surface layers hide, answered exactly as
    an unknown name (:class:`Hidden`) and audited by the interceptor chain among ``audit``.
    Built only where the policy has surface layers; first in the pipeline, so a hidden item is
    answered before anything is traced, counted or limited, as one that does not exist is."""

    name = "visibility"

    def __init__(self, surface: Sequence[SurfaceLayer], audit: Sequence[CallLayer] = ()) -> None:
        self.surface = list(surface)
        self.audit = list(audit)

    async def __call__(self, call: Call, next: Next) -> Message:
        if call.direction == "to_backend":
            found = judged(call)
            if found is not None:
                item, shown, what = found
                principal = call.principal
                for layer in self.surface:
                    if not layer.visible(principal, item):
                        asked = None if call.context is None else call.context.request_id
                        error = Hidden(f"Unknown {what}: {shown!r}", request_id=asked)
                        refused(self.audit, call, error)
                        raise error
        return await next(call)

    def __repr__(self) -> str:
        return f"<Visibility {[type(s).__name__ for s in self.surface]}>"
