"""``hopline serve CONFIG``: the Forward/Reverse gateway, over HTTP or stdio.

The arguments and the dispatch only, so that ``hopline --help`` stays light: the gateway
modes' process is :mod:`.serve_gateway`, transparent mode's :mod:`.serve_transparent`.
"""

from __future__ import annotations

import argparse
import sys

from hopline.commands.relay import port_number

EPILOG = """\
examples:
  hopline serve examples/gateway.yaml --port 8000      every backend behind http://127.0.0.1:8000/mcp
  hopline serve ~/.config/Claude/claude_desktop_config.json --port 8000
  hopline serve --stdio examples/gateway.yaml          one client on stdin/stdout (a desktop app launches it)
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.add_argument("config", help="gateway configuration (YAML, or the mcpServers JSON of desktop MCP clients)")
    p.add_argument("--stdio", action="store_true", help="serve one client on stdin/stdout instead of HTTP")
    p.add_argument("--host", help="override listen.host")
    p.add_argument("--port", type=port_number, help="override listen.port (0 picks a free port)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="extra allowed Host header value (DNS-rebinding protection); adds to listen.allowed_hosts",
    )
    p.add_argument(
        "--lazy",
        action="store_true",
        help="start no backend before a client needs it (no start-up line per backend saying whether it is up)",
    )
    p.add_argument(
        "--admin-port",
        type=port_number,
        metavar="P",
        help="serve Prometheus /metrics (and /healthz, /readyz) on this port (0 picks a free port); overrides "
        "observability.metrics.port",
    )


def run(args: argparse.Namespace) -> int:
    from hopline.config.load import ConfigError, load_config

    try:
        config = load_config(args.config)
    except (ConfigError, OSError) as exc:
        print(f"hopline serve: {exc}", file=sys.stderr)
        return 1
    if args.host:
        config.listen.host = args.host
    if args.port is not None:
        config.listen.port = args.port
    if args.allow_host:
        config.listen.allowed_hosts = [*config.listen.allowed_hosts, *args.allow_host]
    if args.admin_port is not None:
        config.observability.metrics.port = args.admin_port
    from hopline.observability.logs import configure

    configure(config.observability.logs.format, requests=config.observability.logs.requests)
    if config.mode == "transparent":  # HTTP only: a transparent intermediary sits on a network path
        if args.stdio:
            print(
                "hopline serve: transparent mode is HTTP only (stdio has no network path to intercept)", file=sys.stderr
            )
            return 1
        from hopline.declaration import declare, for_config
        from hopline.commands import serve_transparent

        deployment = for_config(config)
        return serve_transparent.serve(config, declaration=lambda: declare(deployment), endpoints=deployment.endpoints)
    from hopline.commands import serve_gateway

    serve = serve_gateway.serve_stdio if args.stdio else serve_gateway.serve_http
    return serve(config, args.config, report_backends=not args.lazy)
