"""The conformance declaration (draft §4.2): what this hopline claims, as data.

Computed from the running configuration, never written by hand: the highest tier
the implemented layers satisfy, the mode set, the handshake disposition per mode
(§7.1), the TLS disposition, the bindings, and the requirement ids that have
tests (``requirements.toml``). Printed by ``hopline declare`` and served at
``/.well-known/agent-tool-proxy`` by every HTTP listener.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

import orjson

from hopline import NAME, __version__
from hopline.binding import MCP_HANDSHAKE, MCP_MODERN
from hopline.modes import COMPOSITIONS

if TYPE_CHECKING:
    from hopline.config.schema import GatewayConfig

# Layers each mode brings into the pipeline, and its handshake: its composition (modes/*.py).
MODE_LAYERS: dict[str, frozenset[int]] = {mode: c.numbers for mode, c in COMPOSITIONS.items()}
HANDSHAKE_DISPOSITION = {mode: c.handshake for mode, c in COMPOSITIONS.items()}
LEVEL_HANDSHAKE = {
    1: "level 1: single-handshake passthrough (MUST NOT dual-handshake)",
    2: "level 2: dual-handshake on every connection (the destination's own identity and surface, as Reverse mode)",
}
TLS_DISPOSITIONS = {  # transparent.tls -> what the declaration says (draft §5.4.4)
    "plaintext": "plaintext",
    "terminated": "termination by the surrounding infrastructure",
    "terminate": "termination and re-origination by hopline: a certificate for the original hostname (SNI), minted "
    "from the operator CA or a configured (wildcard) certificate, and hopline's own verified TLS to the destination",
    "passthrough": "passthrough: the encrypted stream forwarded unread; policy on the original destination and SNI",
}
TIERS = ((3, frozenset(range(1, 8))), (2, frozenset({1, 2, 3})), (1, frozenset({1})))


@dataclass
class Deployment:
    """The facts about a running hopline that the declaration is computed from."""

    modes: list[str] = field(default_factory=lambda: ["relay"])
    client_transports: list[str] = field(default_factory=lambda: ["stdio", "streamable-http", "sse"])
    backend_transports: list[str] = field(default_factory=lambda: ["stdio", "streamable-http", "sse"])
    tls: str = "plaintext"  # hopline does not terminate TLS yet
    token_propagation: str = "none"
    collision: str | None = None
    endpoints: dict[str, str] = field(default_factory=dict)
    layers: set[int] | None = None  # the running pipeline's layers; None: what the modes bring
    tool_mode: str | None = None  # Layer 7 progressive disclosure: standard, search, code (the main endpoint's default)
    tool_modes: dict[str, dict[str, Any]] = field(default_factory=dict)  # endpoint path → {mode, backends by mode}
    authentication: str = "none"
    members: dict[str, dict[str, Any]] | None = None  # federation: each member intermediary's declaration, in short
    transparent: dict[str, Any] | None = None  # transparent mode: awareness level, how the destination reaches it
    handshake: dict[str, str] | None = None  # a mode's handshake disposition where it depends on configuration
    isolation: dict[str, dict[str, Any]] | None = None  # stdio backend id → the permission profile its children get


def tier_for(layers: set[int]) -> int:
    for tier, needed in TIERS:
        if needed <= layers:
            return tier
    return 0


def requirement_ids() -> list[str]:
    data = tomllib.loads(resources.files("hopline").joinpath("requirements.toml").read_text())
    return [r["id"] for r in data["req"]]


def declare(deployment: Deployment | None = None) -> dict[str, Any]:
    d = deployment or Deployment()
    layers: set[int] = set(d.layers) if d.layers is not None else set()
    if d.layers is None:
        for mode in d.modes:
            layers.update(MODE_LAYERS[mode])
    return {
        "document": "draft: Agent-Tool Proxy Modes (August 2026)",
        "intermediary": {"name": NAME, "version": __version__},
        "tier": tier_for(layers),
        "layers": sorted(layers),
        "modes": sorted(d.modes),
        "handshake": d.handshake or {m: HANDSHAKE_DISPOSITION[m] for m in d.modes},
        "tls": d.tls,
        "token_propagation": d.token_propagation,
        **({"collision_strategy": d.collision} if d.collision else {}),
        **({"tool_mode": d.tool_mode} if d.tool_mode else {}),
        **({"tool_modes": d.tool_modes} if d.tool_modes else {}),
        "authentication": d.authentication,
        **({"federation": {"members": d.members}} if d.members is not None else {}),
        **({"transparent": d.transparent} if d.transparent is not None else {}),
        **({"isolation": d.isolation} if d.isolation else {}),
        "transports": {"client": d.client_transports, "backend": d.backend_transports},
        "bindings": [MCP_HANDSHAKE.as_dict(), MCP_MODERN.as_dict()],
        "requirements": requirement_ids(),
        "endpoints": d.endpoints,
    }


# -- `hopline declare` ---------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "config", nargs="?", help="gateway configuration file; without it, what `hopline relay` declares"
    )
    parser.add_argument(
        "--capabilities",
        action="store_true",
        help="what this build implements: every mode, and the tier a deployment of it reaches",
    )


# One configuration per mode, with a policy (Layer 5 is present only when configured):
# the capability declaration runs each through ``for_config``, the path a real file takes.
_SAMPLES: dict[str, dict[str, Any]] = {
    "forward": {"backends": {"a": {"command": "server"}, "b": {"url": "http://tools.example/mcp"}}},
    "reverse": {"mode": "reverse", "backends": {"a": {"url": "http://tools.example/mcp"}}},
    "sidecar": {"mode": "sidecar", "backends": {"a": {"command": "server"}}},
    "federation": {"mode": "federation", "backends": {"team": {"url": "http://team-gateway.example/mcp"}}},
    "conversion": {"backends": {"api": {"openapi": "api.yaml", "base_url": "http://api.example"}}},
    "transparent": {
        "mode": "transparent",
        "transparent": {"level": 2, "destinations": {"tools.example": "http://10.0.0.1"}},
    },
}


def capabilities() -> dict[str, Any]:
    """Every mode this build implements, each with the declaration a deployment of it
    makes when a policy is configured (computed, not written down)."""
    from hopline.config.schema import GatewayConfig

    per_mode: dict[str, Any] = {}
    relay = declare()
    per_mode["relay"] = {
        "tier": relay["tier"],
        "layers": relay["layers"],
        "handshake": relay["handshake"]["relay"],
        "note": "no protocol awareness, by definition (draft §5.1)",
    }
    for mode, sample in _SAMPLES.items():
        config = GatewayConfig.model_validate({**sample, "policy": {"rules": ["true"]}})
        doc = declare(for_config(config))
        entry = {
            "tier": doc["tier"],
            "layers": doc["layers"],
            "handshake": doc["handshake"].get(mode, doc["handshake"].get("forward")),
        }
        if mode == "transparent":
            level1 = GatewayConfig.model_validate(
                {**sample, "transparent": {**sample["transparent"], "level": 1, "rules": ["true"]}}
            )
            entry["awareness_levels"] = {
                "1": {"tier": declare(for_config(level1))["tier"], "layers": sorted(for_config(level1).layers or ())},
                "2": {"tier": doc["tier"], "layers": doc["layers"]},
            }
        per_mode[mode] = entry
    layers = sorted({n for entry in per_mode.values() for n in entry["layers"]})
    return {
        "document": "draft: Agent-Tool Proxy Modes (August 2026)",
        "intermediary": {"name": NAME, "version": __version__},
        "tier": tier_for(set(layers)),
        "layers": layers,
        "modes": sorted(per_mode),
        "per_mode": per_mode,
        "bindings": [MCP_HANDSHAKE.as_dict(), MCP_MODERN.as_dict()],
        "requirements": requirement_ids(),
    }


def layers_for(config: GatewayConfig) -> set[int]:
    """The draft layers a gateway built from ``config`` runs (its pipeline carries them)."""
    # Its mode's composition: the layers it requires, and the optional ones it admits that the
    # configuration uses (transparent level 2 runs a Reverse stack per destination).
    return COMPOSITIONS["reverse" if config.mode == "transparent" else config.mode].layers_for(config)


def for_config(config: object) -> Deployment:
    """The deployment a gateway configuration describes (Forward or Reverse mode): the
    layers its pipeline will run (:func:`layers_for`), not a wish list."""
    from hopline.layers.policy.propagation import Propagator

    mode = getattr(config, "mode")
    if mode == "transparent":
        return _transparent(config)
    backends = getattr(config, "backends")
    tools = getattr(config, "tools")
    injected = any(getattr(b, "headers", None) or getattr(b, "env", None) for b in backends.values())
    pattern = Propagator.from_config(config).pattern()
    if pattern == "none" and injected:
        pattern = "credential-injection"
    converting = any(getattr(b, "openapi", None) is not None for b in backends.values())
    return Deployment(
        modes=[mode, "conversion"] if converting else [mode],
        token_propagation=pattern,
        collision=getattr(config, "routing").collision,
        layers=layers_for(config),  # type: ignore[arg-type]
        tool_mode=tools.mode,
        tool_modes={
            getattr(config, "listen").path: tools.describe(),
            **{path: e.describe() for path, e in tools.endpoints.items()},
        },
        authentication="oauth2-bearer" if getattr(config, "auth", None) is not None else "none",
        isolation={bid: _isolation(b) for bid, b in backends.items() if getattr(b, "command", None) is not None},
    )


def _isolation(backend: Any) -> dict[str, Any]:
    """How a stdio backend's children are confined (issue 35): its sandbox profile, or none."""
    box = getattr(backend, "sandbox", None)
    if box is None or box.profile == "none":
        return {"profile": "none", "launcher": None, "note": "runs as hopline's user with its filesystem and network"}
    return {
        "profile": box.profile,
        "launcher": "bubblewrap",
        "network": box.network_in_effect(),
        "filesystem": "read-only system and runtime, named paths, private tmpfs home",
        "pid_namespace": True,
        "no_new_privileges": True,
        "uid": box.uid,
        "limits": {"memory_mib": box.memory, "processes": box.processes, "cpu_seconds": box.cpu_seconds},
    }


