"""``python -m hopline.acp.gateway --config FILE``: the gateway component as a process, on our stdio.

For chains conducted by something else (another hopline, Thinkwell, the Rust
conductor): the same proxy ``hopline acp`` runs in process. It serves the
file's ``backends``; the MCP server it declares is named ``acp.gateway.server_name``
(or the file's ``name``). On stdin EOF it closes every gateway session (their
backend processes are reaped), flushes stdout and exits 0; a file that cannot
be loaded exits 1 with the problems on stderr. ``add_arguments``/``run`` follow
the ``hopline`` command convention, so it can be registered as ``hopline acp-gateway``.
"""

from __future__ import annotations

import argparse
import logging
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, metavar="FILE", help="configuration file whose `backends` the gateway serves"
    )


def run(args: argparse.Namespace) -> int:
    from hopline.runtime import run as run_loop

    return run_loop(_serve(args.config))


async def _serve(config_path: str) -> int:
    from hopline.acp.gateway.proxy import serve
    from hopline.config.load import ConfigError, load_config
    from hopline.modes import build
    from hopline.transports.stdio import open_own_stdio_halves

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    gateway = build(config)
    name = (config.acp.gateway.server_name if config.acp is not None else None) or config.name
    inbound, outbound, feeder = await open_own_stdio_halves()
    try:
        await serve(inbound, outbound, gateway, name=name)
    finally:
        await gateway.aclose()
        if feeder is not None:
            feeder.cancel()
        await outbound.aclose()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hopline.acp.gateway",
        description="hopline's MCP gateway as an ACP proxy component (see hopline.acp.gateway)",
    )
    add_arguments(parser)
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
