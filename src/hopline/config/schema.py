"""The configuration schema: pydantic models for the one configuration file (DESIGN §3.8).

In: a mapping already parsed from YAML/JSON, with ``${VAR}`` already interpolated and
any ``mcpServers`` section already turned into ``backends`` (``load.py`` does both).
Out: a :class:`GatewayConfig`, or a pydantic ``ValidationError``. Every model forbids
unknown keys, so a typo is an error rather than a silently ignored setting.

Rules that involve more than one field are reported as one error of type
:data:`PROBLEMS` whose ``ctx["problems"]`` lists ``(relative loc, message)`` pairs, so
the loader can print each one at its own key path. Messages never contain a value
from the file (values may be secrets interpolated from the environment); backend ids
are keys, never interpolated, and may be named.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from hopline.bound import loopback_name
from hopline.config.section import PROBLEMS, Loc, Section, http_parts, raise_problems  # noqa: F401 (re-exported)
from hopline.config.acp import AcpConfig
from hopline.config.auth import AuthConfig
from hopline.config.observability import ObservabilityConfig
from hopline.config.policy import PolicyConfig
from hopline.config.resilience import ResilienceConfig
from hopline.config.sandbox import PRESETS, SandboxConfig
from hopline.config.tools import ToolsConfig
from hopline.config.state import StateConfig
from hopline.config.transparent import TransparentConfig
from hopline.config.ids import DEFAULT_DELIMITER, ID_PATTERN, NAME_CHARSET, id_problem, is_charset_text
from hopline.layers.routing.namespace import Namespace

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 §5.6.2
MiB = 1024 * 1024
POOL_MAX_CHILDREN = 8  # a stdio backend's child processes at most (transports/child_pool.py)
POOL_IDLE_TIMEOUT = 300.0  # an isolated backend session idle this long is parked, its child reaped


_Section = Section


class BackendConfig(_Section):
    """One backend: a stdio child (``command``), an HTTP endpoint (``url``), or a REST API
    described by OpenAPI (``openapi``, Conversion mode: its operations become tools)."""

    command: str | None = Field(None, min_length=1, description="Program to start as a stdio MCP server.")
    args: list[str] = Field(default_factory=list, description="Arguments for `command`.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for `command` (use ${VAR} for secrets)."
    )
    cwd: str | None = Field(None, min_length=1, description="Working directory for `command`.")
    inherit_env: bool | list[str] = Field(
        default_factory=list,
        description="More of hopline's environment for `command` than the safe list (PATH, HOME, USER, LOGNAME, SHELL, "
        "TERM, LANG, LC_*, TZ, TMPDIR, XDG_* base dirs, CA bundle paths): variable names or glob patterns (`AWS_*`), "
        "or true for everything. `env` wins over both.",
    )
    url: str | None = Field(None, description="http(s) URL of a remote MCP server.")
    transport: Literal["auto", "streamable-http", "sse"] = Field(
        "auto", description="HTTP transport of `url`; auto tries Streamable HTTP, then legacy SSE."
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent to `url`, or to the API of an `openapi` backend (use ${VAR} for tokens).",
    )
    openapi: str | None = Field(
        None,
        min_length=1,
        description="OpenAPI 3.0/3.1 description (JSON or YAML) of a REST API whose operations become tools: a file "
        "path (relative to this file's directory) or an http(s) URL.",
    )
    base_url: str | None = Field(
        None, description="For `openapi`: where the API's requests go (default: the spec's first servers[].url)."
    )
    operations: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, description="For `openapi`: the operationIds to expose (default: all)."
    )
    allow_addresses: list[str] = Field(
        default_factory=list,
        description="For `openapi`: link-local or cloud-metadata networks (CIDR or address; refused "
        "by default, e.g. 169.254.169.254) that the spec URL and the API may reach anyway.",
    )
    prefix: bool = Field(
        True, description="false: expose this backend's names without the `{backend}{delimiter}` prefix."
    )
    stateless: bool = Field(False, description="Share one backend session among all clients.")
    share: Literal["principal", "shared", "isolated"] | None = Field(
        None,
        description="stdio backends: 'principal' (default for command backends): a child per principal, shared by "
        "that principal's client sessions, from the capped pool (nothing a child holds reaches another principal); "
        "'shared': one child serves every client session of every principal, ids remapped; 'isolated': a child per "
        "client session. Absent: principal for command, isolated for url (shared where `stateless: true`).",
    )
    priority: int = Field(0, description="Winner order for collision strategy `priority` (higher wins).")
    rename: dict[str, str] = Field(
        default_factory=dict, description="Original name -> exact exposed name (never prefixed)."
    )
    timeout: float | None = Field(None, gt=0, description="Per-request timeout in seconds.")
    mediate_input: bool | None = Field(
        None,
        description="For a handshake-era backend: run a 2026-07-28 client's call that may need input (sampling, "
        "elicitation, roots) on a backend session of its own, held across the client's input_required retries. "
        "Default: on for `url` backends; off for `command` backends (it would start a process per such call).",
    )
    max_children: int | None = Field(
        None,
        ge=1,
        description=f"`command` backends: child processes at most, spares and shared ones included; a client session "
        f"beyond it gets -31001 for this backend (retry_after in its data). Default {POOL_MAX_CHILDREN}.",
    )
    prewarm: int | None = Field(
        None,
        ge=0,
        description="Isolated `command` backends: spare children started ahead, from the backend's first use on, so a "
        "new session need not wait for one to start (they count against `max_children`). Default 1; 0 for shared "
        "backends.",
    )
    idle_timeout: float | None = Field(
        None,
        gt=0,
        description="Isolated `command` backends: seconds a client's backend session may have nothing in flight "
        "before it is closed and its child reaped (the next request that needs it reopens it). Default "
        f"{POOL_IDLE_TIMEOUT:g}.",
    )
    sandbox: SandboxConfig | None = Field(
        None,
        description="`command` backends: the permission profile its children run under (bubblewrap on Linux), or a "
        f"preset name alone ({', '.join(PRESETS)}). Absent: unconfined. See docs/features/sandbox.md.",
    )
    enabled: bool = Field(True, description="false: keep the entry but do not connect to it.")
    required: bool = Field(
        False,
        description="true: the gateway is not ready (/readyz 503) while this backend is down, starting or withdrawn "
        "by its breaker; other backends never make it unready once started.",
    )
    description: str | None = Field(None, description="Free text for operators.")

    def kind(self) -> Literal["stdio", "http", "openapi"]:
        return "stdio" if self.command is not None else "openapi" if self.openapi is not None else "http"

    def share_kind(self) -> Literal["principal", "shared", "isolated"]:
        """`share` in effect: as set, else shared for `stateless`, per principal for `command` backends."""
        if self.share is not None:
            return self.share
        return "shared" if self.stateless else "principal" if self.command is not None else "isolated"

    def pool_bounds(self) -> tuple[int, int, float | None]:
        """A `command` backend's child pool in effect: (max_children, prewarm, idle_timeout)."""
        kind = self.share_kind()
        prewarm = self.prewarm if self.prewarm is not None else 1 if kind == "isolated" else 0
        idle = (self.idle_timeout or POOL_IDLE_TIMEOUT) if kind != "shared" else None
        return self.max_children or POOL_MAX_CHILDREN, prewarm if kind != "shared" else 0, idle

    def shares(self) -> bool:
        """Whether client sessions use shared backend sessions (per client-capability set):
        ``share: shared`` (every client; ``stateless: true`` is its alias) or ``principal``
        (each principal's clients; the default for ``command``)."""
        return self.share_kind() != "isolated"

    def per_principal(self) -> bool:
        """Whether this backend's shared sessions are one per principal (``share: principal``)."""
        return self.share_kind() == "principal"

    @field_validator("url", "base_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None:
            http_parts(url)
        return url

    @field_validator("inherit_env", mode="before")
    @classmethod
    def _names_or_patterns(cls, value: Any) -> Any:
        if not isinstance(value, bool) and not (
            isinstance(value, list) and all(isinstance(v, str) and v for v in value)
        ):
            raise ValueError("must be true, false, or a list of variable names or glob patterns (non-empty strings)")
        return value

    @field_validator("sandbox", mode="before")
    @classmethod
    def _preset_name(cls, value: Any) -> Any:
        return {"profile": value} if isinstance(value, str) else value

    @field_validator("headers")
    @classmethod
    def _http_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        # A CR or LF from an interpolated secret would split the request: refuse it here.
        raise_problems(
            [
                (
                    (name,),
                    "a header name must be an HTTP token"
                    if not _TOKEN.fullmatch(name)
                    else "a header value must not contain CR, LF or NUL",
                )
                for name, value in headers.items()
                if not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\0")
            ]
        )
        # A field value has no leading or trailing whitespace (RFC 9110 §5.5); HTTP clients refuse
        # one that does, so `Bearer ${TOKEN:-}` with TOKEN unset is sent as `Bearer`, not refused.
        return {name: value.strip(" \t") for name, value in headers.items()}

    @model_validator(mode="after")
    def _one_kind(self) -> BackendConfig:
        problems: list[tuple[Loc, str]] = []
        kinds = [k for k in ("command", "url", "openapi") if getattr(self, k) is not None]
        if len(kinds) != 1:
            which = {0: "neither is set", 2: "both are set", 3: "all three are set"}[len(kinds)]
            if kinds == ["command", "url"]:
                problems.append(((), f"set exactly one of `command` (stdio backend) or `url` (HTTP backend); {which}"))
            else:
                problems.append(
                    (
                        (),
                        "set exactly one of `command` (stdio backend), `url` (HTTP backend) or `openapi` "
                        f"(REST API); {which}",
                    )
                )
        else:
            has = {"command": "a `command`", "url": "a `url`", "openapi": "an `openapi`"}[kinds[0]]
            owners = {
                "headers": ("url", "openapi"),
                "transport": ("url",),
                "args": ("command",),
                "env": ("command",),
                "cwd": ("command",),
                "inherit_env": ("command",),
                "base_url": ("openapi",),
                "operations": ("openapi",),
                "max_children": ("command",),
                "prewarm": ("command",),
                "idle_timeout": ("command",),
                "sandbox": ("command",),
            }
            for key, owner in owners.items():
                if kinds[0] not in owner and getattr(self, key) not in ({}, [], None, "auto"):
                    also = " (and `openapi` ones)" if key == "headers" else ""
                    problems.append(((key,), f"applies to `{owner[0]}` backends only{also}; this backend has {has}"))
        if (
            self.command is not None
            and self.prewarm is not None
            and self.prewarm > (self.max_children or POOL_MAX_CHILDREN)
        ):
            problems.append(
                (
                    ("prewarm",),
                    f"spares count against `max_children` ({self.max_children or POOL_MAX_CHILDREN}); "
                    "prewarm must not exceed it",
                )
            )
        seen: dict[str, str] = {}
        for original, exposed in self.rename.items():
            if not original or not exposed:
                problems.append((("rename", original), "names in a rename map must not be empty"))
            elif exposed in seen:
                problems.append((("rename", original), f"exposes the same name as {seen[exposed]!r}"))
            seen.setdefault(exposed, original)
        raise_problems(problems)
        return self


class RoutingConfig(_Section):
    """How backend names are namespaced and what happens when two collide (draft §5.3)."""

    delimiter: str = Field(
        DEFAULT_DELIMITER,
        description=f"Separator in `{{backend}}{{delimiter}}{{name}}`; characters from {NAME_CHARSET}.",
    )
    collision: Literal["prefix", "priority", "rename", "reject"] = Field(
        "prefix", description="Collision strategy, declared in the conformance declaration."
    )
    max_name_length: int = Field(64, ge=1, description="Longest exposed name.")
    uri_scheme: str = Field(
        "hopline", pattern=r"^[a-zA-Z][a-zA-Z0-9+.-]*$", description="Scheme of rewritten resource URIs."
    )
    list_timeout: float = Field(
        5.0,
        gt=0,
        description="Seconds a fan-out list waits for each backend; slower ones are left out of that answer (named in "
        "_meta).",
    )
    page_size: int = Field(500, ge=1, description="Items per page of a composed list (the gateway's own cursors).")
    startup_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds a new session waits for each backend to start; slower ones join later with a change "
        "signal.",
    )
    retry_after: float = Field(
        2.0,
        gt=0,
        description="First delay before reconnecting a backend that failed or went away (doubles up to 60 s).",
    )
    shared_capability_sets: int = Field(
        4,
        ge=0,
        description="Shared handshake-era backend sessions per backend, one per distinct client-capability set, "
        "beyond the one declaring none; past it a client gets the session of the largest subset it declared (counted).",
    )
    share_anonymous: bool = Field(
        False,
        description="`share: principal` backends on a listener that is not loopback: true lets every anonymous "
        "client (no `auth`) share one principal's children; false (default): each anonymous client session is a "
        "principal of its own. On a loopback listener anonymous clients are one principal (the local user).",
    )
    health_interval: float = Field(
        30.0,
        ge=0,
        description="Seconds between health probes of the shared backend sessions (ping; server/discover for "
        "2026-07-28 backends, which also polls capabilities); 0: off.",
    )

    @field_validator("uri_scheme")
    @classmethod
    def _not_ui(cls, scheme: str) -> str:
        if scheme.lower() == "ui":
            raise ValueError(
                "'ui' is the MCP Apps scheme: ui:// resources keep it, namespaced as ui://{backend}{delimiter}…"
            )
        return scheme

    @field_validator("delimiter")
    @classmethod
    def _charset(cls, delimiter: str) -> str:
        if not is_charset_text(delimiter):
            raise ValueError(f"must be non-empty and use only characters from {NAME_CHARSET}")
        return delimiter

    def namespace(self) -> Namespace:
        """The routing layer's namespace for these settings (raises ValueError if unusable)."""
        return Namespace(self.delimiter, NAME_CHARSET, self.max_name_length)

    @model_validator(mode="after")
    def _usable(self) -> RoutingConfig:
        try:
            self.namespace()
        except ValueError as exc:
            raise_problems([(("max_name_length",), str(exc))])
        return self


