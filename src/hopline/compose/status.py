"""What the admin listener shows of a running gateway: ``status(gateway)`` for
``GET /status`` and the admin page, ``config_view(gateway)`` for ``GET /config``.

Read from the :class:`~hopline.compose.gateway.Gateway`'s own state, never kept twice:
the registry's connectors (a stdio backend's child pool), the shared and the client
sessions' backend sessions, the breakers, the start failures the sharing layer
remembers, the tools/list catalogue last composed, the recent calls the metrics layer
keeps (observability/recent.py), the last reload. Secrets never show: the configuration
is redacted (observability/redact.py) and every error message is scrubbed of the
secret values redaction found and of URLs' userinfo and query.

A backend's ``state``:

- ``up``: a backend session with it is open (a shared one or a client's);
- ``down``: its last start failed (serve's first start included: a crash, or no answer
  within ``routing.startup_timeout``), or its sessions went away, and none is open;
- ``starting``: its first start (``hopline serve`` starts shared backends at once) or a
  client's start of it is under way, and nothing failed yet;
- ``breaker_open`` / ``breaker_half_open``: its circuit breaker withdrew it;
- ``idle``: never used yet (``--lazy``, ``share: isolated`` or per-caller backends start
  when a client first needs them).

Readiness (``/readyz``, ``ready`` here; README "Readiness"), one rule: ready when serve's
first start of every backend is over (up, failed, or past ``routing.startup_timeout``;
at once with ``--lazy``) and no backend marked ``required: true`` is ``down``,
``starting`` or withdrawn by its breaker. A backend not required that is down or whose
breaker is open leaves the replica ready (every replica would see it alike) and makes
the page's header say ``degraded`` (``degraded`` here lists them).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hopline.layers.discovery.backend import BackendSession
from hopline.layers.session.links import still_starting
from hopline.layers.session.sharing import describe
from hopline.observability.redact import redact, scrub, url_scrub

MAX_ERROR = 300  # characters of an error message shown


def config_view(gateway: Any) -> dict[str, Any]:
    """The effective configuration, as JSON data, secrets redacted."""
    return redact(gateway.config.model_dump(mode="json"))[0]


def _backend_states(gateway: Any) -> dict[str, dict[str, Any]]:
    """Per configured backend: its ``state``, the open sessions (``live``), the error it
    failed with (``error``) and the sharing layer's record of that failure (``failed``)."""
    open_by: dict[str, list[BackendSession]] = {}
    errors_by: dict[str, BaseException] = {}
    starting_by: set[str] = set()
    for key, s in list(gateway.sharing.shared.items()):
        if not s.is_closed():
            open_by.setdefault(s.id, []).append(s)
    for session in list(gateway.sessions):
        for backend_id, found in (session.backends or {}).items():
            if isinstance(found, BackendSession):
                if not found.is_closed() and found not in open_by.get(backend_id, ()):
                    open_by.setdefault(backend_id, []).append(found)
            elif still_starting(found):
                starting_by.add(backend_id)
            elif isinstance(found, BaseException):
                errors_by[backend_id] = found
    pending = getattr(gateway.sharing, "_starting", {})
    breakers = gateway.resilience.breakers
    breaker_states = breakers.states() if breakers is not None else {}
    first = gateway.first_starts
    out: dict[str, dict[str, Any]] = {}
    for backend_id, spec in gateway.config.backends.items():
        connector = gateway.registry.connectors.get(backend_id)
        live = open_by.get(backend_id, [])
        failed = gateway.sharing.failed.get(backend_id)
        begun = first.get(backend_id)
        error: BaseException | None = failed[1] if failed is not None else errors_by.get(backend_id)
        if error is None and isinstance(begun, BaseException):
            error = begun  # serve's first start failed (or outlasted routing.startup_timeout)
        starting = (
            (backend_id in first and begun is None)
            or backend_id in starting_by
            or (backend_id in pending and not pending[backend_id].done())
        )
        breaker = breaker_states.get(backend_id)
        if not spec.enabled or connector is None:
            state = "disabled"
        elif breaker is not None and breaker.value != "closed":
            state = f"breaker_{breaker.value}"
        elif live:
            state = "up"
        elif error is not None:
            state = "down"
        elif starting:
            state = "starting"
        else:
            state = "idle"
        out[backend_id] = {"state": state, "live": live, "error": error, "failed": failed, "breaker": breaker}
    return out


