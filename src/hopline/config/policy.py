"""Authorization and the interceptor chain (Layer 5): CEL rules, rate limits, pinning, DLP, audit.

The default is the absent policy: every item visible, nothing limited, redacted or
audited, and ``compose/policy.py`` adds no layer at all. Each subsection, when
present, switches one part on. CEL rules are compiled and checked here, so a rule
that cannot work (bad syntax, an unknown name, data known only at call time such as
``mcp.tool.arguments``) is an error at its own key path (``policy.rules[2]``) when
the file loads. Interceptor classes are imported when the gateway starts (``build``),
not here, so validating a file never runs the operator's code.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hopline.config.section import Loc, Section, raise_problems

_PATTERN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_DOTTED = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:[:.][A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)?"
)
BUILTIN_PATTERNS = ("aws_access_key", "aws_secret_key", "bearer_token", "private_key", "github_token", "jwt")


class PolicyRule(Section):
    """One allow rule with a name (a plain string rule is named by its position)."""

    name: str = Field(min_length=1, max_length=64, description="Name used in logs and audit records.")
    expr: str = Field(min_length=1, description="The CEL expression; true allows the item.")


class AuditConfig(Section):
    """Where audit records go (JSON lines)."""

    sink: str = Field(
        "stderr",
        min_length=1,
        description="`stdout`, `stderr` or a file path (appended, created 0600). Not `stdout` when serving over stdio.",
    )
    lists: bool = Field(
        False, description="Also record each visibility decision the first time it is computed for an identity."
    )


class RateLimit(Section):
    """One token bucket per distinct value of its `per` dimensions."""

    name: str | None = Field(
        None, min_length=1, max_length=64, description="Named in errors and audit records (default: limit<index>)."
    )
    per: list[Literal["principal", "backend", "tool"]] = Field(
        default_factory=lambda: ["principal"], description="What gets its own bucket; [] is one global bucket."
    )
    requests: int = Field(ge=1, description="Tokens added per `every` seconds.")
    every: float = Field(1.0, gt=0, description="Seconds over which `requests` tokens are added.")
    burst: int | None = Field(None, ge=1, description="Bucket size (default: requests).")
    backends: list[str] | None = Field(None, description="Only calls to these backends.")
    tools: list[str] | None = Field(None, description="Only these tools/prompts/URIs (the backend's own names).")
    methods: list[str] | None = Field(None, description="Only these methods (e.g. tools/call).")

    @field_validator("per")
    @classmethod
    def _unique(cls, per: list[str]) -> list[str]:
        if len(set(per)) != len(per):
            raise ValueError("lists a dimension twice")
        return per


class RedisConfig(Section):
    """The shared store for rate limits across replicas."""

    url: str = Field(
        "redis://127.0.0.1:6379/0",
        pattern=r"^(redis|rediss|unix)://",
        description="redis://, rediss:// or unix:// URL (use ${VAR} for a password).",
    )
    prefix: str = Field("hopline:rl:", description="Prefix of every bucket key.")
    timeout: float = Field(0.25, gt=0, description="Seconds to wait for Redis per call.")
    on_unavailable: Literal["open", "closed"] = Field(
        "open", description="When Redis does not answer: open allows the call, closed refuses it."
    )
    retry_interval: float = Field(1.0, gt=0, description="Seconds before an unreachable Redis is tried again.")


class RateLimitsConfig(Section):
    store: Literal["memory", "redis"] = Field("memory", description="memory: per process; redis: shared by replicas.")
    redis: RedisConfig | None = None
    limits: list[RateLimit] = Field(min_length=1)
    max_keys: int = Field(100_000, ge=1, description="Most buckets kept in memory (store: memory).")

    @model_validator(mode="after")
    def _store(self) -> RateLimitsConfig:
        problems: list[tuple[Loc, str]] = []
        if self.store == "memory" and self.redis is not None:
            problems.append((("redis",), "applies to store: redis only"))
        names: dict[str, int] = {}
        for i, limit in enumerate(self.limits):
            name = limit.name or f"limit{i}"
            if name in names:
                problems.append((("limits", i, "name"), f"is also the name of limits[{names[name]}]"))
            names.setdefault(name, i)
        raise_problems(problems)
        return self


class PinningConfig(Section):
    """Tool pinning, the definition allowlist and shadowing refusal."""

    lockfile: str | None = Field(None, description="JSON lockfile of pinned fingerprints (committed by the operator).")
    write: bool = Field(False, description="Write first-sight pins into the lockfile.")
    on_change: Literal["flag", "withhold", "allow"] = Field(
        "withhold",
        description="A pinned tool whose definition changed: flag (audit only), withhold (hide until the lockfile "
        "approves it), allow (re-pin).",
    )
    on_new: Literal["pin", "withhold"] = Field(
        "pin", description="A tool not pinned yet: pin it on first sight, or withhold it until the lockfile lists it."
    )
    allowlist: list[str] | None = Field(
        None, description="If set, only tools with these fingerprints (sha256:<hex>) are shown."
    )
    refuse_shadowing: bool = Field(
        True,
        description="Hide tools whose name contains the delimiter or whose name/description names another backend's "
        "tools.",
    )
    check_interval: float = Field(2.0, gt=0, description="Seconds between checks of the lockfile for changes.")

    @model_validator(mode="after")
    def _consistent(self) -> PinningConfig:
        from hopline.layers.policy.pinning import is_fingerprint

        problems: list[tuple[Loc, str]] = []
        if self.write and self.lockfile is None:
            problems.append((("write",), "needs a lockfile"))
        for i, fp in enumerate(self.allowlist or []):
            if not is_fingerprint(fp):
                problems.append((("allowlist", i), "must be sha256:<64 lowercase hex digits>"))
        raise_problems(problems)
        return self


class DlpConfig(Section):
    """Redaction of secrets in arguments and results."""

    builtins: bool | list[str] = Field(
        True,
        description=f"Built-in patterns to use: true (all), false (none) or some of {', '.join(BUILTIN_PATTERNS)}.",
    )
    patterns: dict[str, str] = Field(
        default_factory=dict, description="Your own patterns: name -> Python regular expression."
    )
    arguments: bool = Field(True, description="Redact request params (pre-route).")
    results: bool = Field(True, description="Redact results and errors (pre-response).")

    @field_validator("builtins")
    @classmethod
    def _known(cls, builtins: bool | list[str]) -> bool | list[str]:
        if isinstance(builtins, list):
            raise_problems(
                [
                    ((i,), f"is not a built-in pattern ({', '.join(BUILTIN_PATTERNS)})")
                    for i, name in enumerate(builtins)
                    if name not in BUILTIN_PATTERNS
                ]
            )
        return builtins

    @field_validator("patterns")
    @classmethod
    def _compile(cls, patterns: dict[str, str]) -> dict[str, str]:
        problems: list[tuple[Loc, str]] = []
        for name, rx in patterns.items():
            if not _PATTERN_NAME.fullmatch(name):
                problems.append(((name,), "a pattern name is a letter then letters, digits or '_' (at most 64)"))
                continue
            try:
                compiled = re.compile(rx)
            except re.error as exc:
                problems.append(((name,), f"is not a valid regular expression ({exc.msg} at position {exc.pos})"))
                continue
            if compiled.search(""):
                problems.append(((name,), "matches the empty string"))
        raise_problems(problems)
        return patterns

    def builtin_names(self) -> list[str]:
        if self.builtins is True:
            return list(BUILTIN_PATTERNS)
        return [] if self.builtins is False else list(dict.fromkeys(self.builtins))


class InterceptorConfig(Section):
    """An operator's interceptor class."""

    class_: str | None = Field(None, alias="class", description="`package.module:Class` or `package.module.Class`.")
    entry_point: str | None = Field(
        None, min_length=1, description="Name of an entry point in group hopline.interceptors."
    )
    name: str | None = Field(
        None, min_length=1, max_length=64, description="Name in audit records (default: the class's `name`)."
    )
    options: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the class.")
    mode: Literal["enforce", "audit"] = Field("enforce", description="audit: record its decisions, apply none.")
    fail_open: bool = Field(False, description="If it raises: continue (logged) instead of refusing the call.")

    @model_validator(mode="after")
    def _one(self) -> InterceptorConfig:
        if (self.class_ is None) == (self.entry_point is None):
            raise_problems([((), "set exactly one of `class` or `entry_point`")])
        if self.class_ is not None and not _DOTTED.fullmatch(self.class_):
            raise_problems([(("class",), "must look like package.module:Class or package.module.Class")])
        return self


