"""The seams where Layers 4, 5 and 7 plug into a gateway (DESIGN §1, draft §6).

A mode is a composition of layers; this module is the small typed contract between
the gateway session (which owns dispatch, routing and sessions) and the layers that
wrap what it does. Three kinds of layer exist:

- :class:`CallLayer` wraps one routed invoke on its way to exactly one backend (and
  one server→client request on its way back to the client). It sees a :class:`Call`
  and the ``next`` step; it may continue (``await next(call)``), mutate
  (``call.params = …`` then continue, or transform the answer it got back), or reject
  (raise a :class:`~hopline.jsonrpc.HoplineError`). Order: the first layer in the list
  is the outermost one. Resilience (timeouts, retries, breakers), policy (the
  interceptor chain, rate limits, DLP, audit) and observability (trace context, hops,
  metrics, spans) are call layers.
- :class:`SurfaceLayer` decides, per caller, whether one backend item (a tool, a
  prompt, a resource or a resource template) is part of that caller's surface. The
  gateway filters every composed list with it *and* refuses any invoke of an item it
  hides, answering exactly as for an item that does not exist: one decision, two
  entry points (seed 001: "filtered at tools/list, enforced at tools/call").
- :class:`BackendGate` withdraws whole backends (a circuit breaker that is OPEN): a
  withdrawn backend is absent from every list and an invoke of it fails fast with
  ``UnavailableError``. When a gate's answer changes it calls the ``changed`` callback
  it was given, and the gateway emits the CHANGE-SIGNAL to every client (§11.1).

Tool modes (Layer 7 progressive disclosure) sit on top of the same pipeline through
:class:`ToolHost`: everything a tool mode reaches goes through surface and call layers.
A :class:`ToolPlan` says which mode shows each backend's tools at one endpoint.

Nothing here does I/O. Everything here is cheap to construct per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Mapping, Protocol, runtime_checkable

from hopline.context import ANONYMOUS, Context, Principal
from hopline.jsonrpc import Message

# "method": a request the gateway does not mediate itself, passed on to the one backend
# (sidecar mode); its name is the method. Policy rules decide on it like on any item.
# "task": a ``tasks/*`` request on a caller's task; its name is the backend's name of the tool
# that created the task and its definition ``{"method": <the tasks method>}``.
Kind = Literal["tool", "prompt", "resource", "resourceTemplate", "method", "task"]
Direction = Literal["to_backend", "to_client"]


@dataclass(slots=True)
class Call:
    """One routed exchange on its way through the call layers.

    ``to_backend``: a client's invoke (``tools/call``, ``prompts/get``,
    ``resources/read``, ``resources/subscribe``/``unsubscribe``,
    ``completion/complete``, ``tasks/*``) resolved to ``backend``; ``target`` is the
    backend's own tool/prompt name or URI, ``exposed`` what the client sent, ``params``
    what will be sent (original names already restored; a layer may replace it).
    ``to_client``: a backend's server→client request (sampling, elicitation, roots)
    on its way to the client whose request caused it; ``backend`` is where it came from.
    """

    method: str
    backend: str
    params: dict[str, Any]
    principal: Principal = ANONYMOUS
    direction: Direction = "to_backend"
    target: str | None = None
    exposed: str | None = None
    session: str = "stateless"
    definition: dict[str, Any] | None = None  # the backend's tool definition (annotations…) for tools/call
    meta: dict[str, Any] = field(default_factory=dict)  # the client's incoming _meta, read-only
    timeout: float | None = None  # seconds; layers may tighten it, the transport enforces it
    context: Context | None = None  # the exchange it belongs to (its deadline is where ``timeout`` came from)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, attributes) for spans/audit
    last: Next | None = field(
        default=None, repr=False, compare=False
    )  # the step after every layer (Pipeline.run sets it)
    # The client whose call it is (to_backend), as the session layer's innermost call layers reach it
    # (layers/session/exchange.py): what it declared, asking and telling it, its progress token's relay.
    client: CallClient | None = field(default=None, repr=False, compare=False)
    request: Message | None = field(default=None, repr=False, compare=False)  # the client's request as it came

    def event(self, name: str, **attributes: Any) -> None:
        self.events.append((name, attributes))


Next = Callable[[Call], Awaitable[Message]]


class CallClient(Protocol):
    """What a call layer may reach of the client whose call it is (a ``GatewaySession``):
    who it is and what it declared, a request to it (sampling, elicitation, roots), a
    notification to it, and a relay of backend progress under its own progress token."""

    principal: Principal
    client_capabilities: dict[str, Any]

    async def ask(self, method: str, params: Any) -> Message: ...

    def notify(self, message: Message) -> None: ...

    def progress_relay(self, token: Any) -> Callable[[Message], None]: ...


@runtime_checkable
class CallLayer(Protocol):
    async def __call__(self, call: Call, next: Next) -> Message: ...


@dataclass(frozen=True, slots=True)
class Item:
    """One backend item as a surface layer judges it (before namespacing)."""

    kind: Kind
    backend: str
    name: str  # the backend's own tool/prompt name, resource URI or URI template
    definition: dict[str, Any]


@runtime_checkable
class SurfaceLayer(Protocol):
    def visible(self, principal: Principal, item: Item) -> bool: ...


@runtime_checkable
class BackendGate(Protocol):
    def available(self, backend: str) -> bool: ...

    def bind(self, changed: Callable[[str], None]) -> None:
        """Called once by the gateway: ``changed(backend)`` whenever ``available`` flips."""


@runtime_checkable
class ToolHost(Protocol):
    """What a tool mode may do for one caller: everything goes through the pipeline."""

    principal: Principal

    async def visible_tools(self) -> list[dict[str, Any]]:
        """The caller's tools as Standard mode would list them (namespaced, filtered)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Call one visible tool by its exposed name; returns the ``CallToolResult``.
        Unknown or hidden names raise ``InvalidParams`` exactly as ``tools/call`` would."""


@runtime_checkable
class ToolMode(Protocol):
    """Layer 7 progressive disclosure: what ``tools/list`` shows and how its tools run."""

    name: str  # "standard", "search", "code"

    async def tools(self, host: ToolHost) -> list[dict[str, Any]]:
        """The tools to list instead of the host's tools."""

    async def call(self, host: ToolHost, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """Run one of the mode's own tools (a ``CallToolResult``), or ``None`` if ``name`` is not one."""


STANDARD = "standard"


@dataclass(frozen=True)
class ToolPlan:
    """How one endpoint shows tools: the mode of each backend. Backends that ``groups``
    does not name take ``default``; Standard is no mode object at all (the catalogue is
    listed), so ``modes`` holds only the Search/Code objects the plan uses."""

    default: str = STANDARD
    groups: Mapping[str, str] = field(default_factory=dict)  # backend id → mode name
    modes: Mapping[str, ToolMode] = field(default_factory=dict)  # mode name → the mode

    @classmethod
    def single(cls, mode: ToolMode | None) -> ToolPlan:
        """Every backend in one mode (``None``: Standard)."""
        return cls() if mode is None else cls(default=mode.name, modes={mode.name: mode})

    @property
    def active(self) -> list[tuple[str, ToolMode]]:
        """The modes whose tools stand in for some backends' tools, in a stable order."""
        return [(name, self.modes[name]) for name in sorted(self.modes)]

    def mode_of(self, backend: str) -> str:
        return self.groups.get(backend, self.default)

    def uniform(self, mode: str) -> bool:
        """Whether every backend is in ``mode`` (no group has another one)."""
        return self.default == mode and all(m == mode for m in self.groups.values())


@dataclass
class Pipeline:
    """The layers a gateway runs, built from configuration."""

    calls: list[CallLayer] = field(default_factory=list)
    surface: list[SurfaceLayer] = field(default_factory=list)
    gates: list[BackendGate] = field(default_factory=list)
    tools: ToolPlan = field(default_factory=ToolPlan)  # the main endpoint's tool modes
    endpoints: dict[str, ToolPlan] = field(default_factory=dict)  # more endpoints' (by path)
    # The layers bound to one another once, for as long as ``calls`` holds the same layers.
    _chain: _Step | None = field(default=None, init=False, repr=False, compare=False)
    _chained: list[CallLayer] = field(default_factory=list, init=False, repr=False, compare=False)

    def plan_for(self, endpoint: str | None) -> ToolPlan:
        """The tool plan of an endpoint (``None``, or one the configuration no longer has: the main one)."""
        return self.tools if endpoint is None else self.endpoints.get(endpoint, self.tools)

    def visible(self, principal: Principal, item: Item) -> bool:
        return all(layer.visible(principal, item) for layer in self.surface)

    def available(self, backend: str) -> bool:
        return all(gate.available(backend) for gate in self.gates)

    def run(self, call: Call, last: Next) -> Awaitable[Message]:
        """Run ``call`` through every call layer, outermost first, ending in ``last``."""
        calls = self.calls
        if not calls:
            return last(call)
        chain = self._chain
        if chain is None or self._chained != calls:  # identical layers compare equal without a call
            chain = None
            for layer in reversed(calls):
                chain = _Step(layer, chain)
            self._chain, self._chained = chain, list(calls)
        call.last = last
        return chain(call)  # type: ignore[misc]


class _Step:
    """One layer bound to the rest of the pipeline (the innermost one to ``call.last``).
    Calling it returns the layer's own coroutine: no wrapper coroutine per layer per call,
    and the steps are built once per pipeline, not per call (bench/profile_call.py: five
    frames fewer per proxied call with the default layers, each time)."""

    __slots__ = ("layer", "next")

    def __init__(self, layer: CallLayer, next_step: _Step | None) -> None:
        self.layer = layer
        self.next = next_step

    def __call__(self, call: Call) -> Awaitable[Message]:
        step = self.next
        return self.layer(call, call.last if step is None else step)  # type: ignore[arg-type]
