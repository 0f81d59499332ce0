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

            authenticator = preflight(config, args.config, specs=False, writes=False)
            if authenticator is not None:
                _close(authenticator)
            from hopline.compose.sandboxing import unenforceable

            refused = unenforceable(config)
            for bid, why in refused:
                print(f"{args.config}: backends.{bid}.sandbox: cannot be enforced here: {why}", file=sys.stderr)
            if refused:
                return 1
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
    warned = warnings(config)
    head = f"{args.config}: valid"
    if warned:
        head += f", with {len(warned)} warning{'s' if len(warned) != 1 else ''}"
    print("\n".join([head, *(f"  warning: {w}" for w in warned), *explain(config), *converted]))
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
    lines += _auth(config)
    lines += _policy(config)
    lines.append("backends:")
    for bid, backend in config.backends.items():
        lines.append(
            f"  {bid} ({backend.kind()}{'' if backend.enabled else ', disabled'}): {_target(config, bid, backend)}"
        )
        lines.append(f"    exposed as {_pattern(config, bid, backend)}{_extras(config, backend)}")
        if backend.command is not None:
            from hopline.compose.sandboxing import describe

            lines.append(f"    environment: {_environment(backend)}")
            lines.append(f"    sandbox: {describe(config, bid)}")
        lines += _children(config, backend)
    lines += _tool_modes(config, f"http://{host}:{listen.port}")
    if config.import_notes:
        lines += ["notes:", *(f"  {note}" for note in config.import_notes)]
    if config.acp is not None:
        from hopline.acp.settings import explain as explain_acp

        lines += explain_acp(config)
    return lines


def warnings(config: GatewayConfig) -> list[str]:
    """Risky or broken choices the schema allows: a listener open to the network without
    `auth`, a secret written in the file, a command that is not installed, ..."""
    from hopline.transports.http_util import SecurityPolicy
    from hopline.transports.targets import find_command

    out: list[str] = []
    listen = config.listen
    loopback = SecurityPolicy(bound_host=listen.host).loopback
    if config.mode != "transparent" and not loopback and config.auth is None:
        out.append(
            f"listen.host: {listen.host} is reachable from the network and there is no `auth`: anyone who can reach "
            f"port {listen.port} can use every backend (add auth.api_keys or auth.issuers, or listen on 127.0.0.1)"
        )
    if loopback and not listen.check_host:
        out.append(
            "listen.check_host: false on a loopback listener: a web page the user opens can reach it through DNS "
            "rebinding (name its Host in listen.allowed_hosts instead)"
        )
    metrics = config.observability.metrics
    if metrics.port is not None and not SecurityPolicy(bound_host=metrics.host).loopback:
        out.append(
            f"observability.metrics.host: the admin listener on {metrics.host} has no authentication: whoever reaches "
            "it sees /status and /config (secrets redacted); keep its port off the load balancer"
        )
    for bid, backend in config.backends.items():
        if backend.command is not None and backend.enabled:
            if find_command(backend.command, backend.env, backend.cwd) is None:
                out.append(
                    f"backends.{bid}.command: {_not_found(backend.command, backend.env)}: this backend cannot start "
                    "(install it or give its full path)"
                )
            if backend.inherit_env is True:
                out.append(
                    f"backends.{bid}.inherit_env: true gives the child all of hopline's environment, the other "
                    "backends' secrets included (list the names it needs instead)"
                )
    if config.acp is not None:
        for i, c in enumerate(config.acp.components):
            if c.command is not None and find_command(c.command, c.env, c.cwd) is None:
                out.append(
                    f"acp.components[{i}].command: {_not_found(c.command, c.env)}: the chain cannot start "
                    "(install it or give its full path)"
                )
    out += _literal_secrets(config)
    auth = config.auth
    if auth is not None:
        for bid, b in auth.backends.items():
            if b.mode == "passthrough":
                out.append(
                    f"auth.backends.{bid}.mode: passthrough sends each client's own token to the backend (the "
                    "backend can use it elsewhere); prefer exchange or client_credentials"
                )
    policy = config.policy
    for i, ic in enumerate(policy.interceptors):
        if ic.fail_open:
            out.append(f"policy.interceptors[{i}].fail_open: true: a call goes through when this interceptor fails")
        if ic.mode == "audit":
            out.append(f"policy.interceptors[{i}].mode: audit: its decisions are recorded, none is applied")
    limits = policy.rate_limits
    if (
        limits is not None
        and limits.store == "redis"
        and limits.redis is not None
        and limits.redis.on_unavailable == "open"
    ):
        out.append("policy.rate_limits.redis.on_unavailable: open: no limit holds while Redis is unreachable")
    return out


