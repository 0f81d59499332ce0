"""What a mode is: a composition of layers (draft §6, DESIGN §1).

Each mode module (``hopline/modes/*.py``) declares its :class:`Composition`: for each
draft layer it runs, the module(s) that implement it there and, where modes differ, the
**factory** the composition root calls to build that layer (``Layer.build``). The same
objects are what ``hopline declare`` reports (tier and layers, :mod:`hopline.declaration`)
and what the composition root builds from (``hopline/compose/gateway.py``):

- Layer 2 (Federation only): what it keeps watching while the gateway serves,
  ``watch(config, into)``: the members' declarations ``hopline serve`` lists in its own.
- Layer 3: the routing factory, ``(config, cursors, pass_on=) -> Routes``: namespaced
  (Forward, Federation) or a single backend (Reverse, Sidecar); :attr:`Composition.unknown`
  says what a method the gateway does not know gets: ``"refuse"`` or ``"pass on"`` (Sidecar).
- Layer 4 (optional): ``config -> Resilience`` (breaker, retry, timeouts); a mode that does
  not admit it keeps only the request timeout (the default breaker and retry are not run),
  and a configuration that sets a breaker, a retry or per-method timeouts is refused at
  construction (:meth:`Composition.refused`).
- Layer 5 (optional): ``(config, tap=) -> (surface layers, call layers)``, the policy; a mode
  that does not admit it runs neither, and a configuration with a policy is refused.
- Layer 6: ``hub -> Sharing``, the store of shared backend sessions.

``tests/test_compositions.py`` checks that every module named exists, that a built gateway
holds what its factories made, and ``tests/modes/test_composed_mode.py`` defines a mode of
its own from these parts.

Layers 4 and 5 are *optional*: present when the configuration uses them (a breaker, a
retry, a timeout; rules, auth, an interceptor), absent otherwise, and the declaration then
leaves them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

NAMES = {1: "transport", 2: "discovery", 3: "routing", 4: "resilience", 5: "policy", 6: "session", 7: "capability"}
UNKNOWN = ("refuse", "pass on")  # what a method the gateway does not know gets


@dataclass(frozen=True)
class Layer:
    number: int
    parts: tuple[str, ...]  # modules under ``hopline`` that implement it in this mode
    build: Callable[..., Any] | None = None  # the factory the composition root calls, where modes differ

    @property
    def name(self) -> str:
        return NAMES[self.number]


def layer(number: int, *parts: str, build: Callable[..., Any] | None = None) -> Layer:
    return Layer(number, parts, build)


def in_use(config: Any) -> set[int]:
    """The optional layers (4, 5) a gateway configuration asks for."""
    used = set()
    if getattr(config, "auth", None) is not None or not config.policy.is_empty():
        used.add(5)
    r = config.resilience
    if r.breaker.enabled or r.retry.enabled or r.timeouts.methods or r.timeouts.tools:
        used.add(4)
    return used


def asked(config: Any) -> set[int]:
    """The optional layers the configuration asks for explicitly: Layer 4's breaker and retry
    are on by default, which a mode without Layer 4 simply does not run."""
    used = in_use(config) - {4}
    r = config.resilience
    written = getattr(r, "model_fields_set", set())
    if (
        r.timeouts.methods
        or r.timeouts.tools
        or any(p in written and getattr(r, p).enabled for p in ("breaker", "retry"))
    ):
        used.add(4)
    return used


@dataclass(frozen=True)
class Composition:
    mode: str
    section: str  # the draft section that defines the mode
    handshake: str  # its handshake disposition (§7.1), as declared
    layers: tuple[Layer, ...]
    optional: tuple[Layer, ...] = field(default=())  # present when the configuration uses them
    unknown: str = "refuse"  # a method the gateway does not know: "refuse" or "pass on" (to its one backend)

    def __post_init__(self) -> None:
        if self.unknown not in UNKNOWN:
            raise ValueError(f"{self.mode}: unknown methods are {' or '.join(UNKNOWN)}, not {self.unknown!r}")

    @property
    def numbers(self) -> frozenset[int]:
        return frozenset(part.number for part in self.layers)

    def factory(self, number: int) -> Callable[..., Any] | None:
        """The factory of layer ``number`` (required or optional); None where it has none."""
        return next((part.build for part in (*self.layers, *self.optional) if part.number == number), None)

    def admits(self, number: int) -> bool:
        return any(part.number == number for part in (*self.layers, *self.optional))

    def layers_for(self, config: Any) -> set[int]:
        """The draft layers a gateway built from ``config`` runs: the required ones, and the
        optional ones the configuration uses."""
        return set(self.numbers) | {n for n in in_use(config) if self.admits(n)}

    def refused(self, config: Any) -> str | None:
        """Why this composition cannot serve ``config`` (it asks for a layer the mode does not
        admit), or None."""
        missing = sorted(n for n in asked(config) if not self.admits(n))
        if not missing:
            return None
        names = ", ".join(f"{n} ({NAMES[n]})" for n in missing)
        return f"mode {self.mode} has no layer {names}; remove its settings from the configuration"
