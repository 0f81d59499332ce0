"""What ``hopline acp`` runs: its command line and the ``acp:`` section of a configuration file, merged.

In: the parsed arguments of :func:`hopline.acp.cli.add_arguments`. Out: a
:class:`Plan` (the chain, the trace file, the configuration the built-in
gateway serves), or ``ValueError`` / :class:`~hopline.config.errors.ConfigError`
with a message for the operator.

Precedence: what the command line says wins. Commands after ``--`` replace
the file's ``acp.components``; ``--on-crash``, ``--restart-max``,
``--restart-backoff``, ``--mcp-bridge``, ``--trace`` and ``--proxy`` replace the
file's settings; ``--dialect`` options apply after the file's per-component
dialects. ``--gateway`` puts the built-in gateway first in the chain (it serves
the file's ``backends``). ``--mcp-bridge`` puts hopline's bridge right before
the terminal agent (it counts as a component in ``--dialect N=D``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hopline.acp import chain as chain_mod
from hopline.acp.chain import GATEWAY, Chain, Component
from hopline.observability.redact import redact_args

if TYPE_CHECKING:
    from hopline.config.acp import AcpConfig
    from hopline.config.schema import GatewayConfig


NO_OPTIONS = argparse.Namespace(
    config="the file",
    gateway=False,
    dialect=[],
    proxy=False,
    on_crash=None,
    restart_max=None,
    restart_backoff=None,
    mcp_bridge=None,
    trace=None,
    components=[],
)


@dataclass(frozen=True, slots=True)
class Plan:
    chain: Chain
    trace: str | None = None
    config: GatewayConfig | None = None


def plan(args: argparse.Namespace) -> Plan:
    config = _load(args.config) if getattr(args, "config", None) else None
    return _plan(args, config)


def from_config(config: GatewayConfig) -> Chain:
    """The chain a file's ``acp:`` section describes, with no command line."""
    return _plan(NO_OPTIONS, config).chain


def explain(config: GatewayConfig) -> list[str]:
    """What ``hopline check`` says about a file's ``acp:`` section (nothing if it has none)."""
    if config.acp is None:
        return []
    try:
        chain = from_config(config)
    except ValueError as exc:
        return [f"acp chain: cannot run: {exc}"]
    written: dict[str, str] = {}  # values that came from ${VAR} are shown as written (they may be secrets)
    for i, c in enumerate(config.acp.components):
        for loc, value in ((("command",), c.command), *((("args", j), a) for j, a in enumerate(c.args))):
            template = config.as_written("acp", "components", i, *loc)
            if template is not None and value is not None:
                written[value] = template
    return describe(chain, written)


def _plan(args: argparse.Namespace, config: GatewayConfig | None) -> Plan:
    acp: AcpConfig | None = config.acp if config is not None else None
    components: list[str | Component] = list(args.components)
    if not components and acp is not None:
        components = [_component(c) for c in acp.components]
    elif not components and config is not None:
        raise ValueError(
            f"{args.config}: no `acp` section; list the chain there (acp.components) or as commands after --"
        )
    if getattr(args, "gateway", False):
        components.insert(0, Component(name="", argv=(), proxy=True, builtin=GATEWAY))
    proxy_mode = args.proxy or (acp is not None and acp.mode == chain_mod.PROXY_MODE)
    bridge = _pick(args.mcp_bridge, acp and acp.mcp_bridge, None)
    if bridge and components and not proxy_mode:
        components.insert(
            len(components) - 1,
            Component(name="", argv=(sys.executable, "-m", "hopline.acp.bridge", "--transport", bridge), proxy=True),
        )
    dialect_options = list(args.dialect)
    if acp is not None and acp.client_dialect != "auto":
        dialect_options.insert(0, f"0={acp.client_dialect}")
    restart = acp.restart if acp is not None else None
    chain = chain_mod.build(
        components,
        mode=chain_mod.PROXY_MODE if proxy_mode else chain_mod.AGENT_MODE,
        dialect_options=dialect_options,
        on_crash=_pick(args.on_crash, acp and acp.on_crash, "fail"),
        restart_attempts=_pick(args.restart_max, restart and restart.max, 3),
        restart_backoff=_pick(args.restart_backoff, restart and restart.backoff, 0.1),
        restart_backoff_max=restart.max_backoff if restart is not None else 30.0,
        rejoin_timeout=restart.rejoin_timeout if restart is not None else 10.0,
    )
    if chain.uses(GATEWAY) and config is None:
        raise ValueError(
            "the gateway component serves the `backends` of a configuration file: give one with --config FILE"
        )
    if chain.uses(GATEWAY) and not config.backends:  # type: ignore[union-attr]
        raise ValueError(f"{args.config}: the gateway component needs `backends` to serve")
    return Plan(chain, _pick(args.trace, acp and acp.trace, None), config)


def _load(path: str) -> GatewayConfig:
    from hopline.config.load import load_config

    return load_config(path)


def _component(c) -> Component:
    argv = () if c.command is None else (c.command, *c.args)
    dialect = None if c.dialect == "auto" else c.dialect
    return Component(
        name=c.name or "",
        argv=argv,
        proxy=True,
        dialect=dialect,
        env=dict(c.env),
        cwd=c.cwd,
        builtin=c.builtin,
        on_crash=c.on_crash,
    )


def _pick(cli, file, default):
    """The command line's value if given, else the file's, else the default."""
    if cli is not None:
        return cli
    return file if file is not None and file is not False else default


def describe(chain: Chain, written: dict[str, str] | None = None) -> list[str]:
    """The chain in words, one line per component (``written``: values to show as written)."""
    policy = chain.on_crash
    if policy == "restart":
        policy += f": at most {chain.restart_attempts} restarts in a row, backoff {chain.restart_backoff:g} s doubling"
    lines = [f"acp chain ({chain.mode} mode, on_crash {policy}):"]
    for n, c in enumerate(chain.components, start=1):
        role = (
            "proxy, dialect " + (c.dialect or "auto")
            if c.proxy
            else "agent" + (f", MCP-over-ACP {c.dialect}" if c.dialect else "")
        )
        if c.on_crash is not None:
            role += f", on_crash {c.on_crash}"
        if c.builtin is not None:
            lines.append(f"  {n}. {c.name} (built-in {c.builtin}, {role})")
        elif c.url is not None:
            scheme = c.url.split("://", 1)[0]
            over = "Streamable HTTP" if scheme.lower().startswith("http") else "WebSocket"
            lines.append(f"  {n}. {c.name} (remote over {over}, {role}): {scheme}://{c.name}")
        else:
            shown = redact_args(c.argv)  # literal credentials hidden; values from ${VAR} shown as written
            argv = [(written or {}).get(a, shown[i]) for i, a in enumerate(c.argv)]
            lines.append(f"  {n}. {c.name} ({role}): {shlex.join(argv)}")
    return lines