class TasksConfig(_Section):
    """Tasks (the 2026-07-28 extension and 2025-11-25 tasks): who owns each task the gateway exposed,
    and how a handshake-era client is given the normal result of a call a backend answered with a task."""

    max_tasks: int = Field(10_000, ge=1, description="Tasks remembered at once; past it the oldest is forgotten.")
    max_per_caller: int = Field(
        1_000, ge=1, description="Tasks remembered per caller (principal or session); past it its oldest is forgotten."
    )
    default_ttl: float = Field(
        3600.0, gt=0, description="Seconds a task is remembered when its backend gives no TTL (ttlMs null)."
    )
    max_ttl: float = Field(86_400.0, gt=0, description="Longest a task is remembered, whatever its backend's TTL.")
    poll_interval: float = Field(
        1.0, gt=0, description="Seconds between polls of a task whose backend suggests no interval (pollIntervalMs)."
    )
    min_poll_interval: float = Field(
        0.01, gt=0, description="Shortest wait between two polls, whatever the backend suggests."
    )
    mediate: bool = Field(
        True,
        description="A handshake-era client's tools/call that a 2026-07-28 backend answers with a task is polled to "
        "its result (progress relayed, cancelled on the client's cancel); false: such backends are not told the "
        "gateway takes tasks for those clients.",
    )


