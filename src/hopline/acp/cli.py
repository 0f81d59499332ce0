"""``hopline acp``: run a chain of ACP proxies in front of an ACP agent, on our stdio.

    hopline acp [--dialect D|N=D] [--proxy] [--on-crash fail|bypass|restart] [--mcp-bridge http|stdio] \\
        [--trace FILE] -- "proxy1 args" "proxy2" "agent --acp"

Agent mode (default): the last command is the terminal agent and the conductor
looks like an ordinary ACP agent to whoever launched it. Proxy mode
(``--proxy``): every command is a proxy and the conductor itself sits inside
another chain. ``--mcp-bridge`` puts hopline's MCP-over-ACP bridge
(:mod:`hopline.acp.bridge`) right before the agent, for agents that cannot consume
ACP-transport MCP servers themselves. Top-level imports stay light:
``hopline --help`` imports this.
"""

from __future__ import annotations

import argparse
import logging

DIALECT_HELP = (
    "proxy dialect: d1 (Thinkwell), d2 (RFD text), d3 (sacp v11), d4 (Rust conductor 2.0), d5 (newest schema) "
    "or auto (detect; the default). 'D' sets every proxy, 'N=D' component N (1-based); repeatable. "
    "For the agent (N=last) and the client (0=D) it is the MCP-over-ACP dialect they speak"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dialect", action="append", default=[], metavar="D|N=D", help=DIALECT_HELP)
    parser.add_argument("--proxy", action="store_true", help="proxy mode: every command is a proxy; the conductor is itself a proxy in another chain")
    parser.add_argument(
        "--on-crash",
        choices=["fail", "bypass", "restart"],
        default="fail",
        help="when a proxy exits: fail its traffic with an error (default), route around it, or restart it "
        "(up to 3 times in a row, with backoff; sessions come back through session/load when the agent supports it)",
    )
    parser.add_argument(
        "--mcp-bridge",
        choices=["http", "stdio"],
        help="insert hopline's MCP-over-ACP bridge before the agent: ACP-transport MCP servers reach it as loopback "
        "Streamable HTTP servers (http) or as a stdio command (stdio); it counts as a component in --dialect N=D",
    )
    parser.add_argument("--trace", metavar="FILE", help="append one JSON line per routed message (from, to, method, id, dialect)")
    parser.add_argument("components", nargs="*", metavar="COMMAND", help='one shell-quoted command per component, e.g. "python proxy.py" "my-agent --acp"')


def run(args: argparse.Namespace) -> int:
    from hopline.acp import chain as chain_mod

    components = list(args.components)
    if getattr(args, "mcp_bridge", None) and components and not args.proxy:
        import shlex
        import sys

        components.insert(len(components) - 1, shlex.join([sys.executable, "-m", "hopline.acp.bridge", "--transport", args.mcp_bridge]))
    try:
        chain = chain_mod.build(
            components,
            mode=chain_mod.PROXY_MODE if args.proxy else chain_mod.AGENT_MODE,
            dialect_options=args.dialect,
            on_crash=args.on_crash,
        )
    except ValueError as exc:
        logging.getLogger("hopline.acp").error("%s", exc)
        return 2
    from hopline.runtime import run as run_loop

    return run_loop(_serve(chain, args.trace))


async def _serve(chain, trace_path: str | None) -> int:
    import asyncio
    import signal

    from hopline.acp.conductor import Conductor
    from hopline.acp.trace import TraceWriter
    from hopline.acp.upstream import open_upstream

    tracer = TraceWriter(trace_path) if trace_path else None
    receiving, sending, feeder = await open_upstream()
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop the chain cleanly, then exit
        loop.add_signal_handler(sig, main.cancel)  # type: ignore[union-attr]
    try:
        await Conductor(chain, receiving, upstream_out=sending, tracer=tracer).run()
    except asyncio.CancelledError:
        return 143
    finally:
        if feeder is not None:
            feeder.cancel()
        await sending.aclose()
        if tracer is not None:
            tracer.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m hopline.acp``: the same command without the top-level CLI."""
    parser = argparse.ArgumentParser(prog="hopline acp", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
