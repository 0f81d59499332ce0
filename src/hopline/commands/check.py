"""``hopline check CONFIG``: validate a configuration file and explain what it sets up.

Exit 0 with a short explanation on stdout (mode, listen URL, naming and collision
strategy, each backend with its kind, command or URL and exposed-name pattern, and
the notes of an ``mcpServers`` import); exit 1 with every problem on stderr when the
file is unreadable or invalid; exit 2 for bad usage (argparse). Never a traceback.
Values that came from ``${VAR}`` are shown as written, and URL passwords and query
values are masked, so the output never echoes a secret.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit, urlunsplit

if TYPE_CHECKING:
    from hopline.config.schema import BackendConfig, GatewayConfig
    from hopline.config.transparent import TransparentConfig

COLLISIONS = {
    "prefix": "a clashing unprefixed name falls back to its prefixed form",
    "priority": "the higher priority keeps a clashing name; the others fall back to their prefixed form",
    "rename": "only an explicit rename keeps a clashing name; the other claims are withheld",
    "reject": "every claim on a clashing name is withheld",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="configuration file (hopline YAML, or a desktop client's mcpServers JSON)")


def run(args: argparse.Namespace) -> int:
    from hopline.config.load import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    except Exception as exc:  # a bug must still not greet an operator with a traceback
        print(f"{args.config}: could not be checked ({type(exc).__name__})", file=sys.stderr)
        return 1
    try:
        converted = _check_specs(config, args.config)
        if config.mode != "transparent":  # what `serve` builds at start, built the way it does
            from hopline.compose.preflight import preflight

            authenticator = preflight(config, args.config, specs=False)
            if authenticator is not None:
                _close(authenticator)
        elif config.transparent is not None and config.transparent.tls == "terminate":  # the CA, loaded as serve does
            from hopline.compose.transparent import minter
            from hopline.transports.transparent_tls import CAError

            try:
                minter(config.transparent).close()
            except CAError as exc:
                key = "ca" if config.transparent.ca is not None else "certificate"
                print(f"{args.config}: transparent.{key}: {exc}", file=sys.stderr)
                return 1
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"{args.config}: could not be checked ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    print("\n".join([f"{args.config}: valid", *explain(config), *converted]))
    return 0


def _close(authenticator) -> None:
    from hopline.compose.preflight import run_sync

    run_sync(authenticator.aclose())


def _check_specs(config: GatewayConfig, source: str) -> list[str]:
    """Conversion backends: load and convert each OpenAPI spec; say what it gives."""
    if not any(b.openapi is not None for b in config.backends.values()):
        return []
    from hopline.conversion.preflight import check_specs

    lines = ["openapi backends:"]
    for bid, (converted, base_url) in check_specs(config, source).items():
        tools = [op.tool for op in converted.operations]
        lines.append(
            f"  {bid}: {len(tools)} tool{'s' if len(tools) != 1 else ''} calling {_mask(base_url)}: "
            f"{', '.join(tools[:12])}{', ...' if len(tools) > 12 else ''}"
        )
        lines += [f"    skipped {label}: {why}" for label, why in converted.skipped.items()]
        allowed = config.backends[bid].allow_addresses
        guard = (
            "allowed link-local/metadata: " + ", ".join(allowed)
            if allowed
            else "link-local and cloud-metadata addresses refused"
        )
        lines.append(f"    {guard}; redirects: same-origin only, at most 3 (spec), none (calls)")
    return lines


def explain(config: GatewayConfig) -> list[str]:
    listen = config.listen
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    enabled = sum(b.enabled for b in config.backends.values())
    lines = [
        f"mode: {config.mode} ({len(config.backends)} backend{'s' if len(config.backends) != 1 else ''}, "
        f"{enabled} enabled)",
        f"listen: http://{host}:{listen.port}{'' if config.mode == 'transparent' else listen.path}",
        _limits(config),
        f"  sessions: at most {listen.max_sessions}, {listen.max_pending_sessions} being created at once "
        "(503 past either), "
        f"handshake within {min(listen.handshake_timeout, listen.request_timeout):g} s; "
        f"stream buffer {listen.stream_buffer_messages} messages / {listen.stream_buffer_bytes} bytes",
    ]
    if config.mode == "transparent" and config.transparent is not None:
        t = config.transparent
        what = (
            "bodies are not read"
            if t.level == 1
            else "a Reverse-mode gateway per destination (policy, resilience, tools sections apply)"
        )
        lines.append(
            f"awareness level {t.level}: {what}; the destination comes from "
            + {
                "host": "Host",
                "header": t.header,
                "socket": "the socket (SO_ORIGINAL_DST after a REDIRECT)"
                + ("; a Host that does not name it is refused" if t.check_host else ""),
            }[t.destination]
        )
        lines += [f"  {name} -> {_mask(url)}" for name, url in t.destinations.items()]
        lines.append(
            "tls: "
            + {
                "plaintext": "plaintext (a warning is logged when it crosses a network)",
                "terminated": "terminated in front of hopline by the surrounding infrastructure",
                "terminate": "terminated by hopline ("
                + (f"certificates for the SNI minted from {t.ca.cert}" if t.ca else f"the certificate {_cert(t)}")
                + "), re-originated to https destinations, verified against the system's trust store",
                "passthrough": "passthrough (the encrypted stream forwarded unread; judged on the original destination "
                "and SNI)",
            }[t.tls]
            + ("; plaintext to http:// destinations allowed (trusted_network)" if t.trusted_network else "")
        )
        if t.level == 2 and t.single_handshake:
            lines.append(f"  carried at level 1 (single-handshake): {', '.join(t.single_handshake)}")
        lines.append(
            f"policy: {len(t.rules)} {'connection' if t.tls == 'passthrough' else 'header'} rule(s)"
            if t.rules
            else "policy: none (every request to a listed destination is forwarded)"
        )
        if t.tls != "passthrough":  # passthrough sees no headers
            lines += _transparent_headers(t)
        return lines
    if config.mode in ("reverse", "sidecar"):
        lines.append(f"names: passed through unchanged ({config.mode} mode)")
    else:
        lines.append(
            f"names: {{backend}}{config.routing.delimiter}{{name}}, at most {config.routing.max_name_length} characters"
        )
        lines.append(f"collisions: {config.routing.collision} ({COLLISIONS[config.routing.collision]})")
    if config.state is not None:
        lines.append(_replicas(config))
    lines.append("backends:")
    for bid, backend in config.backends.items():
        lines.append(
            f"  {bid} ({backend.kind()}{'' if backend.enabled else ', disabled'}): {_target(config, bid, backend)}"
        )
        lines.append(f"    exposed as {_pattern(config, bid, backend)}{_extras(config, backend)}")
        if backend.command is not None:
            lines.append(f"    environment: {_environment(backend)}")
        lines += _children(config, backend)
    lines += _tool_modes(config, f"http://{host}:{listen.port}")
    if config.import_notes:
        lines += ["notes:", *(f"  {note}" for note in config.import_notes)]
    if config.acp is not None:
        from hopline.acp.settings import explain as explain_acp

        lines += explain_acp(config)
    return lines


def _cert(t: TransparentConfig) -> str:
    return t.certificate.cert if t.certificate is not None else ""


def _transparent_headers(t: TransparentConfig) -> list[str]:
    """What a level 1 rule can trust: the headers refused when repeated, and the stance on unknown methods."""
    from hopline.layers.policy.transparent import relevance

    reads = relevance(t.rules)
    strict = reads.refused_when_repeated([t.header] if t.destination == "header" else [])
    lines = [
        "  repeated headers refused (400): "
        + ("any (a rule reads http.headers as a whole)" if strict is None else ", ".join(sorted(strict)))
    ]
    if reads.method:
        stance = {
            "refuse": "refused (403, fail closed)",
            "allow": 'allowed (the rules see mcp_method "")',
            "read_body": f"read from the body's JSON-RPC envelope (at most {t.max_method_body} bytes)",
        }[t.unknown_method]
        lines.append(
            "  mcp_method: the Mcp-Method header of 2026-07-28 requests; other requests' method is "
            f"{stance} (unknown_method: {t.unknown_method})"
        )
    return lines


def _limits(config: GatewayConfig) -> str:
    """The front door's bounds (every HTTP listener), as they will apply."""
    lim = config.listen.limits
    return (
        f"limits: {lim.max_connections} connections ({lim.max_connections_per_source} per source); idle "
        f"{lim.idle_timeout:g}s, "
        f"header {lim.header_timeout:g}s, body {lim.body_timeout:g}s; head at most {lim.max_header_bytes} "
        f"bytes, {lim.max_headers} fields, "
        f"target {lim.max_url_bytes} bytes"
    )