class ListenLimits(_Section):
    """Bounds of every HTTP listener (MCP, admin, transparent) against slow, idle and oversized
    clients (transports/front_door.py). Only reading a request is timed: responses such as SSE
    streams may last as long as they like."""

    max_connections: int = Field(
        4096,
        ge=1,
        description="Open connections at once; more get 503 with Retry-After at once "
        "(lowered to what the open-file limit allows).",
    )
    max_connections_per_source: int = Field(
        256,
        ge=1,
        description="Open connections at once from one client address (503 above); "
        "behind a proxy or NAT all clients may share one.",
    )
    idle_timeout: float = Field(
        15.0, gt=0, description="Seconds a connection may stay open without beginning a request (new or keep-alive)."
    )
    header_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds from a request's first byte until its request line and headers are complete (408 after).",
    )
    body_timeout: float = Field(
        30.0, gt=0, description="Seconds from the end of the headers until the whole body has arrived (408 after)."
    )
    max_header_bytes: int = Field(
        64 * 1024, ge=1024, description="Largest request head (request line and headers) in bytes (431 above)."
    )
    max_headers: int = Field(100, ge=1, description="Most header fields in one request (431 above).")
    max_url_bytes: int = Field(
        8 * 1024, ge=256, description="Longest request target (path and query) in bytes (414 above)."
    )


