"""What ``hopline serve`` would fail on at start, found without starting anything.

``hopline check`` and ``hopline serve`` both call :func:`preflight`, so a file that
checks is a file that serves: the OpenAPI specs load and convert, the ``auth`` keys
load, and the call pipeline builds the way the gateway builds it (interceptor modules
import and instantiate, lockfiles parse, tool modes have their extras), its parts let
go again at once. Raises :class:`~hopline.config.errors.ConfigError` with every
problem found, at its configuration path. Synchronous: it runs before the event loop.

An audit file is not created here (``check`` must not write); its directory must exist
and be writable, or the file itself be writable.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from hopline.config.errors import ConfigError, format_path
from hopline.config.schema import GatewayConfig


def preflight(config: GatewayConfig, source: str, *, specs: bool = True, writes: bool = True) -> Any:
    """Raise :class:`ConfigError` for what the gateway could not be built from; return
    the front's authenticator (``None`` without ``auth``). ``specs=False``: the OpenAPI
    specs were checked already. ``writes=False`` (``hopline check``): nothing is created on disk (the
    sign-in store is opened read-only, or its directory checked)."""
    problems: list[tuple[str, str]] = []
    if specs and any(b.enabled and b.openapi is not None for b in config.backends.values()):
        from hopline.conversion.preflight import check_specs

        try:
            check_specs(config, source)
        except ConfigError as exc:
            problems += exc.problems
    authenticator = _authenticator(config, problems, writes)
    problems += _connect_store(config)
    problems += _pipeline(config)
    problems += _otel(config)
    problems += _audit_sink(config)
    if problems:
        raise ConfigError(source, problems)
    return authenticator


def _authenticator(config: GatewayConfig, problems: list[tuple[str, str]], writes: bool) -> Any:
    if config.auth is None:
        return None
    from hopline.layers.policy.auth import Authenticator
    from hopline.layers.policy.jwks import KeyProblem
    from hopline.signin import StoreProblem

    problems += [(format_path(loc), msg) for loc, msg in config.auth.backend_problems(config.backends)]
    try:
        if config.auth.signin is None:
            return Authenticator(config.auth)
        return _with_signin(config.auth, Authenticator, writes, config.state)
    except StoreProblem as exc:
        problems.append(("auth.signin.store", str(exc)))
    except KeyProblem as exc:
        problems.append(("", str(exc)))
    except (OSError, ValueError) as exc:  # an unreadable or malformed key file
        problems.append(("auth", f"keys cannot be loaded: {exc}"))
    return None


def _connect_store(config: GatewayConfig) -> list[tuple[str, str]]:
    """The per-user accounts' token store (``auth.connect.store``, issue 32) opens with this key: a corrupt file
    or one sealed under another key is said here, before anything starts, and left untouched."""
    connect = config.auth.connect if config.auth is not None else None
    if connect is None:
        return []
    import base64

    from hopline.connect.store import StoreProblem, TokenStore

    raw = connect.secret_key
    try:
        TokenStore.probe(connect.store, base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except StoreProblem as exc:
        return [("auth.connect.store", str(exc))]
    return []


def _with_signin(auth: Any, authenticator: Any, writes: bool = True, state: Any = None) -> Any:
    """The resource server with hopline's own authorization server (``auth.signin``) in front: its issuer joins
    ``auth.issuers`` with the published keys, and the HTTP app serves its endpoints."""
    from hopline.signin import build, issuer_settings

    signin = build(auth, check=not writes, state=state)
    update = {
        "issuers": [*auth.issuers, issuer_settings(signin)],
        "scopes_supported": auth.scopes_supported or list(auth.signin.scopes),
    }
    out = authenticator(auth.model_copy(update=update))
    out.signin = signin
    return out


class _NoAudit:
    """Stands in for the audit log while checking (the real one opens its file)."""

    def record(self, event: str, **fields: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def _pipeline(config: GatewayConfig) -> list[tuple[str, str]]:
    """Build the policy layers and tool modes as the gateway does, and let them go."""
    from hopline.compose import policy, toolmodes

    try:
        audit = _NoAudit() if config.policy.audit is not None else None
        _, calls = policy.build(config, audit=audit)  # type: ignore[arg-type]
    except ConfigError as exc:
        return exc.problems
    except (ValueError, TypeError, ImportError, OSError) as exc:
        return [("policy", str(exc))]
    problems: list[tuple[str, str]] = []
    plans = None
    try:
        plans = toolmodes.plans(config)
    except (ValueError, ImportError, OSError) as exc:
        problems.append(("tools", str(exc)))
    run_sync(_release(calls, plans))
    return problems


def run_sync(coro: Any) -> Any:
    """Run ``coro`` to its end from synchronous code: in a loop of its own, or, when called
    from inside a running loop (a library caller, an async test), on a thread's loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _release(calls: Any, plans: Any) -> None:
    from hopline.compose import policy, toolmodes

    await policy.aclose(calls)
    if plans is not None:
        await toolmodes.aclose(plans[0], *plans[1].values(), grace=0)


def _audit_sink(config: GatewayConfig) -> list[tuple[str, str]]:
    audit = config.policy.audit
    if audit is None or audit.sink in ("stdout", "stderr"):
        return []
    path = os.path.realpath(os.path.expanduser(audit.sink))
    if os.path.exists(path):
        ok = os.path.isfile(path) and os.access(path, os.W_OK)
        return [] if ok else [("policy.audit.sink", f"cannot be opened: {audit.sink} is not a writable file")]
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        return [
            (
                "policy.audit.sink",
                f"cannot be opened: directory {os.path.dirname(audit.sink) or '.'} does not exist or is not writable",
            )
        ]
    return []


def _otel(config: GatewayConfig) -> list[tuple[str, str]]:
    if config.observability.otel.endpoint is None:
        return []
    try:
        import hopline.observability.otel  # noqa: F401  (the SDK, only when spans are exported)
    except ImportError as exc:
        return [
            (
                "observability.otel.endpoint",
                f"exporting spans needs the otel extra (pip install 'hopline[otel]'): {exc}",
            )
        ]
    return []