class InterceptorOverride(Section):
    """What the operator sets for out-of-process interceptors (absent: the server's own value)."""

    mode: Literal["enforce", "audit"] | None = Field(
        None, description="audit: record its verdicts and would-be changes, apply none, never block."
    )
    fail_open: bool | None = Field(
        None, description="If it fails (timeout, error, crash, garbage): continue (true) or refuse the call (false)."
    )
    timeout: float | None = Field(
        None, gt=0, le=300, description="Seconds per invocation (cut to what is left of the call's deadline)."
    )
    priority: int | None = Field(
        None, ge=-(2**31), le=2**31 - 1, description="Order of mutators (low first), replacing the priorityHint."
    )
    events: list[str] | None = Field(
        None, min_length=1, description="Only these events (e.g. tools/call), narrower than what it hooks."
    )


class InterceptorServerConfig(InterceptorOverride):
    """An SEP-2624 interceptor server: an MCP server that offers validators and mutators
    (``interceptors/list``, ``interceptor/invoke``)."""

    name: str = Field(
        min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Named in errors and audit."
    )
    command: str | None = Field(None, min_length=1, description="Start it as a stdio child: the program.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Its environment (on top of a minimal one).")
    url: str | None = Field(None, pattern=r"^https?://", description="Or reach it at this Streamable HTTP URL.")
    default_timeout: float = Field(
        5.0, gt=0, le=300, description="Seconds per invocation when neither `timeout` nor the server says."
    )
    max_concurrency: int = Field(16, ge=1, le=1024, description="Invocations in flight at once to this server.")
    interceptors: dict[str, InterceptorOverride] = Field(
        default_factory=dict, description="Overrides for single interceptors, by name (over the ones above)."
    )

    @model_validator(mode="after")
    def _one(self) -> InterceptorServerConfig:
        if (self.command is None) == (self.url is None):
            raise_problems([((), "set exactly one of `command` or `url`")])
        if self.url is not None and self.args:
            raise_problems([(("args",), "applies to `command` only")])
        return self


