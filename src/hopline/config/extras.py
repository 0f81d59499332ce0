"""The optional extras: which configured feature needs which, and whether it is installed.

``pip install hopline`` is the core: relay, the gateways (forward, reverse, sidecar,
federation, conversion, transparent), the ACP conductor, API keys, token propagation,
DLP, pinning, audit and in-memory rate limits. A feature below needs its extra; a
configuration that uses one whose modules cannot be imported is refused when it loads
(``hopline check``, ``serve``, a reload), at the key that asks for it, with the command
that installs it: never an ImportError at the first request. The table matches
``[project.optional-dependencies]`` in pyproject.toml (tests/test_packaging.py checks).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from hopline.config.schema import GatewayConfig

Loc = tuple[str | int, ...]

# extra → (its distributions as pyproject lists them, the modules the code imports from them)
EXTRAS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "search": (("numpy", "snowballstemmer"), ("numpy",)),  # snowballstemmer is optional (a light stemmer otherwise)
    "code": (("pydantic-monty", "numpy", "snowballstemmer"), ("pydantic_monty", "numpy")),
    "redis": (("redis", "cryptography"), ("redis.asyncio", "cryptography.hazmat.primitives.ciphers.aead")),
    "otel": (
        ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"),
        ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter"),
    ),
    "auth": (("pyjwt",), ("jwt", "cryptography")),
    "cel": (("common-expression-language",), ("cel",)),
    "signin": (("authlib", "joserfc", "pyjwt"), ("authlib.oauth2", "joserfc", "jwt", "cryptography")),
    "acp": (("websockets",), ("websockets.asyncio.client",)),
}


def absent(extra: str) -> str | None:
    """The first module of ``extra`` that cannot be imported, or None when all can (a
    package first, then its submodule: ``redis``, then ``redis.asyncio``)."""
    for module in EXTRAS[extra][1]:
        parts = module.split(".")
        for n in range(1, len(parts) + 1):
            try:
                importlib.import_module(".".join(parts[:n]))
            except ImportError:
                return module
    return None


def message(feature: str, extra: str, module: str) -> str:
    """``feature`` says what needs it, verb included ("code needs", "CEL rules need")."""
    return f"{feature} the {extra} extra ({module} cannot be imported): pip install 'hopline[{extra}]'"


def needed(config: GatewayConfig | Mapping[str, Any]) -> list[tuple[Loc, str, str]]:
    """``(key path, what needs it, extra)`` for each configured feature that needs an extra.

    ``config``: a validated configuration, or the file's data when it did not validate (a
    section in error elsewhere, an unset variable): what needs an extra is read from the
    data as written, so one pass reports both."""
    data = config.model_dump() if hasattr(config, "model_dump") else config
    out: list[tuple[Loc, str, str]] = []
    tools = _map(data.get("tools"))
    endpoints: list[tuple[Loc, Any]] = [
        (("tools",), tools),
        *((("tools", "endpoints", p), e) for p, e in _map(tools.get("endpoints")).items()),
    ]
    for loc, endpoint in endpoints:
        if isinstance(endpoint, str):  # "/mcp/search": search (short for {mode: search})
            spots: list[tuple[Loc, Any]] = [(loc, endpoint)]
        else:
            endpoint = _map(endpoint)
            groups = _map(endpoint.get("groups")).items()
            spots = [
                ((*loc, "mode"), endpoint.get("mode")),
                *(((*loc, "groups", g, "mode"), _map(group).get("mode", group)) for g, group in groups),
            ]
        out += [(spot, f"{mode} needs", mode) for spot, mode in spots if mode in ("search", "code")]
    policy = _map(data.get("policy"))
    if policy.get("rules"):
        out.append((("policy", "rules"), "CEL rules need", "cel"))
    if _map(policy.get("rate_limits")).get("store") == "redis":
        out.append((("policy", "rate_limits", "store"), "store redis needs", "redis"))
    if data.get("state") is not None:
        out.append((("state",), "sharing sessions between replicas needs", "redis"))
    transparent = _map(data.get("transparent"))
    if transparent.get("rules"):
        out.append((("transparent", "rules"), "CEL rules need", "cel"))
    if transparent.get("tls") == "terminate":
        out.append((("transparent", "tls"), "minting certificates (tls: terminate) needs", "auth"))
    if _map(_map(data.get("observability")).get("otel")).get("endpoint") is not None:
        out.append((("observability", "otel", "endpoint"), "exporting spans needs", "otel"))
    if _map(data.get("auth")).get("issuers"):
        out.append((("auth", "issuers"), "JWT validation needs", "auth"))
    if _map(data.get("auth")).get("signin") is not None:
        out.append((("auth", "signin"), "the sign-in authorization server needs", "signin"))
    for bid, spec in _map(_map(data.get("auth")).get("backends")).items():
        if _map(spec).get("mode") == "user_oauth":  # hopline/connect/: Authlib's OAuth client
            out.append((("auth", "backends", bid, "mode"), "per-user upstream accounts (user_oauth) need", "signin"))
    components = _map(data.get("acp")).get("components")
    for i, component in enumerate(components if isinstance(components, list) else ()):
        command = _map(component).get("command")
        if isinstance(command, str) and command.lower().startswith(("ws://", "wss://")):
            out.append((("acp", "components", i, "command"), "a remote ACP component (over WebSocket) needs", "acp"))
    return out


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def problems(config: GatewayConfig | Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """A problem for each configured feature whose extra is not installed (each extra is tried once)."""
    missing: dict[str, str | None] = {}
    out = []
    for loc, feature, extra in needed(config):
        if extra not in missing:
            missing[extra] = absent(extra)
        module = missing[extra]
        if module is not None:
            out.append((loc, message(feature, extra, module)))
    return out