def _tool_modes(config: GatewayConfig, base: str) -> list[str]:
    """How each endpoint shows tools (Layer 7), when anything but the whole catalogue."""
    tools = config.tools
    endpoints = {config.listen.path: tools, **tools.endpoints}
    if tools.all_modes() == {"standard"}:
        return []
    lines = ["tool modes:"]
    for path, endpoint in endpoints.items():
        lines.append(f"  {base}{path}: {endpoint.mode}")
        for name, group in endpoint.groups.items():
            lines.append(f"    group {name}: {group.mode} for {', '.join(group.backends)}")
    if "code" in tools.all_modes():
        c = tools.code
        lines.append(
            f"  code sandbox: up to {c.max_workers} workers, {c.spares} spare, unused ones reaped after "
            f"{c.idle_timeout:g}s; "
            f"queue {c.queue} runs, each waiting up to {c.queue_wait:g}s; a run: {c.timeout:g}s, "
            f"{c.memory // 2**20} MiB, {c.max_calls} tool calls"
        )
    return lines


def _pattern(config: GatewayConfig, bid: str, backend: BackendConfig) -> str:
    if config.mode in ("reverse", "sidecar"):
        return "<name>"
    if not backend.prefix:
        return "<name> (prefix off)"
    return f"{bid}{config.routing.delimiter}<name>"