class WebhookConfig(Section):
    """An HTTP policy endpoint that is not an MCP server: validating (allow/deny with a reason)
    or mutating (a JSON Patch on the payload); docs/features/interceptors.md has the wire format."""

    name: str = Field(
        min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_./-]*$", description="Named in errors and audit."
    )
    url: str = Field(pattern=r"^https?://", description="Where the POST goes.")
    type: Literal["validating", "mutating"] = Field(description="validating: allow/deny; mutating: a JSON Patch.")
    phase: Literal["request", "response", "both"] = Field(
        "request", description="request: the invoke's params; response: its result."
    )
    events: list[str] = Field(
        default_factory=lambda: ["tools/call"], min_length=1, description="Methods it sees (e.g. tools/call)."
    )
    secret: str | None = Field(
        None,
        min_length=16,
        description="HMAC-SHA256 key: the body is signed (X-Hopline-Signature). Use ${VAR}, not a literal.",
    )
    mode: Literal["enforce", "audit"] = Field("enforce", description="audit: record its verdicts, apply none.")
    fail_open: bool = Field(
        False, description="If it fails (timeout, non-2xx, bad answer): continue (true) or refuse the call (false)."
    )
    timeout: float = Field(2.0, gt=0, le=300, description="Seconds per request (cut to the call's deadline).")
    priority: int = Field(0, ge=-(2**31), le=2**31 - 1, description="Order among mutators (low first).")
    max_concurrency: int = Field(16, ge=1, le=1024, description="Requests in flight at once to this webhook.")


