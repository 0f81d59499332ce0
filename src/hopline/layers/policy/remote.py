"""Out-of-process interceptors (SEP-2624): the chain semantics, sans-io.

An *interceptor server* is an MCP server that advertises validators and mutators with
``interceptors/list`` and runs one with ``interceptor/invoke``. This module knows the
wire shapes and the rules; talking to the servers is the job of a :class:`Server`
handed in (``compose/interceptor_servers.py`` builds them on hopline's own stdio and
Streamable HTTP channels), so everything here runs against plain objects in tests.

:class:`RemoteChain` is one member of the :class:`~hopline.layers.policy.chain.InterceptorChain`
(after the operator's in-process interceptors): at pre-route it runs the request phase
on the invoke's ``params``, at pre-response the response phase on its ``result``.

Rules (SEP-2624 execution model; the conformance fixtures of
modelcontextprotocol/experimental-ext-interceptors state them as cases):

- Sending (the request, on its way to the backend): mutators run sequentially, ordered by
  ``priorityHint`` for the phase (low first) then name; then validators, in parallel, see
  the mutated payload. Receiving (the result, on its way back): validators first, on the
  raw payload, then mutators.
- Only a validation of severity ``error`` blocks (``valid: false`` without a severity
  counts as ``error``); ``warn``/``info`` are recorded.
- ``mode: audit`` never blocks: a validator's verdict and a mutator's would-be change
  (a shadow mutation) are recorded, not applied.
- Mutations are all-or-none: they are applied to a working copy, and the phase's payload
  changes only if the whole phase passes.
- A member that fails (times out, errors, crashes, answers garbage) is skipped when it
  fails open and blocks the call when it fails closed (the default); in audit mode it
  never blocks.
- Every invocation has its own timeout, cut to what is left of the exchange's deadline;
  each server has a concurrency bound (its :class:`Server` enforces it).

A blocked call is answered with :class:`~hopline.layers.policy.interceptor.PolicyDenied`
whose message names the interceptor and its reason; every member's outcome goes into
the audit record (``interceptors``), scrubbed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Literal, Protocol, Sequence

from hopline.layers.policy.audit import scrub
from hopline.layers.policy.interceptor import Decision, PolicyDenied, mutate

log = logging.getLogger("hopline.policy.remote")

Phase = Literal["request", "response"]
MAX_INTERCEPTORS = 1000  # per server: more is refused as garbage
MAX_NAME = 128
MAX_REASON = 300  # characters of an interceptor's message shown to the client
SEVERITIES = ("info", "warn", "error")
INT32 = (-(2**31), 2**31 - 1)


class InterceptorFailure(Exception):
    """An interceptor (or its server) could not give a usable answer; the message says why."""


# -- what a server advertises -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Hook:
    events: frozenset[str]
    phases: frozenset[str]  # of "request", "response"

    def matches(self, event: str, phase: Phase) -> bool:
        if phase not in self.phases:
            return False
        return event in self.events or "*" in self.events or f"*/{phase}" in self.events


@dataclass(frozen=True, slots=True)
class Descriptor:
    """One entry of an ``interceptors/list`` result."""

    name: str
    type: Literal["validation", "mutation"]
    hooks: tuple[Hook, ...]
    mode: Literal["enforce", "audit"] = "enforce"
    fail_open: bool = False
    priority: tuple[int, int] = (0, 0)  # request, response
    timeout: float | None = None  # the server's own hint (timeoutMs), if any


def _phases(value: Any) -> frozenset[str]:
    if value == "both":
        return frozenset(("request", "response"))
    if value in ("request", "response"):
        return frozenset((value,))
    raise ValueError(f"phase {value!r}")


def _hook(raw: Any) -> Hook:
    if not isinstance(raw, dict):
        raise ValueError("hook is not an object")
    events = raw.get("events")
    if not isinstance(events, list) or not events or not all(isinstance(e, str) and e for e in events):
        raise ValueError("hook.events is not a list of names")
    return Hook(frozenset(events), _phases(raw.get("phase")))


def _priority(raw: Any) -> tuple[int, int]:
    if raw is None:
        return (0, 0)
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = min(max(raw, INT32[0]), INT32[1])
        return (value, value)
    if isinstance(raw, dict):
        out = []
        for phase in ("request", "response"):
            v = raw.get(phase, 0)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError("priorityHint is not an integer")
            out.append(min(max(v, INT32[0]), INT32[1]))
        return (out[0], out[1])
    raise ValueError("priorityHint is not an integer or {request, response}")


def descriptor(raw: Any) -> Descriptor:
    """One advertised interceptor; :class:`ValueError` if it is not one. Accepts the
    ``hooks: [{events, phase}]`` list of the SEP-2624 fixtures and the older single
    ``hook: {events, phase}``."""
    if not isinstance(raw, dict):
        raise ValueError("not an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise ValueError("no usable name")
    kind = raw.get("type")
    if kind not in ("validation", "mutation"):
        raise ValueError(f"{name}: type {kind!r} is neither validation nor mutation")
    if isinstance(raw.get("hooks"), list):
        hooks = tuple(_hook(h) for h in raw["hooks"])
    elif "hook" in raw:
        hooks = (_hook(raw["hook"]),)
    else:
        raise ValueError(f"{name}: no hooks")
    mode = raw.get("mode", "enforce")
    if mode not in ("enforce", "audit"):
        raise ValueError(f"{name}: mode {mode!r}")
    fail_open = raw.get("failOpen", False)
    if not isinstance(fail_open, bool):
        raise ValueError(f"{name}: failOpen is not a boolean")
    timeout_ms = raw.get("timeoutMs")
    timeout = (
        timeout_ms / 1000
        if isinstance(timeout_ms, (int, float)) and not isinstance(timeout_ms, bool) and timeout_ms > 0
        else None
    )
    return Descriptor(name, kind, hooks, mode, fail_open, _priority(raw.get("priorityHint")), timeout)


def parse_list(result: Any, server: str) -> list[Descriptor]:
    """The descriptors of an ``interceptors/list`` result. A result that is not one, or lists
    more than :data:`MAX_INTERCEPTORS`, raises :class:`InterceptorFailure`; a malformed entry
    is left out (logged) and a repeated name keeps its first entry."""
    items = result.get("interceptors") if isinstance(result, dict) else None
    if not isinstance(items, list):
        raise InterceptorFailure(f"interceptor server {server} answered interceptors/list with no list")
    if len(items) > MAX_INTERCEPTORS:
        raise InterceptorFailure(
            f"interceptor server {server} lists {len(items)} interceptors (at most {MAX_INTERCEPTORS})"
        )
    out: dict[str, Descriptor] = {}
    for i, raw in enumerate(items):
        try:
            d = descriptor(raw)
        except ValueError as exc:
            log.warning("interceptor server %s: interceptors[%d] left out: %s", server, i, scrub(exc))
            continue
        out.setdefault(d.name, d)
    return list(out.values())


# -- members: a descriptor with the operator's overrides ------------------------------------------------
class Server(Protocol):
    """One interceptor server as the chain uses it (compose/interceptor_servers.py)."""

    name: str
    fail_open: bool  # when the server itself cannot be reached or listed

    async def members(self, timeout: float | None) -> Sequence[Member]: ...

    async def invoke(self, params: dict[str, Any], timeout: float | None) -> Any: ...


@dataclass(frozen=True, slots=True)
class Override:
    """What the operator sets for one interceptor (``None``: the server's own value)."""

    mode: Literal["enforce", "audit"] | None = None
    fail_open: bool | None = None
    timeout: float | None = None
    priority: int | None = None
    events: frozenset[str] | None = None  # narrower: only these events


@dataclass(frozen=True, slots=True)
class Member:
    server: Server
    name: str
    type: Literal["validation", "mutation"]
    hooks: tuple[Hook, ...]
    mode: Literal["enforce", "audit"]
    fail_open: bool
    timeout: float
    priority: tuple[int, int]
    events: frozenset[str] | None = None

    def matches(self, event: str, phase: Phase) -> bool:
        if self.events is not None and event not in self.events:
            return False
        return any(h.matches(event, phase) for h in self.hooks)

    def order(self, phase: Phase) -> tuple[int, str]:
        return (self.priority[0 if phase == "request" else 1], self.name)


def member(server: Server, d: Descriptor, override: Override, default_timeout: float) -> Member:
    prio = d.priority if override.priority is None else (override.priority, override.priority)
    return Member(
        server,
        d.name,
        d.type,
        d.hooks,
        override.mode or d.mode,
        d.fail_open if override.fail_open is None else override.fail_open,
        override.timeout or d.timeout or default_timeout,
        prio,
        override.events,
    )


# -- the chain ----------------------------------------------------------------------------------------
class _Blocked(Exception):
    def __init__(self, decision: Decision) -> None:
        self.decision = decision


def _blocked(name: str, why: str, reason: str) -> _Blocked:
    """The client's error: the interceptor's own words, bounded and without anything secret-shaped
    (a validator may quote what it refused)."""
    why = scrub(why)
    shown = why if len(why) <= MAX_REASON else why[: MAX_REASON - 1] + "…"
    error = PolicyDenied(f"blocked by interceptor {name}: {shown}", data={"interceptor": name, "reason": shown})
    return _Blocked(Decision("reject", error=error, reason=reason, details={}))


class RemoteChain:
    """The SEP-2624 interceptor servers as one member of the interceptor chain."""

    name = "interceptor-servers"
    takes_call = True  # the chain passes the call (its deadline) and a note for the audit record

    def __init__(self, servers: Sequence[Server], *, clock: Callable[[], float] | None = None) -> None:
        self.servers = list(servers)
        self._clock = clock

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    async def pre_route(self, view: Any, call: Any, note: Callable[[dict[str, Any]], Any]) -> Decision | None:
        if view.direction != "to_backend":
            return None
        return await self.run(view.method, "request", view.params, call, note)

    async def pre_response(self, view: Any, call: Any, note: Callable[[dict[str, Any]], Any]) -> Decision | None:
        result = view.result
        if view.direction != "to_backend" or result is None:
            return None  # JSON-RPC errors pass as they are
        return await self.run(view.method, "response", result, call, note)

    # -- one phase --------------------------------------------------------------------------------
    async def run(
        self, event: str, phase: Phase, payload: dict[str, Any], call: Any, note: Callable[[dict[str, Any]], Any]
    ) -> Decision | None:
        """The phase's decision: ``None`` (unchanged), a mutation (the new payload) or a rejection."""
        try:
            chosen = await self._select(event, phase, call, note)
            if not chosen:
                return None
            mutators = sorted((m for m in chosen if m.type == "mutation"), key=lambda m: m.order(phase))
            validators = [m for m in chosen if m.type == "validation"]
            work = payload
            changed: list[str] = []  # the interceptors whose change was applied, in order
            if phase == "request":  # sending: mutate, then validate what will be sent
                work = await self._mutate(mutators, event, phase, work, call, note, changed)
                await self._validate(validators, event, phase, work, call, note)
            else:  # receiving: validate what came, then mutate
                await self._validate(validators, event, phase, work, call, note)
                work = await self._mutate(mutators, event, phase, work, call, note, changed)
        except _Blocked as blocked:
            return blocked.decision
        if work is payload:
            return None
        return mutate(work, reason="mutated by " + ", ".join(changed) if changed else "mutated")

    async def _select(self, event: str, phase: Phase, call: Any, note: Callable[[dict[str, Any]], Any]) -> list[Member]:
        chosen: list[Member] = []
        for server in self.servers:
            left = self._left(call, None)
            try:
                async with asyncio.timeout(left):  # waiting for another call's connect counts too
                    members = await server.members(left)
            except Exception as exc:
                why = (
                    f"no answer within {left:g} s" if isinstance(exc, TimeoutError) and left is not None else _why(exc)
                )
                if server.fail_open:
                    note({"server": server.name, "phase": phase, "outcome": "skipped", "reason": scrub(why)})
                    continue
                note({"server": server.name, "phase": phase, "outcome": "failed", "reason": scrub(why)})
                raise _blocked(
                    f"server {server.name}", f"unavailable ({why})", f"interceptor server {server.name} unavailable"
                ) from None
            chosen.extend(m for m in members if m.matches(event, phase))
        return chosen

    def _left(self, call: Any, timeout: float | None) -> float | None:
        """``timeout`` cut to what is left of the exchange's deadline."""
        ctx = getattr(call, "context", None)
        left = ctx.remaining(self._now()) if ctx is not None else None
        if left is None:
            left = getattr(call, "timeout", None)
        if left is None:
            return timeout
        return left if timeout is None else min(timeout, left)

    async def _invoke(self, m: Member, event: str, phase: Phase, payload: dict[str, Any], call: Any) -> dict[str, Any]:
        timeout = self._left(call, m.timeout)
        params = {"name": m.name, "event": event, "phase": phase, "payload": payload}
        try:
            if timeout is not None and timeout <= 0:
                raise TimeoutError
            async with asyncio.timeout(timeout):
                result = await m.server.invoke(params, timeout)
        except TimeoutError:
            raise InterceptorFailure(f"no answer within {timeout:g} s") from None
        except InterceptorFailure:
            raise
        except Exception as exc:
            raise InterceptorFailure(_why(exc)) from None
        if not isinstance(result, dict):
            raise InterceptorFailure("answered with something that is not a result object")
        if result.get("type", m.type) != m.type:
            raise InterceptorFailure(f"answered a {result.get('type')!r} result for a {m.type}")
        return result

    def _failed(self, m: Member, phase: Phase, exc: InterceptorFailure, note: Callable[[dict[str, Any]], Any]) -> None:
        """A member that could not answer: skip it or block the call, as configured."""
        why = str(exc)
        entry = {"interceptor": m.name, "server": m.server.name, "phase": phase, "mode": m.mode}
        if m.mode == "audit" or m.fail_open:
            note({**entry, "outcome": "failed; skipped", "reason": scrub(why)})
            log.warning("interceptor %s (%s) failed, skipped: %s", m.name, m.server.name, scrub(why))
            return
        note({**entry, "outcome": "failed", "reason": scrub(why)})
        log.warning("interceptor %s (%s) failed, call refused (fail closed): %s", m.name, m.server.name, scrub(why))
        raise _blocked(m.name, f"failed ({why}); the call is refused (fail closed)", f"interceptor {m.name} failed")

    async def _mutate(
        self,
        mutators: list[Member],
        event: str,
        phase: Phase,
        payload: dict[str, Any],
        call: Any,
        note: Callable[[dict[str, Any]], Any],
        changed: list[str],
    ) -> dict[str, Any]:
        """``payload`` through ``mutators`` in order; the name of each whose change is applied goes onto ``changed``."""
        work = payload
        for m in mutators:
            entry = {"interceptor": m.name, "server": m.server.name, "phase": phase, "mode": m.mode}
            try:
                result = await self._invoke(m, event, phase, work, call)
                modified = result.get("modified")
                if not isinstance(modified, bool):
                    raise InterceptorFailure("mutation result has no boolean 'modified'")
                new = result.get("payload") if modified else work
                if not isinstance(new, dict):
                    raise InterceptorFailure("mutation result's payload is not an object")
            except InterceptorFailure as exc:
                self._failed(m, phase, exc, note)
                continue
            if not modified:
                note({**entry, "outcome": "unmodified"})
            elif m.mode == "audit":
                note({**entry, "outcome": "would modify"})  # a shadow mutation: computed, not applied
            else:
                note({**entry, "outcome": "modified"})
                changed.append(m.name)
                work = new
        return work

    async def _validate(
        self,
        validators: list[Member],
        event: str,
        phase: Phase,
        payload: dict[str, Any],
        call: Any,
        note: Callable[[dict[str, Any]], Any],
    ) -> None:
        if not validators:
            return
        outcomes = await asyncio.gather(
            *(self._one_validation(m, event, phase, payload, call) for m in validators), return_exceptions=True
        )
        block: _Blocked | None = None
        for m, outcome in zip(validators, outcomes):
            entry = {"interceptor": m.name, "server": m.server.name, "phase": phase, "mode": m.mode}
            if isinstance(outcome, InterceptorFailure):
                try:
                    self._failed(m, phase, outcome, note)
                except _Blocked as exc:
                    block = block or exc
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            severity, message = outcome
            if severity is None:
                note({**entry, "outcome": "valid"})
                continue
            note({**entry, "outcome": f"invalid ({severity})", "reason": scrub(message)})
            if severity == "error" and m.mode == "enforce":
                block = block or _blocked(m.name, message, f"{m.name}: {scrub(message)}")
        if block is not None:
            raise block

    async def _one_validation(
        self, m: Member, event: str, phase: Phase, payload: dict[str, Any], call: Any
    ) -> tuple[str | None, str]:
        """``(None, "")`` for a pass, else the severity and the first message."""
        result = await self._invoke(m, event, phase, payload, call)
        valid = result.get("valid")
        if not isinstance(valid, bool):
            raise InterceptorFailure("validation result has no boolean 'valid'")
        severity = result.get("severity")
        messages = result.get("messages") if isinstance(result.get("messages"), list) else []
        texts = [x for x in messages if isinstance(x, dict) and isinstance(x.get("message"), str)]
        if severity is not None and severity not in SEVERITIES:
            raise InterceptorFailure(f"validation severity {str(severity)[:20]!r} is not info, warn or error")
        if severity is None:
            worst = [x.get("severity") for x in texts if x.get("severity") in SEVERITIES]
            severity = max(worst, key=SEVERITIES.index) if worst else (None if valid else "error")
        if valid and severity != "error":
            if severity in ("info", "warn") and texts:
                return severity, str(texts[0]["message"])
            return None, ""
        errors = [x for x in texts if x.get("severity", severity) == "error"] or texts
        message = str(errors[0]["message"]) if errors else "refused (no message given)"
        return severity, message


def _why(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(text)[:MAX_REASON]