def _not_found(command: str, env: dict[str, str] | None) -> str:
    if "/" in command:
        return f"{command!r}: there is no executable file at that path"
    return f"{command!r} is not on PATH" + (" (the PATH its env sets)" if env and "PATH" in env else "")


def _literal_secrets(config: GatewayConfig) -> list[str]:
    """Secrets written in the file itself rather than taken from the environment (``${VAR}``)."""
    spots: list[tuple[tuple[str | int, ...], str | None]] = []
    auth = config.auth
    if auth is not None:
        spots += [(("auth", "api_keys", i, "key"), k.key) for i, k in enumerate(auth.api_keys)]
        for i, issuer in enumerate(auth.issuers):
            spots += [(("auth", "issuers", i, "keys", j, "secret"), k.secret) for j, k in enumerate(issuer.keys)]
        for bid, b in auth.backends.items():
            spots += [(("auth", "backends", bid, "secret"), b.secret)]
            spots += [(("auth", "backends", bid, "client_secret"), b.client_secret)]
        if auth.connect is not None:
            spots.append((("auth", "connect", "secret_key"), auth.connect.secret_key))
    if config.state is not None:
        spots.append((("state", "session_key"), config.state.session_key))
    spots += [(("policy", "webhooks", i, "secret"), w.secret) for i, w in enumerate(config.policy.webhooks)]
    out = []
    for loc, value in spots:
        if value and config.as_written(*loc) is None:
            from hopline.config.errors import format_path

            out.append(
                f"{format_path(loc)} is written in the file: whoever reads the file has it (use ${{VAR}} and set the "
                "variable where hopline runs)"
            )
    return out


def _auth(config: GatewayConfig) -> list[str]:
    """Who may call: what ``auth`` sets up (names and counts, never a key)."""
    auth = config.auth
    if auth is None:
        return ["auth: none (every caller is anonymous)"]
    lines = [f"auth: clients authenticate; resource {auth.resource}"]
    for issuer in auth.issuers:
        where = [f"JWKS {_mask(issuer.jwks_url)}"] if issuer.jwks_url else []
        if issuer.keys:
            where.append(f"{len(issuer.keys)} static key{'s' if len(issuer.keys) != 1 else ''}")
        lines.append(f"  JWT issuer {issuer.issuer} ({', '.join(where)})")
    if auth.issuers:
        lines.append(
            f"  tokens: audience {auth.resource}, typ {', '.join(auth.token_types)}, leeway {auth.leeway:g} s"
            + ("" if auth.require_exp else ", exp not required")
        )
    if auth.api_keys:
        names = ", ".join(k.name for k in auth.api_keys)
        lines.append(f"  API keys in header {auth.api_key_header}: {names}")
    if auth.required_scopes:
        lines.append(f"  every request needs scopes: {', '.join(auth.required_scopes)}")
    for bid, b in auth.backends.items():
        lines.append(f"  backend {bid}: credential {b.mode}" + (f" in {b.header}" if b.mode != "none" else ""))
    if auth.connect is not None:  # issue 32: per-user upstream accounts
        c = auth.connect
        lines.append(f"  per-user accounts: consent at {c.public_url}/connect/start, redirect URI "
                     f"{c.public_url}/connect/callback, tokens sealed in {c.store}")  # fmt: skip
    return lines