class PolicyConfig(Section):
    """Authorization and the interceptor chain (Layer 5): CEL rules, rate limits, pinning, DLP, audit."""

    rules: list[str | PolicyRule] = Field(
        default_factory=list,
        description="CEL allow rules over jwt.<claim>, mcp.method, mcp.backend, mcp.kind, mcp.tool.name, "
        "mcp.prompt.name, mcp.resource.uri; an item is visible iff one is true. Empty: everything is visible. "
        'tasks/get, tasks/update, tasks/cancel and tasks/result are items of mcp.kind "task" (mcp.method the '
        "tasks method, mcp.tool.name the tool whose call created the task).",
    )
    cache_size: int = Field(100_000, ge=1, description="Most cached visibility decisions.")
    audit: AuditConfig | None = Field(None, description="Audit log (absent: none).")
    rate_limits: RateLimitsConfig | None = None
    pinning: PinningConfig | None = None
    dlp: DlpConfig | None = None
    interceptors: list[InterceptorConfig] = Field(
        default_factory=list, description="Your own interceptors, after the built-in ones."
    )
    interceptor_servers: list[InterceptorServerConfig] = Field(
        default_factory=list,
        description="SEP-2624 interceptor servers (out of process), after your own interceptors; see "
        "docs/features/interceptors.md.",
    )

    webhooks: list[WebhookConfig] = Field(
        default_factory=list,
        description="HTTP validating/mutating webhooks, run in the same chain as the interceptor servers.",
    )

    @field_validator("webhooks")
    @classmethod
    def _unique_webhooks(cls, hooks: list[WebhookConfig]) -> list[WebhookConfig]:
        seen: dict[str, int] = {}
        problems: list[tuple[Loc, str]] = []
        for i, h in enumerate(hooks):
            if h.name in seen:
                problems.append(((i, "name"), f"is also the name of webhooks[{seen[h.name]}]"))
            seen.setdefault(h.name, i)
        raise_problems(problems)
        return hooks

    @field_validator("interceptor_servers")
    @classmethod
    def _unique_servers(cls, servers: list[InterceptorServerConfig]) -> list[InterceptorServerConfig]:
        seen: dict[str, int] = {}
        problems: list[tuple[Loc, str]] = []
        for i, s in enumerate(servers):
            if s.name in seen:
                problems.append(((i, "name"), f"is also the name of interceptor_servers[{seen[s.name]}]"))
            seen.setdefault(s.name, i)
        raise_problems(problems)
        return servers

    @field_validator("rules")
    @classmethod
    def _compile_rules(cls, rules: list[str | PolicyRule]) -> list[str | PolicyRule]:
        try:
            from hopline.layers.policy.cel import RuleError, compile_rule
        except ImportError:  # the cel extra is not installed: config/extras.py reports it at policy.rules
            return rules
        problems: list[tuple[Loc, str]] = []
        names: dict[str, int] = {}
        for i, rule in enumerate(rules):
            expr = rule if isinstance(rule, str) else rule.expr
            loc: Loc = (i,) if isinstance(rule, str) else (i, "expr")
            if isinstance(rule, PolicyRule):
                if rule.name in names:
                    problems.append(((i, "name"), f"is also the name of rules[{names[rule.name]}]"))
                names.setdefault(rule.name, i)
            try:
                compile_rule(expr)
            except RuleError as exc:
                label = f"rule {rule.name!r}" if isinstance(rule, PolicyRule) else "this rule"
                problems.append((loc, f"{label} {exc}"))
        raise_problems(problems)
        return rules

    def named_rules(self) -> list[tuple[str, str]]:
        """``(name, expression)`` for each rule; unnamed rules are ``rules[i]``."""
        return [(f"rules[{i}]", r) if isinstance(r, str) else (r.name, r.expr) for i, r in enumerate(self.rules)]

    def is_empty(self) -> bool:
        return not (
            self.rules
            or self.audit
            or self.rate_limits
            or self.pinning
            or self.dlp
            or self.interceptors
            or self.interceptor_servers
            or self.webhooks
        )