def _extras(config: GatewayConfig, backend: BackendConfig) -> str:
    extras = []
    if backend.rename:
        extras.append("renamed " + ", ".join(f"{a} -> {b}" for a, b in backend.rename.items()))
    if config.routing.collision == "priority":
        extras.append(f"priority {backend.priority}")
    if backend.openapi is None:  # the effective `share` (stateless: true is its alias)
        extras.append(f"share: {backend.share_kind()}")
    if backend.timeout is not None:
        extras.append(f"timeout {backend.timeout:g}s")
    return "; " + "; ".join(extras) if extras else ""


def _environment(backend: BackendConfig) -> str:
    """What a stdio child inherits (names only: values may be secrets)."""
    inherit = backend.inherit_env
    words = ["all of hopline's" if inherit is True else "the safe list"]
    if inherit and inherit is not True:
        words.append("inherit_env " + ", ".join(inherit))
    if backend.env:
        words.append("env " + ", ".join(backend.env))
    return " + ".join(words)


def _children(config: GatewayConfig, backend: BackendConfig) -> list[str]:
    """A stdio backend's resource model (per principal, shared or isolated) and its pool's
    bounds; a warning where one child serves several principals."""
    open_to = [
        why
        for why, yes in (
            ("auth is on", config.auth is not None),
            ("the listener is not loopback", not config.listen.loopback()),
        )
        if yes
    ]
    warn = []  # shared (or stateless: true) where several callers may come
    if backend.shares() and not backend.per_principal() and open_to:
        warn = [
            "    warning: share: shared with "
            + " and ".join(open_to)
            + ": one backend session serves every principal (what it holds in memory, one caller's state or "
            "scope, reaches the others); `share: principal` (the default for command backends) keeps a child "
            "per principal"
        ]
    if backend.command is None:
        return warn
    cap, prewarm, idle = backend.pool_bounds()
    if backend.share_kind() == "shared":
        return [*warn, f"    children: shared (one child serves every client session), at most {cap}"]
    if backend.share_kind() == "principal":
        anonymous = (
            "anonymous clients are one principal"
            if config.listen.loopback() or config.routing.share_anonymous
            else "each anonymous client session is a principal of its own"
        )
        return [
            f"    children: one per principal (shared by that principal's client sessions; {anonymous}), at most "
            f"{cap}, an idle one reaped after {idle:g}s"
        ]
    return [
        f"    children: isolated (a child per client session), at most {cap}, {prewarm} "
        f"spare{'s' if prewarm != 1 else ''} after first use, "
        f"a session idle {idle:g}s is parked and its child reaped"
    ]


def _replicas(config: GatewayConfig) -> str:
    """What replicas share (never the key, nor the Redis URL's password)."""
    state = config.state
    assert state is not None
    keys = 1 + len(state.previous_session_keys)
    line = f"replicas: session ids sealed ({keys} key{'' if keys == 1 else 's'}: any replica with it resumes a session)"
    if state.redis_url is None:
        return line + "; no redis_url: a DELETE and subscriptions stay on the replica that saw them"
    u = urlsplit(state.redis_url)
    where = f"{u.scheme}://{u.hostname or ''}{f':{u.port}' if u.port else ''}{u.path}"
    return line + f"; shared in Redis {where} (prefix {state.prefix!r}; store down: {state.on_store_down})"


def _target(config: GatewayConfig, bid: str, backend: BackendConfig) -> str:
    if backend.command is not None:
        words = [config.as_written("backends", bid, "command") or backend.command]
        words += [config.as_written("backends", bid, "args", i) or a for i, a in enumerate(backend.args)]
        return shlex.join(words)
    if backend.openapi is not None:
        spec = config.as_written("backends", bid, "openapi") or (
            _mask(backend.openapi) if "://" in backend.openapi else backend.openapi
        )
        return f"{spec} (OpenAPI)"
    url = config.as_written("backends", bid, "url") or _mask(backend.url or "")
    return url if backend.transport == "auto" else f"{url} ({backend.transport})"


def _mask(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username}:***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(f"{k}=***" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