def _policy(config: GatewayConfig) -> list[str]:
    """What is enforced on each call (Layer 5)."""
    p = config.policy
    if p.is_empty():
        return ["policy: none (every tool, prompt and resource visible and callable)"]
    lines = ["policy:"]
    if p.rules:
        lines.append(
            f"  rules: {len(p.rules)} CEL rule{'s' if len(p.rules) != 1 else ''} (an item is visible iff one "
            "is true): " + ", ".join(name for name, _ in p.named_rules())
        )
    if p.rate_limits is not None:
        rl = p.rate_limits
        where = "in memory (per process)" if rl.store == "memory" else "in Redis (shared by replicas)"
        lines.append(f"  rate limits: {len(rl.limits)}, kept {where}")
    if p.dlp is not None:
        d = p.dlp
        builtins = (
            "all built-in patterns"
            if d.builtins is True
            else ("no built-in pattern" if d.builtins is False else "built-in " + ", ".join(d.builtins))
        )
        own = f" + {len(d.patterns)} of yours" if d.patterns else ""
        where = " and ".join(w for w, on in (("arguments", d.arguments), ("results", d.results)) if on) or "nothing"
        lines.append(f"  DLP: {builtins}{own}, redacting {where}")
    if p.pinning is not None:
        pin = p.pinning
        changed = {"flag": "flagged", "withhold": "withheld", "allow": "allowed"}[pin.on_change]
        lines.append(f"  pinning: {pin.lockfile or 'first sight, in memory'}; a tool that changes is {changed}")
    if p.audit is not None:
        lines.append(f"  audit: to {p.audit.sink}")
    lines.extend(_chain(config))
    return lines


def _chain(config: GatewayConfig) -> list[str]:
    """The interceptor chain's members in the order they run on a request (responses: reverse)."""
    p = config.policy
    members: list[str] = []
    if p.dlp is not None:
        members.append("DLP redaction (built in)")
    if p.rules or p.pinning is not None:
        members.append("visibility guard (built in)")
    if p.rate_limits is not None:
        members.append("rate limits (built in)")
    for ic in p.interceptors:
        label = ic.name or ic.class_ or ic.entry_point
        members.append(f"interceptor {label} (in process; {ic.mode}, fail {'open' if ic.fail_open else 'closed'})")
    for s in p.interceptor_servers:
        where = f"stdio: {s.command}" if s.command is not None else f"url: {_mask(s.url or '')}"
        mode = s.mode or "the server's mode (default enforce)"
        failure = {True: "fail open", False: "fail closed"}.get(
            s.fail_open, "the server's failure policy (default closed)"
        )
        timeout = (
            f"timeout {s.timeout:g} s"
            if s.timeout is not None
            else f"timeout {s.default_timeout:g} s (or the server's)"
        )
        extra = f"; only {', '.join(s.events)}" if s.events else ""
        named = f"; overrides for {', '.join(s.interceptors)}" if s.interceptors else ""
        members.append(
            f"interceptor server {s.name} (SEP-2624, {where}; {mode}, {failure}, {timeout}, "
            f"{s.max_concurrency} in flight{extra}{named})"
        )
    for w in p.webhooks:
        signed = "signed" if w.secret else "unsigned"
        failure = "fail open" if w.fail_open else "fail closed"
        members.append(
            f"webhook {w.name} ({w.type}, {_mask(w.url)}, {signed}; {w.mode}, {failure}"
            f", timeout {w.timeout:g} s, {w.phase} of {', '.join(w.events)})"
        )
    if not members:
        return []
    return ["  interceptor chain, in order on a request (responses in reverse):"] + [
        f"    {i}. {m}" for i, m in enumerate(members, 1)
    ]


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
        from hopline.observability.redact import redact_args

        words = [config.as_written("backends", bid, "command") or backend.command]
        shown = redact_args(backend.args)  # a literal credential (--header "Authorization: Bearer ...") is not echoed
        words += [config.as_written("backends", bid, "args", i) or shown[i] for i in range(len(backend.args))]
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