def _level_handshake(t: Any) -> str:
    """§7.1: level 1 never dual-handshakes; at level 2 the disposition is per connection."""
    if t.level == 1 or not t.single_handshake:
        return LEVEL_HANDSHAKE[t.level]
    return (
        "level 2: per connection (tracked): dual-handshake, but single-handshake passthrough (the level 1 "
        f"requirements, for the connection's duration) for connections to {', '.join(sorted(t.single_handshake))}"
    )


def _transparent(config: Any) -> Deployment:
    """Transparent mode: HTTP only, the client's credentials passed through; level 1 runs
    Layers 1 (and 5 with header rules), level 2 a Reverse-mode pipeline per destination."""
    t = config.transparent
    layers = ({1, 5} if t.rules else {1}) if t.level == 1 else layers_for(config) | ({5} if t.rules else set())
    how, mechanism, interception = {
        "host": (
            "the Host header, as the client addressed it",
            "Host",
            "by the surrounding network (DNS-based interception, or an L7 redirect such as an Envoy/Istio listener "
            "that keeps Host); hopline intercepts nothing itself",
        ),
        "header": (
            f"the {t.header!r} header, set by the interception layer",
            "header",
            "by the surrounding network (an L7 redirect that names the original destination in a header); hopline "
            "intercepts nothing itself",
        ),
        "socket": (
            "the accepted socket's original destination (getsockopt SO_ORIGINAL_DST, IP6T_SO_ORIGINAL_DST for IPv6)"
            + (", which the request's Host must name (421 otherwise)" if t.check_host else ""),
            "SO_ORIGINAL_DST",
            "by the surrounding network: an iptables/nftables REDIRECT (or a mesh's redirect) of the clients' "
            "connections to hopline's listener, hopline's own outbound connections excluded (its uid)",
        ),
    }[t.destination]
    return Deployment(
        modes=["transparent"],
        client_transports=["streamable-http", "sse"],
        backend_transports=["streamable-http", "sse"],
        tls=TLS_DISPOSITIONS[t.tls],
        token_propagation="passthrough",
        layers=layers,
        handshake={"transparent": _level_handshake(t)},
        transparent={
            "awareness_level": t.level,
            "interception": interception,
            "mechanism": mechanism,
            "original_destination": how,
            "tls_disposition": {
                "plaintext": "plaintext",
                "terminated": "termination by the surrounding infrastructure",
                "terminate": "termination and re-origination",
                "passthrough": "passthrough",
            }[t.tls],
            "handshake_per_connection": {
                "dual-handshake": sorted(set(t.destinations) - set(t.single_handshake)) if t.level == 2 else [],
                "single-handshake passthrough": sorted(t.single_handshake) if t.level == 2 else sorted(t.destinations),
                "tracked": "per client connection; the live counts are in the served declaration"
                if t.level == 2
                else "level 1: every connection",
            },
            "legacy_sse": f"level 2 serves {t.sse_path} and /messages through the destination's SSE endpoint"
            if t.level == 2 and t.sse_path
            else "streamed unread (level 1)"
            if t.level == 1
            else "not served",
            "authentication": "hopline starts no authentication flow; the client's Authorization reaches the "
            "destination unchanged, and a destination's 401 challenge (WWW-Authenticate, RFC 9728 metadata) reaches "
            "the client unchanged" + (" (relayed in place of the answer at level 2)" if t.level == 2 else ""),
            "tls_downgrade": "allowed (trusted_network: a trusted network boundary)" if t.trusted_network else "never",
            "destinations": sorted(t.destinations),
            "header_policy": (
                "CEL over the connection's destination, source and SNI"
                if t.tls == "passthrough"
                else "CEL over HTTP method, path, headers, source, SNI"
            )
            if t.rules
            else "none",
        },
    )


def run(args: argparse.Namespace) -> int:
    if getattr(args, "capabilities", False):
        sys.stdout.write(orjson.dumps(capabilities(), option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    deployment = None
    if args.config is not None:
        from hopline.config.load import ConfigError, load_config

        try:
            deployment = for_config(load_config(args.config))
        except (ConfigError, OSError) as exc:
            print(f"hopline declare: {exc}", file=sys.stderr)
            return 1
    sys.stdout.write(orjson.dumps(declare(deployment), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