class ListenConfig(_Section):
    """Where the gateway listens for clients (Streamable HTTP)."""

    host: str = Field("127.0.0.1", min_length=1)
    port: int = Field(8000, ge=0, le=65535, description="0 picks a free port.")
    path: str = Field("/mcp", pattern=r"^/", description="Endpoint path; starts with '/'.")
    max_body: int = Field(4 * MiB, gt=0, description="Largest accepted request body in bytes.")
    allowed_origins: list[str] = Field(default_factory=list, description="Origins allowed besides same-host ones.")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Host header values allowed besides the listen address."
    )
    check_host: bool = Field(True, description="Reject requests whose Host header is not allowed (DNS rebinding).")
    request_timeout: float = Field(300.0, gt=0)
    session_ttl: float = Field(1800.0, gt=0, description="Idle seconds before a client session expires.")
    max_sessions: int = Field(
        1000,
        ge=1,
        description="Client sessions held at once (each table: /mcp, /sse, each tools.endpoints path); more get 503.",
    )
    max_pending_sessions: int = Field(
        16,
        ge=1,
        description="Session creations in flight at once (an initialize until its answer, a GET /sse until its "
        "session); more get 503 at once.",
    )
    handshake_timeout: float = Field(
        20.0,
        gt=0,
        description="Seconds a session creation may take (backend start and initialize answer) before the client gets "
        "a timeout error.",
    )
    stream_buffer_messages: int = Field(
        1000,
        ge=1,
        description="Unread messages one response stream may hold; past it (a client not reading) the stream is cut "
        "off.",
    )
    stream_buffer_bytes: int = Field(
        8 * MiB,
        ge=1024,
        description="Unread bytes one response stream may hold (a single larger message still passes); past it the "
        "stream is cut off.",
    )
    limits: ListenLimits = Field(
        default_factory=ListenLimits,
        description="Connection caps, request-read deadlines and head-size limits (all listeners).",
    )

    def loopback(self) -> bool:
        """Whether only this host can reach the listener (a loopback address or localhost)."""
        return loopback_name(self.host)