NOT_READY = frozenset({"down", "starting", "breaker_open", "breaker_half_open"})


def readiness(gateway: Any, states: dict[str, dict[str, Any]] | None = None) -> tuple[bool, list[str]]:
    """``/readyz``'s one rule (module docstring): ready or not, and the backends that keep it
    from being ready (or, when ready, the ones down or withdrawn: the degraded ones)."""
    states = _backend_states(gateway) if states is None else states
    if any(v is None for b, v in gateway.first_starts.items() if b in gateway.registry.connectors):
        return False, sorted(b for b, v in gateway.first_starts.items() if v is None)
    backends = gateway.config.backends
    held = sorted(b for b, st in states.items() if st["state"] in NOT_READY and getattr(backends[b], "required", False))
    if held:
        return False, held
    return True, sorted(b for b, st in states.items() if st["state"] in NOT_READY)


def status(gateway: Any, *, declaration: Any = None) -> dict[str, Any]:
    config = gateway.config
    secrets = redact(config.model_dump(mode="json"))[1]
    sessions = list(gateway.sessions)
    states_by = _backend_states(gateway)
    open_by = {b: st["live"] for b, st in states_by.items() if st["live"]}
    recent = getattr(gateway.observability.metrics, "recent", None)
    breakers = gateway.resilience.breakers
    tools = _tools(gateway, open_by)
    loop_now, wall_now = asyncio.get_running_loop().time(), time.time()
    limit = config.routing.startup_timeout
    backends = []
    failures = list(gateway.sharing.failed.items())  # per backend, or per (backend, caller) key
    for backend_id, spec in config.backends.items():
        entry: dict[str, Any] = {"id": backend_id, "enabled": spec.enabled, **_kind(spec)}
        connector = gateway.registry.connectors.get(backend_id)
        st = states_by[backend_id]
        live, error, failed, breaker = st["live"], st["error"], st["failed"], st["breaker"]
        entry["state"] = st["state"]
        entry["required"] = bool(getattr(spec, "required", False))
        entry["breaker"] = breaker.value if breaker is not None else ("closed" if breakers is not None else None)
        entry["sessions"] = {"open": len(live), "eras": sorted({s.info.era.value for s in live})}
        if live:
            info = live[0].info
            entry["server"] = {
                "name": str(info.server_info.get("name", "")),
                "version": str(info.server_info.get("version", "")),
                "protocol": info.protocol_version,
            }
        children = getattr(connector, "children", None)
        if children is not None:  # a stdio backend's pool
            entry["children"] = {**children.stats(), "pids": children.pids()}
        if spec.command is not None:  # the permission profile its children run under (issue 35)
            launcher = getattr(connector, "launcher", None)
            entry["sandbox"] = launcher.describe() if launcher is not None else {"profile": "none"}
        entry["last_error"] = None
        if error is not None:
            # what its child said (stderr tail, stdout junk; quoted, redacted): serve's first start has it already
            said = None if error is gateway.first_starts.get(backend_id) else gateway.registry.said(backend_id)
            entry["last_error"] = {
                "message": scrub(url_scrub(describe(error, limit=limit, said=said))[:MAX_ERROR], secrets),
                "at": wall_now - (loop_now - failed[2]) if failed is not None else None,
                "retry_in": max(0.0, round(failed[0] - loop_now, 1)) if failed is not None else None,
            }
        held = [v for k, v in failures if k.__class__ is tuple and k[0] == backend_id and v[0] > loop_now]
        if held:  # callers whose own credential failed: held back until their retry (the rest are served)
            latest = max(held, key=lambda v: v[2])
            entry["caller_failures"] = {
                "callers": len(held),
                "last_error": {
                    "message": scrub(url_scrub(describe(latest[1]))[:MAX_ERROR], secrets),
                    "at": wall_now - (loop_now - latest[2]),
                    "retry_in": max(0.0, round(latest[0] - loop_now, 1)),
                },
            }
        calls = recent.backend(backend_id) if recent is not None else None
        if calls is not None:
            entry["calls"] = {k: calls[k] for k in ("calls", "errors", "p50_ms", "last_ok")}
            entry["last_call_error"] = calls["last_error"]
            entry["series"] = recent.series(backend_id)  # [at, ms, ok] of its last calls: the page's charts
        entry["tools"] = tools.get(backend_id, [])
        entry["tool_count"] = len(entry["tools"])
        if gateway.propagation.mode(backend_id) == "user_oauth":  # issue 32: counts of users' accounts, no token
            entry["connections"] = gateway.propagation.connections().counts(backend_id)
        backends.append(entry)
    by_principal: dict[str, int] = {}
    for session in sessions:
        subject = session.principal.subject
        by_principal[subject] = by_principal.get(subject, 0) + 1
    shared = [
        {"backend": s.id, "era": s.info.era.value, "open": not s.is_closed()}
        for s in list(gateway.sharing.shared.values())
    ]
    ready, which = readiness(gateway, states_by)
    return {
        "name": config.name,
        "mode": config.mode,
        "time": wall_now,
        "ready": ready,
        "not_ready": [] if ready else which,  # what keeps /readyz at 503
        "degraded": which if ready else sorted(b for b, st in states_by.items() if st["state"] in NOT_READY),
        "backends": backends,
        "sessions": {
            "handshake": {"open": len(sessions), "by_principal": dict(sorted(by_principal.items()))},
            "modern": {
                "stateless": True,
                "note": "2026-07-28 requests are stateless: one short-lived session per request (see requests)",
            },
            "shared_backend_sessions": shared,
        },
        "tool_modes": _tool_modes(config),
        "requests": (recent.recent_requests() if recent is not None else []),
        "declaration": _summary(declaration() if callable(declaration) else declaration),
        "reload": dict(getattr(gateway, "reload_status", None) or {"count": 0}),
    }


