"""An ACP proxy chain conducted by ``hopline acp --config FILE`` (the ``acp:`` section).

In: the ``acp`` mapping of the configuration file (after ``${VAR}`` interpolation).
Out: an :class:`AcpConfig`, or located problems (unknown keys are errors, as in
every section). ``hopline.acp.settings`` turns it, with the command line's
overrides, into the conductor's chain; nothing here starts anything.

The chain is listed in order, client side first: every component but the last
is a proxy and the last is the terminal agent (``mode: agent``), or every one is
a proxy (``mode: proxy``: the conductor itself sits inside another chain). A
component is a command (``command`` + ``args``, with its own ``env`` and
``cwd``), or ``builtin: gateway``: hopline's MCP gateway, built from this
file's ``backends``, which adds itself to every ACP session as an MCP server
over ACP (so the agent gets the gateway's tools). Messages never contain a
value from the file (values may be secrets).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hopline.config.section import Loc, Section, raise_problems

Dialect = Literal["auto", "d1", "d2", "d3", "d4", "d5"]
CrashPolicy = Literal["fail", "bypass", "restart"]
DIALECT_HELP = (
    "d1 (Thinkwell), d2 (RFD text), d3 (sacp v11), d4 (Rust conductor 2.0), d5 (newest schema) or auto (detect)."
)


class AcpComponentConfig(Section):
    """One component of the chain: a command to run, or a hopline built-in."""

    command: str | None = Field(None, min_length=1, description="Program to start; it speaks ACP on its stdin/stdout.")
    args: list[str] = Field(default_factory=list, description="Arguments for `command`.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for `command` (use ${VAR} for secrets)."
    )
    cwd: str | None = Field(None, min_length=1, description="Working directory for `command`.")
    builtin: Literal["gateway"] | None = Field(
        None,
        description="gateway: hopline's MCP gateway over this file's `backends`, added to every ACP session as an MCP "
        "server over ACP.",
    )
    name: str | None = Field(
        None, min_length=1, description="Name in traces, logs and errors (default: the script or program name)."
    )
    dialect: Dialect = Field(
        "auto",
        description="Proxy dialect of this component: "
        + DIALECT_HELP
        + " For the terminal agent: the MCP-over-ACP dialect it speaks.",
    )
    on_crash: CrashPolicy | None = Field(None, description="Overrides `acp.on_crash` for this component.")

    @model_validator(mode="after")
    def _one_kind(self) -> AcpComponentConfig:
        problems: list[tuple[Loc, str]] = []
        if (self.command is None) == (self.builtin is None):
            which = "both are set" if self.command is not None else "neither is set"
            problems.append(
                ((), f"set exactly one of `command` (a program) or `builtin` (a hopline component); {which}")
            )
        elif self.builtin is not None:
            for key in ("args", "env", "cwd"):
                if getattr(self, key):
                    problems.append(((key,), "applies to `command` components only; this one is a `builtin`"))
        raise_problems(problems)
        return self


class AcpRestartConfig(Section):
    """How `on_crash: restart` restarts a component (proxy or terminal agent)."""

    max: int = Field(
        3,
        ge=1,
        description="Restarts of one component in a row before its traffic fails; the count starts again once it is "
        "back.",
    )
    backoff: float = Field(0.1, ge=0, description="Seconds before the first restart; doubled for each consecutive one.")
    max_backoff: float = Field(30.0, ge=0, description="Longest wait between two restarts, in seconds.")
    rejoin_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds a restarted component has to take its place again (handshake and session reloads).",
    )


class AcpGatewayConfig(Section):
    """The built-in gateway component (`builtin: gateway`)."""

    server_name: str | None = Field(
        None, min_length=1, description="Name of the MCP server the agent is given (default: the top-level `name`)."
    )


class AcpConfig(Section):
    """An ACP proxy chain conducted by `hopline acp --config FILE`."""

    mode: Literal["agent", "proxy"] = Field(
        "agent",
        description="agent: the last component is the terminal agent; proxy: every component is a proxy and hopline "
        "runs inside another chain.",
    )
    components: list[AcpComponentConfig] = Field(description="The chain in order, client side first.")
    on_crash: CrashPolicy = Field(
        "fail",
        description="When a component exits: fail its traffic with an error, route around it (proxies only), or "
        "restart it.",
    )
    restart: AcpRestartConfig = Field(default_factory=AcpRestartConfig)
    mcp_bridge: Literal["http", "stdio"] | None = Field(
        None,
        description="Insert hopline's MCP-over-ACP bridge before the agent: ACP-transport MCP servers reach it as "
        "loopback HTTP servers or as stdio commands.",
    )
    trace: str | None = Field(None, min_length=1, description="Append one JSON line per routed message to this file.")
    client_dialect: Dialect = Field(
        "auto",
        description="The MCP-over-ACP dialect the client speaks, if it declares ACP-transport servers: " + DIALECT_HELP,
    )
    gateway: AcpGatewayConfig = Field(default_factory=AcpGatewayConfig)

    def uses_gateway(self) -> bool:
        """Does the chain contain the built-in gateway (which needs `backends`)?"""
        return any(c.builtin == "gateway" for c in self.components)

    @model_validator(mode="after")
    def _chain(self) -> AcpConfig:
        problems: list[tuple[Loc, str]] = []
        if not self.components:
            problems.append(
                (
                    ("components",),
                    "list at least the terminal agent" if self.mode == "agent" else "list at least one proxy",
                )
            )
        elif self.mode == "agent" and self.components[-1].builtin is not None:
            problems.append(
                (
                    ("components", len(self.components) - 1),
                    "the last component is the terminal agent; a built-in is a proxy and cannot be it",
                )
            )
        if self.mode == "proxy" and self.mcp_bridge is not None:
            problems.append(
                (("mcp_bridge",), "the bridge goes right before the terminal agent; in proxy mode there is none")
            )
        raise_problems(problems)
        return self