def _backend_id(backend_id: str, info: ValidationInfo) -> str:
    routing = info.data.get("routing")  # absent when routing itself failed validation
    if not isinstance(routing, RoutingConfig):
        routing = None
    problem = id_problem(backend_id, routing and routing.delimiter)
    if problem:
        raise ValueError(problem)
    if routing is not None:
        # The routing layer's own gate (length), so a file that passes here passes there.
        routing.namespace().check_backend_id(backend_id)
    return backend_id


BackendId = Annotated[str, AfterValidator(_backend_id)]


class GatewayConfig(_Section):
    """The whole configuration file."""

    version: Literal[1] = Field(1, description="Configuration format version.")
    mode: Literal["forward", "reverse", "sidecar", "federation", "transparent"] = Field(
        "forward",
        description="forward: many backends behind one endpoint; reverse: one backend; sidecar: one co-located backend "
        "(a `command`, or a `url` on this host), every message to and from it mediated, its identity and names "
        "unchanged; federation: backends that are intermediaries themselves (their declarations are fetched and listed "
        "in this one's; loops are refused); transparent: an HTTP intermediary the client does not know about, "
        "forwarding to `transparent.destinations` without reading bodies (awareness level 1).",
    )
    name: str = Field("hopline", min_length=1, description="Server name shown to clients.")
    instructions: str | None = Field(None, description="Instructions shown to clients.")
    reload_interval: float = Field(
        1.0, ge=0, description="Seconds between checks of this file for changes (hot reload); 0 turns reloading off."
    )
    listen: ListenConfig = Field(default_factory=ListenConfig)
    # routing precedes backends: backend ids are checked against routing.delimiter.
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    backends: dict[BackendId, BackendConfig] = Field(
        default_factory=dict,
        description="Backends by operator-assigned id (required unless the file only holds an `acp:` chain).",
        json_schema_extra={"propertyNames": {"pattern": ID_PATTERN}},
    )
    auth: AuthConfig | None = Field(None, description="Client authentication (absent: none; the declaration says so).")
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    resilience: ResilienceConfig = Field(default_factory=ResilienceConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    acp: AcpConfig | None = Field(None, description="An ACP proxy chain (`hopline acp --config FILE`).")
    transparent: TransparentConfig | None = Field(
        None, description="Transparent mode (`mode: transparent`): destinations, header policy, TLS disposition."
    )
    state: StateConfig | None = Field(
        None,
        description="Session state shared by replicas behind a load balancer (absent: a handshake-era session lives "
        "in the process that made it).",
    )
    sandbox: SandboxConfig | None = Field(
        None,
        description="The default permission profile of every `command` backend that sets no `sandbox:` of its own "
        f"(a preset name alone: {', '.join(PRESETS)}); a backend opts out with `sandbox: none`. Absent: backends "
        "without `sandbox:` run unconfined. See docs/features/sandbox.md.",
    )

    _import_notes: list[str] = PrivateAttr(default_factory=list)
    _templates: dict[Loc, str] = PrivateAttr(default_factory=dict)
    _base_dir: str | None = PrivateAttr(None)
    _source_file: str | None = PrivateAttr(None)  # the file it was read from (never visible to a sandbox)

    @property
    def base_dir(self) -> str | None:
        """The directory of the file this configuration came from (relative `openapi`
        paths start there); None when it was not read from a file (then: the cwd)."""
        return self._base_dir

    @property
    def import_notes(self) -> list[str]:
        """What the ``mcpServers`` import changed or ignored (derived ids, dropped keys)."""
        return self._import_notes

    def as_written(self, *loc: str | int) -> str | None:
        """The string at ``loc`` as written before ``${VAR}`` interpolation, or None if it
        held no reference. Lets ``hopline check`` show values without echoing secrets."""
        return self._templates.get(tuple(loc))

    @field_validator("sandbox", mode="before")
    @classmethod
    def _default_preset_name(cls, value: Any) -> Any:
        return {"profile": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _whole(self) -> GatewayConfig:
        problems: list[tuple[Loc, str]] = []
        if self.sandbox is not None:  # the default profile: each command backend that names none gets it
            for spec in self.backends.values():
                if spec.command is not None and "sandbox" not in spec.model_fields_set:
                    spec.sandbox = self.sandbox
        if self.mode == "transparent" or self.transparent is not None:
            if self.mode != "transparent":
                problems.append((("transparent",), "applies to mode `transparent` only"))
            elif self.transparent is None:
                problems.append((("transparent",), "mode `transparent` needs this section (its `destinations`)"))
            elif self.backends:
                problems.append(
                    (("backends",), "transparent mode forwards to `transparent.destinations`; it has no backends")
                )
            if self.auth is not None:
                problems.append(
                    (
                        ("auth",),
                        "a transparent intermediary authenticates nobody and starts no authentication flow; the "
                        "client's credentials pass through",
                    )
                )
            if self.transparent is not None and self.transparent.level == 1:
                unread = [
                    k
                    for k, used in (
                        ("policy", not self.policy.is_empty()),
                        ("tools", self.tools.all_modes() != {"standard"}),
                    )
                    if used
                ]
                problems += [
                    (
                        (k,),
                        "applies at transparent level 2 (level 1 reads no bodies; use `transparent.rules` for header "
                        "rules)",
                    )
                    for k in unread
                ]
        elif not self.backends and (self.acp is None or self.acp.uses_gateway()):  # an ACP chain alone needs none
            problems.append((("backends",), "at least one backend is required (under `backends` or `mcpServers`)"))
        enabled = [bid for bid, b in self.backends.items() if b.enabled]
        if self.mode in ("reverse", "sidecar") and len(enabled) != 1:
            problems.append(
                (
                    ("backends",),
                    f"{self.mode} mode needs exactly one enabled backend; {len(enabled)} are enabled"
                    + (f" ({', '.join(enabled)})" if enabled else ""),
                )
            )
        if self.mode == "sidecar":
            problems += [
                (
                    ("backends", bid, "url"),
                    "a sidecar's backend is co-located: a `command`, or a `url` on this host (localhost, 127.0.0.0/8, "
                    "::1); use reverse mode for a remote backend",
                )
                for bid in enabled
                if not _local(self.backends[bid])
            ]
        if self.auth is not None:
            problems += self.auth.backend_problems(self.backends)
            signin = self.auth.signin
            shared = self.state is not None and self.state.redis_url
            if signin is not None and signin.store_backend == "redis" and not shared:
                problems.append(
                    (("auth", "signin", "store_backend"), "`redis` keeps the state in `state.redis_url`: set it")
                )
        problems += self.resilience.backend_problems(self.backends)
        problems += self.tools.backend_problems(self.backends, self.listen.path)
        namespace = self.routing.namespace()
        for bid, backend in self.backends.items():
            for original, exposed in backend.rename.items():
                head = namespace.split(exposed)
                if exposed and not namespace.is_valid_name(exposed):
                    problems.append(
                        (
                            ("backends", bid, "rename", original),
                            f"an exposed name must be 1-{namespace.max_length} characters from {NAME_CHARSET}",
                        )
                    )
                elif namespace.delimiter in exposed and (head is None or head[0] != bid):
                    problems.append(
                        (
                            ("backends", bid, "rename", original),
                            f"an exposed name with {namespace.delimiter!r} must start with this backend's "
                            f"prefix {bid + namespace.delimiter!r}",
                        )
                    )
        raise_problems(problems)
        return self


def _local(backend: BackendConfig) -> bool:
    """A stdio child, or an HTTP endpoint on a loopback address (a sidecar's backend; for
    an ``openapi`` backend, its ``base_url``)."""
    if backend.command is not None:
        return True
    url = backend.url if backend.openapi is None else backend.base_url
    if url is None:
        return False
    return loopback_name(urlsplit(url).hostname or "")


def model_for(loc: Loc) -> Any:
    """The model class that holds the last key of ``loc`` (for "did you mean" hints)."""
    model: Any = GatewayConfig
    i = 0
    while i < len(loc) - 1:
        field = model.model_fields.get(loc[i]) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model, i = ann, i + 1
        elif getattr(ann, "__origin__", None) is dict:
            model, i = ann.__args__[1], i + 2
        else:
            return None
    return model if i == len(loc) - 1 else None