def _kind(spec: Any) -> dict[str, Any]:
    if spec.command is not None:
        return {"kind": "stdio", "target": spec.command, "share": spec.share_kind()}
    if spec.openapi is not None:
        return {"kind": "openapi", "target": url_scrub(spec.base_url or spec.openapi)}
    return {"kind": spec.transport, "target": url_scrub(spec.url or "")}


def _tools(gateway: Any, open_by: dict[str, list[BackendSession]]) -> dict[str, list[dict[str, str]]]:
    """Per backend: its tools as the last composed tools/list catalogue names them
    (exposed and original name), else as its open sessions list them."""
    out: dict[str, list[dict[str, str]]] = {}
    latest = None
    for key, catalog in list(gateway.catalogue.catalogs.items()):
        if isinstance(key, tuple) and key and key[0] == "tools/list":
            latest = catalog
    if latest is not None:
        for e in latest.entries:
            out.setdefault(e.backend, []).append({"name": e.exposed, "original": e.original})
    for backend_id, live in open_by.items():
        if backend_id not in out:
            for s in live:
                items = s.cached_list("tools/list")
                if items is not None:
                    out[backend_id] = [
                        {"name": str(t.get("name", "")), "original": str(t.get("name", ""))} for t in items
                    ]
                    break
    return out


def _tool_modes(config: Any) -> dict[str, Any]:
    t = config.tools
    return {"main": t.mode, "endpoints": {path: e.mode for path, e in t.endpoints.items()}}


def _summary(declared: dict[str, Any] | None) -> dict[str, Any] | None:
    """The declaration without its long lists (the requirement ids are counted)."""
    if not declared:
        return None
    out = {k: v for k, v in declared.items() if k not in ("requirements", "bindings", "document")}
    out["requirements"] = len(declared.get("requirements", ()))
    out["bindings"] = [b.get("name", b) if isinstance(b, dict) else b for b in declared.get("bindings", ())]
    return out
