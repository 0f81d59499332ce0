"""The interceptor chain: Layer 5 as one call layer (draft §6.5, SEP-1763 shape).

Contract
- In: a routed :class:`~hopline.pipeline.Call` in either direction —
  ``to_backend`` (a client's invoke on its way to one backend) or ``to_client`` (a
  backend's sampling / elicitation / roots request on its way to the client whose
  request caused it) — and the ``next`` step.
- Out: the answer, possibly mutated, or a :class:`~hopline.jsonrpc.HoplineError`; and
  one audit record per call, whatever became of it (audit.py).

The four points, each a frozen view holding exactly what an interceptor may see:

==============  ==========================================================================
pre-route       :class:`PreRoute`: the request as the client named it (``name`` is the
                exposed name), no backend yet. Routing in hopline is a pure lookup done
                by the gateway session before the call layers run, so pre-route runs at
                the chain's entry, before anything is sent anywhere; the view hides the
                routing result, and a mutation cannot re-route: ``name``, ``uri``,
                ``ref`` and ``taskId`` are restored if an interceptor changes them.
                Lists never pass through call layers (their filtering is the surface
                layers' job), so pre-route sees invokes only.
post-route      :class:`PostRoute`: adds ``backend``, ``target`` (the backend's own name
                or URI), ``definition`` (the tool's definition), and ``params`` as the
                backend will receive them.
pre-response    :class:`PreResponse`: adds the ``answer`` (result or JSON-RPC error).
post-response   :class:`PostResponse`: the answer as it leaves the chain — the last
                point hopline's layers see before delivery — including answers the chain
                itself produced (rejections). Observation only: its decisions are ignored.
==============  ==========================================================================

An interceptor is any object with a ``name`` and one or more of the methods
``pre_route``, ``post_route``, ``pre_response``, ``post_response``, each taking its
view and returning a :class:`Decision` (``None`` means continue), plain or ``async``:

- continue: :data:`CONTINUE` or ``None``;
- mutate: ``mutate(new_params)`` at the request points, ``mutate(new_result)`` (or the
  new error object, for an error answer) at pre-response;
- reject: ``reject(error, reason=…)`` with a :class:`~hopline.jsonrpc.HoplineError`
  (the client receives exactly that error) or a message (:class:`PolicyDenied`).

Order is the onion: request hooks run in list order, response hooks in reverse. The
built-ins come first — DLP (outermost, so it redacts arguments before anyone sees
them and results after everyone changed them), the visibility guard, rate limiting —
then the operator's interceptors in configuration order.

Operators add interceptors in the configuration::

    policy:
      interceptors:
        - class: mypackage.policies:DenyDestructive   # or mypackage.policies.DenyDestructive
          options: {role: admin}                       # keyword arguments of the class
        - entry_point: my-interceptor                  # group "hopline.interceptors"
          mode: audit                                  # record its decisions, apply none
          fail_open: true                              # if it raises: continue (logged)

``examples/interceptor_example.py`` is a complete one. A hook that raises fails the call
closed (an ``InternalError`` without the traceback, which is logged) unless the entry
says ``fail_open``. A hook that raises a ``HoplineError`` rejects with it. A hook must
not change the view's dicts in place: return ``mutate(copy)``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from hopline.jsonrpc import HoplineError, InternalError, InvalidParams, Message, MethodNotFound
from hopline.pipeline import Call, Item, Next, SurfaceLayer
from hopline.layers.policy.audit import AuditLog, scrub, safe_target, trace_id_of
from hopline.layers.policy.interceptor import (  # noqa: F401 (the interceptor API, re-exported)
    CONTINUE,
    Decision,
    PolicyDenied,
    PostResponse,
    PostRoute,
    PreResponse,
    PreRoute,
    mutate,
    reject,
)
from hopline.layers.policy.loader import ENTRY_POINT_GROUP, entry_points, instantiate, load_class  # noqa: F401

log = logging.getLogger("hopline.policy")

Point = Literal["pre_route", "post_route", "pre_response", "post_response"]
POINTS: tuple[Point, ...] = ("pre_route", "post_route", "pre_response", "post_response")
ROUTING_KEYS = ("name", "uri", "ref", "taskId")


# -- entries and the chain ------------------------------------------------------------------------
@dataclass(slots=True)
class Entry:
    """One interceptor in the chain and how it is run."""

    interceptor: Any
    name: str = ""
    mode: Literal["enforce", "audit"] = "enforce"
    fail_open: bool = False
    # a hook of hopline's own (remote.py) that also gets the call (its deadline) and a note for
    # the audit record: ``hook(view, call, note)``
    takes_call: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.name = self.name or getattr(self.interceptor, "name", None) or type(self.interceptor).__name__
        self.takes_call = getattr(self.interceptor, "takes_call", False) is True
        if not any(callable(getattr(self.interceptor, p, None)) for p in POINTS):
            raise TypeError(f"interceptor {self.name!r} implements none of {', '.join(POINTS)}")

    def hook(self, point: Point) -> tuple[Any, bool] | None:
        fn = getattr(self.interceptor, point, None)
        if not callable(fn):
            return None
        return fn, asyncio.iscoroutinefunction(fn)


class _Trail:
    """What happened to one call, for its audit record."""

    __slots__ = ("decision", "by", "point", "reason", "details", "mutations", "shadow", "remote")

    def __init__(self) -> None:
        self.decision = "allow"
        self.by: str | None = None
        self.point: str | None = None
        self.reason: str | None = None
        self.details: dict[str, Any] | None = None
        self.mutations: list[dict[str, Any]] = []
        self.shadow: list[dict[str, Any]] = []
        self.remote: list[dict[str, Any]] = []  # each out-of-process interceptor's outcome (remote.py)


class InterceptorChain:
    """The policy call layer: runs the entries' hooks at the four points and audits."""

    def __init__(
        self, entries: Sequence[Entry], *, audit: AuditLog | None = None, clock: Any = time.perf_counter
    ) -> None:
        self.entries = list(entries)
        self.audit = audit
        self._clock = clock
        hooks: dict[Point, list[tuple[Entry, Any, bool]]] = {}
        for point in POINTS:
            ordered = self.entries if point in ("pre_route", "post_route") else list(reversed(self.entries))
            hooks[point] = [(e, *h) for e in ordered if (h := e.hook(point)) is not None]
        self._pre_route = hooks["pre_route"]
        self._post_route = hooks["post_route"]
        self._pre_response = hooks["pre_response"]
        self._post_response = hooks["post_response"]
        self._warned: set[tuple[str, str]] = set()

    async def __call__(self, call: Call, next: Next) -> Message:
        trail = _Trail()
        started = self._clock()
        answer: Message | None = None
        failure: BaseException | None = None
        try:
            if self._pre_route:
                await self._request("pre_route", self._pre_route, call, trail)
            if self._post_route:
                await self._request("post_route", self._post_route, call, trail)
            answer = await next(call)
            if self._pre_response:
                answer = await self._response(call, answer, trail)
            return answer
        except BaseException as exc:
            failure = exc
            raise
        finally:
            if self._post_response and not isinstance(failure, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
                await self._observe(call, answer, failure, trail)
            if self.audit is not None:
                self._audit(call, trail, answer, failure, self._clock() - started)

    # -- running hooks ----------------------------------------------------------------------------
    async def _run(
        self, entry: Entry, fn: Any, is_async: bool, point: Point, view: Any, trail: _Trail, call: Call | None = None
    ) -> Decision | None:
        try:
            if call is not None and entry.takes_call:
                decision = await fn(view, call, trail.remote.append)
            else:
                decision = (await fn(view)) if is_async else fn(view)
            if decision is not None and not isinstance(decision, Decision):
                raise TypeError(f"returned {type(decision).__name__}, not a Decision")
        except HoplineError as exc:
            return reject(exc)
        except Exception as exc:
            log.error("interceptor %s failed at %s: %s", entry.name, point, type(exc).__name__, exc_info=True)
            if entry.fail_open:
                trail.shadow.append(
                    {"by": entry.name, "point": point, "would": "error", "reason": "failed; continued (fail_open)"}
                )
                return None
            return Decision(
                "reject",
                error=InternalError("internal error: a policy check failed"),
                reason=f"interceptor failed ({type(exc).__name__})",
            )
        if decision is None or decision.action == "continue":
            return None
        if entry.mode == "audit":
            trail.shadow.append(
                {
                    "by": entry.name,
                    "point": point,
                    "would": decision.action,
                    "reason": scrub(decision.reason),
                    **_details(decision),
                }
            )
            return None
        return decision

    async def _request(self, point: Point, hooks: list[tuple[Entry, Any, bool]], call: Call, trail: _Trail) -> None:
        view = None
        for entry, fn, is_async in hooks:
            if view is None:
                view = self._request_view(point, call)
            decision = await self._run(entry, fn, is_async, point, view, trail, call)
            if decision is None:
                continue
            if decision.action == "reject":
                self._deny(trail, entry, point, decision)
                raise decision.error or PolicyDenied("request refused by policy")
            if not isinstance(decision.value, dict):
                self._deny(trail, entry, point, Decision("reject", reason="mutation is not an object"))
                raise InternalError("internal error: a policy check failed")
            call.params = self._keep_routing(entry, call.params, decision.value)
            trail.mutations.append(
                {"by": entry.name, "point": point, "reason": scrub(decision.reason), **_details(decision)}
            )
            view = None

    async def _response(self, call: Call, answer: Message, trail: _Trail) -> Message:
        view = None
        for entry, fn, is_async in self._pre_response:
            if view is None:
                view = _response_view(PreResponse, call, answer)
            decision = await self._run(entry, fn, is_async, "pre_response", view, trail, call)
            if decision is None:
                continue
            if decision.action == "reject":
                self._deny(trail, entry, "pre_response", decision)
                raise decision.error or PolicyDenied("answer withheld by policy")
            key = "result" if "result" in answer.body else "error"
            if not isinstance(decision.value, dict):
                self._deny(trail, entry, "pre_response", Decision("reject", reason="mutation is not an object"))
                raise InternalError("internal error: a policy check failed")
            answer = Message({**answer.body, key: decision.value})
            trail.mutations.append(
                {"by": entry.name, "point": "pre_response", "reason": scrub(decision.reason), **_details(decision)}
            )
            view = None
        return answer

    async def _observe(self, call: Call, answer: Message | None, failure: BaseException | None, trail: _Trail) -> None:
        if answer is None:
            error = failure if isinstance(failure, HoplineError) else InternalError("internal error")
            answer = error.to_response(None)
        view = PostResponse(
            call.direction,
            call.method,
            call.exposed,
            call.backend,
            call.target,
            call.params,
            call.meta,
            call.principal,
            call.session,
            call.definition,
            answer,
            trail.decision,
        )
        for entry, fn, is_async in self._post_response:
            decision = await self._run(entry, fn, is_async, "post_response", view, trail)
            if decision is not None:
                self._warn_once(
                    (entry.name, "observe"),
                    "interceptor %s returned %s at post_response, which only observes; ignored",
                    entry.name,
                    decision.action,
                )

    def _request_view(self, point: Point, call: Call) -> PreRoute | PostRoute:
        if point == "pre_route":
            return PreRoute(
                call.direction, call.method, call.exposed, call.params, call.meta, call.principal, call.session
            )
        return PostRoute(
            call.direction,
            call.method,
            call.exposed,
            call.backend,
            call.target,
            call.params,
            call.meta,
            call.principal,
            call.session,
            call.definition,
        )

    def _keep_routing(self, entry: Entry, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """A mutation may not re-route the call (that would bypass the visibility guard)."""
        changed = [
            k
            for k in ROUTING_KEYS
            if before.get(k, _MISSING) is not after.get(k, _MISSING)
            and before.get(k, _MISSING) != after.get(k, _MISSING)
        ]
        if not changed:
            return after
        self._warn_once(
            (entry.name, "route"),
            "interceptor %s tried to change the routing fields %s of a call; they were kept",
            entry.name,
            changed,
        )
        fixed = dict(after)
        for k in changed:
            if k in before:
                fixed[k] = before[k]
            else:
                fixed.pop(k, None)
        return fixed

    def _deny(self, trail: _Trail, entry: Entry, point: Point, decision: Decision) -> None:
        trail.decision = "deny"
        trail.by = entry.name
        trail.point = point
        trail.reason = scrub(decision.reason) if decision.reason else None
        trail.details = _details(decision) or None

    def _warn_once(self, key: tuple[str, str], msg: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args)

    def _audit(
        self, call: Call, trail: _Trail, answer: Message | None, failure: BaseException | None, elapsed: float
    ) -> None:
        principal = call.principal
        assert self.audit is not None
        self.audit.record(
            "call",
            decision=trail.decision,
            reason=trail.reason,
            principal=principal.subject,
            issuer=principal.issuer,
            direction=call.direction,
            method=call.method,
            backend=call.backend,
            target=safe_target(call.target if call.target is not None else call.exposed),
            trace_id=trace_id_of(call.meta),
            by=trail.by,
            point=trail.point,
            details=trail.details,
            mutations=trail.mutations,
            shadow=trail.shadow,
            interceptors=trail.remote,
            outcome=_outcome(answer, failure),
            duration_ms=round(elapsed * 1000, 3),
        )

    def refused(self, call: Call, error: HoplineError, reason: str = "not visible to the caller") -> None:
        """Audit an invoke the gateway refused before running the chain (its own visibility
        check, which must come first: a hidden tool of an unreachable backend has to be
        answered as unknown, not as unavailable)."""
        if self.audit is not None:
            trail = _Trail()
            trail.decision, trail.by, trail.point, trail.reason = "deny", "visibility", "pre_route", reason
            self._audit(call, trail, None, error, 0.0)

    def __repr__(self) -> str:
        return f"<InterceptorChain {[e.name for e in self.entries]} audit={self.audit!r}>"


_MISSING = object()


def _response_view(cls: type, call: Call, answer: Message) -> Any:
    return cls(
        call.direction,
        call.method,
        call.exposed,
        call.backend,
        call.target,
        call.params,
        call.meta,
        call.principal,
        call.session,
        call.definition,
        answer,
    )


def _details(decision: Decision) -> dict[str, Any]:
    return {
        k: (
            v
            if isinstance(v, (int, float, bool, type(None)))
            or isinstance(v, dict)
            and all(isinstance(x, int) for x in v.values())
            else scrub(v)
        )
        for k, v in decision.details.items()
    }


def _outcome(answer: Message | None, failure: BaseException | None) -> str:
    if failure is not None:
        if isinstance(failure, HoplineError):
            return f"error {failure.code}"
        return "cancelled" if isinstance(failure, asyncio.CancelledError) else "error internal"
    if answer is None:
        return "error internal"
    err = answer.body.get("error")
    if isinstance(err, dict):
        return f"error {err.get('code')}"
    res = answer.body.get("result")
    return "tool_error" if isinstance(res, dict) and res.get("isError") is True else "ok"


# -- the visibility guard ----------------------------------------------------------------------
TASKS_PREFIX = "tasks/"


def item_of(
    method: str, backend: str, target: str | None, params: Mapping[str, Any], definition: dict[str, Any] | None = None
) -> Item | None:
    """The item an invoke acts on (as the surface layers judged it when listing), or None."""
    if method in ("tools/call", "prompts/get"):
        name = target if target is not None else params.get("name")
        return (
            Item("tool" if method == "tools/call" else "prompt", backend, name, definition or {})
            if isinstance(name, str)
            else None
        )
    if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
        uri = target if target is not None else params.get("uri")
        return Item("resource", backend, uri, {}) if isinstance(uri, str) else None
    if method == "completion/complete":
        ref = params.get("ref")
        if isinstance(ref, dict):
            if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
                return Item("prompt", backend, ref["name"], {})
            if isinstance(ref.get("uri"), str):
                return Item("resource", backend, ref["uri"], {})
    if method.startswith(TASKS_PREFIX):  # a caller's own task, named by the tool that created it
        return Item("task", backend, target, {"method": method}) if isinstance(target, str) else None
    if target is not None and target == method:  # a method the gateway passes on (sidecar mode)
        return Item("method", backend, method, {})
    return None


def unknown_error(method: str, shown: str | None, params: Mapping[str, Any] | None = None) -> InvalidParams:
    """Exactly the error the gateway gives for a name that does not exist."""
    if method == "tools/call":
        return InvalidParams(f"Unknown tool: {shown!r}")
    if method == "prompts/get":
        return InvalidParams(f"Unknown prompt: {shown!r}")
    if method.startswith(TASKS_PREFIX):
        return InvalidParams(f"Unknown task: {shown!r}")
    if method == "completion/complete":
        ref = (params or {}).get("ref")
        if isinstance(ref, dict) and ref.get("type") == "ref/prompt":
            return InvalidParams(f"Unknown prompt: {shown!r}")
        return InvalidParams("completion/complete: unknown ref")
    return InvalidParams(f"Unknown resource: {shown!r}")


class SurfaceGuard:
    """Post-route: an invoke of an item the surface layers hide is refused exactly like an
    unknown name — the same decision that filtered the caller's lists (seed 001)."""

    name = "visibility"

    def __init__(self, surface: Sequence[SurfaceLayer]) -> None:
        self.surface = list(surface)

    def post_route(self, view: PostRoute) -> Decision | None:
        if view.direction != "to_backend":
            return None
        item = item_of(view.method, view.backend, view.target, view.params, view.definition)
        if item is None:
            return None
        for layer in self.surface:
            if not layer.visible(view.principal, item):
                if item.kind == "method":  # refused as a method that does not exist
                    return reject(
                        MethodNotFound(f"Method not found: {view.method}"), reason=f"hidden by {type(layer).__name__}"
                    )
                shown = view.name
                if shown is None:
                    ref = view.params.get("ref")
                    shown = (
                        ref.get("name") if view.method == "completion/complete" and isinstance(ref, dict) else item.name
                    )
                return reject(
                    unknown_error(view.method, shown, view.params), reason=f"hidden by {type(layer).__name__}"
                )
        return None

    def __repr__(self) -> str:
        return f"<SurfaceGuard {[type(s).__name__ for s in self.surface]}>"
