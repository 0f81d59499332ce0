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

``--on-crash``: ``fail`` (default), ``bypass`` (route around a dead proxy) or
``restart`` (spawn it again, at most ``restart_attempts`` times in a row).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Sequence

from hopline.acp import dialects

AGENT_MODE, PROXY_MODE = "agent", "proxy"
CRASH_POLICIES = ("fail", "bypass", "restart")


@dataclass(frozen=True, slots=True)
class Component:
    name: str
    argv: tuple[str, ...]
    proxy: bool
    dialect: str | None = None  # None: detect


@dataclass(frozen=True, slots=True)
class Chain:
    components: tuple[Component, ...]
    mode: str = AGENT_MODE
    on_crash: str = "fail"
    env: dict[str, str] = field(default_factory=dict)
    client_dialect: str | None = None  # the client's MCP-over-ACP dialect (``--dialect 0=D``)
    restart_attempts: int = 3

    def __post_init__(self) -> None:
        if self.mode not in (AGENT_MODE, PROXY_MODE):
            raise ValueError(f"unknown conductor mode {self.mode!r}")
        if self.on_crash not in CRASH_POLICIES:
            raise ValueError(f"unknown crash policy {self.on_crash!r}; choose from {', '.join(CRASH_POLICIES)}")
        if self.mode == AGENT_MODE and not self.components:
            raise ValueError("agent mode needs at least the agent's command")

    def names(self) -> list[str]:
        return [c.name for c in self.components]


def build(
    commands: Sequence[str],
    *,
    mode: str = AGENT_MODE,
    dialect_options: Sequence[str] = (),
    on_crash: str = "fail",
    restart_attempts: int = 3,
) -> Chain:
    """A chain from command strings and ``--dialect`` options (``D`` or ``N=D``)."""
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
        argv = tuple(shlex.split(command))
        if not argv:
            raise ValueError(f"component {i} has an empty command")
        is_proxy = mode == PROXY_MODE or i < len(commands)
        base = _display_name(argv)
        if base in seen:  # names must be unique in traces and errors
            seen[base] += 1
            base = f"{base}#{seen[base]}"
        else:
            seen[base] = 1
        dialect = per_index.get(i, default) if is_proxy else per_index.get(i)
        components.append(Component(name=base, argv=argv, proxy=is_proxy, dialect=dialect))
    return Chain(tuple(components), mode=mode, on_crash=on_crash, client_dialect=per_index.get(0), restart_attempts=restart_attempts)


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
