"""``hopline acp``: run a chain of ACP proxies in front of an ACP agent, on our stdio.

    hopline acp [--config FILE] [--gateway] [--dialect D|N=D] [--proxy] [--on-crash fail|bypass|restart] \\
        [--restart-max N] [--restart-backoff S] [--mcp-bridge http|stdio] [--trace FILE] \\
        -- "proxy1 args" "proxy2" "agent --acp"

Agent mode (default): the last command is the terminal agent and the conductor
looks like an ordinary ACP agent to whoever launched it. Proxy mode
(``--proxy``): every command is a proxy and the conductor itself sits inside
another chain. ``--config FILE`` reads the chain and its settings from the
file's ``acp:`` section (the command line wins; :mod:`hopline.acp.settings`);
``--gateway`` adds hopline's MCP gateway over the file's ``backends`` as the
first proxy, so every session gets the gateway's tools (:mod:`hopline.acp.gateway`).
``--mcp-bridge`` puts hopline's MCP-over-ACP bridge (:mod:`hopline.acp.bridge`)
right before the agent, for agents that cannot consume ACP-transport MCP
servers themselves. ``--listen [HOST:]PORT`` serves editors over WebSocket on
``ws://HOST:PORT/acp`` instead of stdio (:mod:`hopline.acp.remote`): each
connection gets its own chain. A component given as a ``ws://``/``wss://`` URL is
reached over WebSocket. Top-level imports stay light: ``hopline --help`` imports this.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hopline.acp.settings import Plan

DIALECT_HELP = (
    "proxy dialect: d1 (Thinkwell), d2 (RFD text), d3 (sacp v11), d4 (Rust conductor 2.0), d5 (newest schema) "
    "or auto (detect; the default). 'D' sets every proxy, 'N=D' component N (1-based); repeatable. "
    "For the agent (N=last) and the client (0=D) it is the MCP-over-ACP dialect they speak"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="configuration file: the chain and its settings from its `acp:` section, "
        "the gateway's backends from `backends`",
    )
    parser.add_argument(
        "--gateway",
        action="store_true",
        help="add hopline's MCP gateway (the --config file's backends) as the first proxy: "
        "every ACP session gets its tools",
    )
    parser.add_argument("--dialect", action="append", default=[], metavar="D|N=D", help=DIALECT_HELP)
    parser.add_argument(
        "--proxy",
        action="store_true",
        help="proxy mode: every command is a proxy; the conductor is itself a proxy in another chain",
    )
    parser.add_argument(
        "--on-crash",
        choices=["fail", "bypass", "restart"],
        default=None,
        help="when a component exits: fail its traffic with an error (default), "
        "route around it (proxies only), or restart it "
        "(proxy or agent; sessions come back through session/load when the agent supports it, closed ones do not)",
    )
    parser.add_argument(
        "--restart-max",
        type=_positive_int,
        metavar="N",
        help="restarts of one component in a row before its traffic fails (default 3)",
    )
    parser.add_argument(
        "--restart-backoff",
        type=_seconds,
        metavar="S",
        help="seconds before the first restart, doubled for each consecutive one (default 0.1, at most 30)",
    )
    parser.add_argument(
        "--mcp-bridge",
        choices=["http", "stdio"],
        help="insert hopline's MCP-over-ACP bridge before the agent: ACP-transport MCP servers reach it as loopback "
        "Streamable HTTP servers (http) or as a stdio command (stdio); it counts as a component in --dialect N=D",
    )
    parser.add_argument(
        "--trace", metavar="FILE", help="append one JSON line per routed message (from, to, method, id, dialect)"
    )
    parser.add_argument(
        "--listen",
        metavar="[HOST:]PORT",
        help="serve editors over WebSocket on ws://HOST:PORT/acp instead of stdio (HOST 127.0.0.1 unless given; "
        "port 0 picks one and prints it); each connection gets its own chain",
    )
    parser.add_argument(
        "--origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="with --listen: a browser Origin allowed to connect (repeatable); connections carrying any other "
        "Origin are refused (403), those without one (editors, not browsers) are accepted",
    )
    parser.add_argument(
        "--max-connections",
        type=_positive_int,
        default=16,
        metavar="N",
        help="with --listen: editors connected at once (503 above; default 16)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=_positive_int,
        default=4 * 1024 * 1024,
        metavar="N",
        help="with --listen: the largest WebSocket message accepted (the connection is closed with 1009 above; "
        "default 4 MiB)",
    )
    parser.add_argument(
        "--token-env",
        metavar="NAME",
        help="with --listen: require `Authorization: Bearer <token>`, the token read from environment variable NAME "
        "(required to listen on a non-loopback address)",
    )
    parser.add_argument(
        "components",
        nargs="*",
        metavar="COMMAND",
        help='one shell-quoted command per component, e.g. "python proxy.py" "my-agent --acp"',
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be a number of seconds >= 0")
    return value


def run(args: argparse.Namespace) -> int:
    from hopline.acp.settings import plan
    from hopline.config.errors import ConfigError

    try:
        chosen = plan(args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    except ValueError as exc:
        logging.getLogger("hopline.acp").error("%s", exc)
        return 2
    from hopline.runtime import run as run_loop

    if getattr(args, "listen", None):
        try:
            listener = _listener(args, chosen)
        except ValueError as exc:
            logging.getLogger("hopline.acp").error("%s", exc)
            return 2
        return run_loop(_listen(listener))
    return run_loop(_serve(chosen))


def _listener(args: argparse.Namespace, chosen: Plan):
    import os

    from hopline.acp.remote import Listener

    host, sep, port_text = args.listen.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--listen {args.listen!r}: expected [HOST:]PORT") from None
    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            raise ValueError(f"--token-env {args.token_env}: the environment variable is not set or empty")

    async def conduct(channel) -> None:
        from hopline.acp.conductor import Conductor
        from hopline.acp.launch import Launcher
        from hopline.acp.message_trace import TraceWriter

        tracer = TraceWriter(chosen.trace) if chosen.trace else None
        launcher = Launcher(chosen.chain, chosen.config)
        try:
            await Conductor(chosen.chain, channel, spawn=launcher, tracer=tracer).run()
        finally:
            await launcher.aclose()
            if tracer is not None:
                tracer.close()

    return Listener(
        conduct,
        host=host,
        port=port,
        origins=tuple(args.origin),
        max_connections=args.max_connections,
        max_size=args.max_message_bytes,
        token=token,
    )


async def _listen(listener) -> int:
    import asyncio
    import signal

    port = await listener.start()
    shown = f"[{listener.host}]" if ":" in listener.host else listener.host
    print(f"hopline acp: listening on ws://{shown}:{port}/acp", file=sys.stderr, flush=True)
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main.cancel)  # type: ignore[union-attr]
    try:
        await listener.serve_forever()
    except asyncio.CancelledError:
        return 0
    finally:
        await listener.aclose()
    return 0


async def _serve(chosen: Plan) -> int:
    import asyncio
    import signal

    from hopline.acp.conductor import Conductor
    from hopline.acp.launch import Launcher
    from hopline.acp.message_trace import TraceWriter
    from hopline.acp.upstream import open_upstream

    tracer = TraceWriter(chosen.trace) if chosen.trace else None
    launcher = Launcher(chosen.chain, chosen.config)
    receiving, sending, feeder = await open_upstream()
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop the chain cleanly, then exit
        loop.add_signal_handler(sig, main.cancel)  # type: ignore[union-attr]
    try:
        await Conductor(chosen.chain, receiving, upstream_out=sending, spawn=launcher, tracer=tracer).run()
    except asyncio.CancelledError:
        return 143
    finally:
        await launcher.aclose()
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
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
