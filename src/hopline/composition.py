"""What a mode is: a composition of layers (draft §6, DESIGN §1).

Each mode module (``hopline/modes/*.py``) declares its :class:`Composition`: for each
draft layer it runs, the module(s) that implement it there. The same list is what
``hopline declare`` reports (tier and layers, :mod:`hopline.declaration`) and what the
composition root builds (``hopline/compose/``); ``tests/test_compositions.py`` checks
that every module named exists and that a built gateway holds an object of each layer.

Layers 4 (resilience) and 5 (policy) are *optional*: present when the configuration
uses them (a breaker, a retry, a timeout; rules, auth, an interceptor), absent otherwise,
and the declaration then leaves them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NAMES = {1: "transport", 2: "discovery", 3: "routing", 4: "resilience", 5: "policy", 6: "session", 7: "capability"}


@dataclass(frozen=True)
class Layer:
    number: int
    parts: tuple[str, ...]  # modules under ``hopline`` that implement it in this mode

    @property
    def name(self) -> str:
        return NAMES[self.number]


def layer(number: int, *parts: str) -> Layer:
    return Layer(number, parts)


@dataclass(frozen=True)
class Composition:
    mode: str
    section: str  # the draft section that defines the mode
    handshake: str  # its handshake disposition (§7.1), as declared
    layers: tuple[Layer, ...]
    optional: tuple[Layer, ...] = field(default=())  # present when the configuration uses them

    @property
    def numbers(self) -> frozenset[int]:
        return frozenset(part.number for part in self.layers)


# The gateway modes share one stack; they differ in how Layer 3 routes (namespaced or
# not, unknown methods passed on or refused) and in what Layer 2 watches (federation).
GATEWAY_OPTIONAL = (
    layer(4, "layers.resilience", "compose.resilience"),
    layer(5, "layers.policy", "compose.policy"),
)


def gateway_layers(routing: str, discovery: tuple[str, ...] = ()) -> tuple[Layer, ...]:
    return (
        layer(
            1, "compose.connectors", "transports.streamable_http_server", "transports.sse_server", "transports.stdio"
        ),
        layer(2, "layers.discovery.registry", "layers.discovery.backend", *discovery),
        layer(3, "layers.routing.tables", routing),
        layer(6, "layers.session.gateway_session", "layers.session.links", "layers.session.sharing"),
        layer(7, "layers.capability.lists", "layers.capability.compose", "compose.toolmodes"),
    )
