"""What a chain is made of: components, their roles and dialects, and the mode.

``hopline acp -- "proxy1 args" "proxy2" "agent --acp"`` (agent mode): every
command but the last is a proxy; the last is the terminal agent. In proxy mode
(``--proxy``) every command is a proxy, and the conductor's own successor is
reached through its parent conductor. Each command is one shell-parsed string
(as the Rust reference conductor takes them).

A component's dialect is configured (``--dialect d4`` for all, ``--dialect 2=d1``
for the second component) or ``None``: detected from how it answers. For the
terminal agent (``N=D`` only) and the client (``0=D``) it names the
MCP-over-ACP dialect they speak (:mod:`hopline.acp.mcp_wire`), which otherwise
is learned from the agent's ``initialize`` answer and from how servers are declared.

A component is a command (spawned as a process) or a hopline built-in run in
process (``builtin``: :data:`BUILTINS`, e.g. ``gateway``, :mod:`hopline.acp.gateway`);
a command may carry its own ``env`` (added to the conductor's) and ``cwd``. A
component given as a ``ws://`` or ``wss://`` URL (``url``) is a remote agent or
proxy reached over WebSocket (:mod:`hopline.acp.remote`), an ``http://`` or
``https://`` one over Streamable HTTP (:mod:`hopline.acp.remote_http`); a chain
may mix them with commands.

``--on-crash``: ``fail`` (default), ``bypass`` (route around a dead proxy; the
terminal agent cannot be routed around, so for it this means ``fail``) or
``restart`` (spawn it again, at most ``restart_attempts`` times in a row, after
``restart_backoff`` seconds doubled per consecutive attempt up to
``restart_backoff_max``). A component may override the chain's policy.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from hopline.acp import dialects

AGENT_MODE, PROXY_MODE = "agent", "proxy"
CRASH_POLICIES = ("fail", "bypass", "restart")
GATEWAY = "gateway"
# built-in → (display name, the dialect the conductor speaks to it). The gateway speaks d4:
# MCP-over-ACP connections carry what the connectionless d5 binding cannot (a backend's
# sampling and elicitation requests; the client's notifications); the conductor translates
# for consumers that speak d5.
BUILTINS = {GATEWAY: ("hopline-gateway", "d4")}
REMOTE_SCHEMES = ("ws://", "wss://", "http://", "https://")


@dataclass(frozen=True, slots=True)
class Component:
    name: str
    argv: tuple[str, ...]
    proxy: bool
    dialect: str | None = None  # None: detect
    env: dict[str, str] = field(default_factory=dict)  # added to the conductor's environment
    cwd: str | None = None
    builtin: str | None = None  # a hopline built-in run in process (argv is empty)
    on_crash: str | None = None  # None: the chain's policy
    url: str | None = None  # a remote component (ws(s):// or http(s)://; argv is empty)


@dataclass(frozen=True, slots=True)
class Chain:
    components: tuple[Component, ...]
    mode: str = AGENT_MODE
    on_crash: str = "fail"
    env: dict[str, str] = field(default_factory=dict)
    client_dialect: str | None = None  # the client's MCP-over-ACP dialect (``--dialect 0=D``)
    restart_attempts: int = 3
    restart_backoff: float = 0.1  # seconds before the first restart; doubled per consecutive one
    restart_backoff_max: float = 30.0
    rejoin_timeout: float = 10.0  # a restarted component must take its place again within this

    def __post_init__(self) -> None:
        if self.mode not in (AGENT_MODE, PROXY_MODE):
            raise ValueError(f"unknown conductor mode {self.mode!r}")
        for policy in (self.on_crash, *(c.on_crash for c in self.components if c.on_crash is not None)):
            if policy not in CRASH_POLICIES:
                raise ValueError(f"unknown crash policy {policy!r}; choose from {', '.join(CRASH_POLICIES)}")
        if self.mode == AGENT_MODE and not self.components:
            raise ValueError("agent mode needs at least the agent's command")
        if self.restart_attempts < 1 or self.restart_backoff < 0 or self.rejoin_timeout <= 0:
            raise ValueError("restart settings: at least 1 attempt, a backoff >= 0 and a rejoin timeout > 0")
        for c in self.components:
            if c.builtin is not None and (c.builtin not in BUILTINS or not c.proxy):
                raise ValueError(
                    f"component {c.name!r}: the built-in {c.builtin!r} "
                    + ("does not exist" if c.builtin not in BUILTINS else "is a proxy and cannot be the terminal agent")
                )

    def names(self) -> list[str]:
        return [c.name for c in self.components]

    def policy(self, position: int) -> str:
        """What happens when the component at ``position`` (1-based) exits: fail, bypass or restart."""
        if not 0 < position <= len(self.components):
            return "fail"  # the client, or a proxy-mode conductor's own successor
        component = self.components[position - 1]
        policy = component.on_crash or self.on_crash
        return "fail" if policy == "bypass" and not component.proxy else policy

    def backoff(self, attempt: int) -> float:
        """The delay before restart number ``attempt`` (1-based) of one component."""
        return min(self.restart_backoff * 2 ** (attempt - 1), self.restart_backoff_max)

    def uses(self, builtin: str) -> bool:
        return any(c.builtin == builtin for c in self.components)


def build(
    commands: Sequence[str | Component],
    *,
    mode: str = AGENT_MODE,
    dialect_options: Sequence[str] = (),
    on_crash: str = "fail",
    restart_attempts: int = 3,
    **settings: Any,
) -> Chain:
    """A chain from components and ``--dialect`` options (``D`` or ``N=D``).

    A component is a shell-quoted command string, or a :class:`Component` (from
    a configuration file; its role and unique name are set here by position).
    ``settings`` are the other :class:`Chain` fields (restart timing, env).
    """
    default: str | None = None
    per_index: dict[int, str] = {}
    for option in dialect_options:
        index, sep, name = option.rpartition("=")
        name = name.strip().lower()
        if name != "auto":
            dialects.get(name)  # validates
        value = None if name == "auto" else name
        if not sep:
            default = value
            continue
        try:
            i = int(index)
        except ValueError:
            raise ValueError(f"--dialect {option!r}: expected D or N=D with N a component number") from None
        if not 0 <= i <= len(commands):
            raise ValueError(f"--dialect {option!r}: there is no component {i} (0 = the client, 1..{len(commands)})")
        if value is not None:
            per_index[i] = value
    components: list[Component] = []
    seen: dict[str, int] = {}
    for i, command in enumerate(commands, start=1):
        if isinstance(command, Component):
            spec = command
        else:
            argv = tuple(shlex.split(command))
            if not argv:
                raise ValueError(f"component {i} has an empty command")
            spec = Component(name="", argv=argv, proxy=True)
        if spec.url is None and len(spec.argv) == 1 and spec.argv[0].lower().startswith(REMOTE_SCHEMES):
            spec = replace(spec, argv=(), url=spec.argv[0])  # a URL alone: a remote component
        if spec.url is not None and (spec.env or spec.cwd):
            raise ValueError(f"component {i} ({spec.url}) is remote: `env` and `cwd` apply to commands only")
        if spec.builtin is not None and spec.builtin in BUILTINS:
            base, own_dialect = spec.name or BUILTINS[spec.builtin][0], BUILTINS[spec.builtin][1]
        elif spec.url is not None:
            base, own_dialect = spec.name or _url_name(spec.url), None
        else:
            base, own_dialect = spec.name or _display_name(spec.argv), None
        is_proxy = mode == PROXY_MODE or i < len(commands)
        if base in seen:  # names must be unique in traces and errors
            seen[base] += 1
            base = f"{base}#{seen[base]}"
        else:
            seen[base] = 1
        dialect = per_index.get(i, spec.dialect or (default if is_proxy else None) or own_dialect)
        components.append(replace(spec, name=base, proxy=is_proxy, dialect=dialect))
    return Chain(
        tuple(components),
        mode=mode,
        on_crash=on_crash,
        client_dialect=per_index.get(0),
        restart_attempts=restart_attempts,
        **settings,
    )


def _url_name(url: str) -> str:
    """``wss://agent.example:8443/acp?x`` → ``agent.example:8443`` (no credentials, path or query)."""
    rest = url.split("://", 1)[1]
    return rest.split("/", 1)[0].split("?", 1)[0].rpartition("@")[2] or url


def _display_name(argv: tuple[str, ...]) -> str:
    """``python x.py --opt`` / ``node x.js``: name the component after the script."""
    head = os.path.basename(argv[0])
    if not head.startswith(("python", "node", "bun", "deno", "uv", "npx")):
        return head
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, head)
        if not arg.startswith("-") and arg not in ("run", "exec"):
            return os.path.basename(arg)
    return head
