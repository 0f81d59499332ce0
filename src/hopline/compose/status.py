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
- ``down``: its last start failed, or its sessions went away, and none is open;
- ``breaker_open`` / ``breaker_half_open``: its circuit breaker withdrew it;
- ``idle``: never used yet. Backends start when a client first needs them, so a
  backend that cannot start shows ``down`` from the first client session on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hopline.layers.discovery.backend import BackendSession
from hopline.layers.session.sharing import describe
from hopline.observability.redact import redact, scrub, url_scrub

MAX_ERROR = 300  # characters of an error message shown


def config_view(gateway: Any) -> dict[str, Any]:
    """The effective configuration, as JSON data, secrets redacted."""
    return redact(gateway.config.model_dump(mode="json"))[0]


def status(gateway: Any, *, declaration: Any = None) -> dict[str, Any]:
    config = gateway.config
    secrets = redact(config.model_dump(mode="json"))[1]
    sessions = list(gateway.sessions)
    open_by: dict[str, list[BackendSession]] = {}
    errors_by: dict[str, BaseException] = {}
    for key, s in list(gateway.sharing.shared.items()):
        if not s.is_closed():
            open_by.setdefault(s.id, []).append(s)
    for session in sessions:
        for backend_id, found in (session.backends or {}).items():
            if isinstance(found, BackendSession):
                if not found.is_closed() and found not in open_by.get(backend_id, ()):
                    open_by.setdefault(backend_id, []).append(found)
            elif isinstance(found, BaseException):
                errors_by[backend_id] = found
    recent = getattr(gateway.observability.metrics, "recent", None)
    breakers = gateway.resilience.breakers
    states = breakers.states() if breakers is not None else {}
    tools = _tools(gateway, open_by)
    loop_now, wall_now = asyncio.get_running_loop().time(), time.time()
    backends = []
    failures = list(gateway.sharing.failed.items())  # per backend, or per (backend, caller) key
    for backend_id, spec in config.backends.items():
        entry: dict[str, Any] = {"id": backend_id, "enabled": spec.enabled, **_kind(spec)}
        connector = gateway.registry.connectors.get(backend_id)
        live = open_by.get(backend_id, [])
        failed = gateway.sharing.failed.get(backend_id)
        error: BaseException | None = failed[1] if failed is not None else errors_by.get(backend_id)
        breaker = states.get(backend_id)
        if not spec.enabled or connector is None:
            state = "disabled"
        elif breaker is not None and breaker.value != "closed":
            state = f"breaker_{breaker.value}"
        elif live:
            state = "up"
        elif error is not None or backend_id in errors_by:
            state = "down"
        else:
            state = "idle"
        entry["state"] = state
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
            entry["last_error"] = {
                "message": scrub(url_scrub(describe(error))[:MAX_ERROR], secrets),
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
        backends.append(entry)
    by_principal: dict[str, int] = {}
    for session in sessions:
        subject = session.principal.subject
        by_principal[subject] = by_principal.get(subject, 0) + 1
    shared = [
        {"backend": s.id, "era": s.info.era.value, "open": not s.is_closed()}
        for s in list(gateway.sharing.shared.values())
    ]
    return {
        "name": config.name,
        "mode": config.mode,
        "time": wall_now,
        "ready": all(gateway.pipeline.available(b) for b in gateway.registry.connectors),
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
    for key, catalog in list(gateway.catalogs.items()):
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
