"""``hopline …``: parse arguments, pick the command, run it.

Each command is a module with ``add_arguments(parser)`` and ``run(args) -> int``,
named in :data:`COMMANDS` and imported only when used, so ``hopline --help``
stays fast and one command's dependencies never burden another (STYLE 7).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from hopline import __version__

# command name → (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "relay": (
        "hopline.commands.relay",
        "Relay mode: bridge one MCP server across transports (stdio ⇄ HTTP/SSE), protocol-unaware.",
    ),
    "serve": (
        "hopline.commands.serve",
        "Forward/Reverse gateway: many MCP servers behind one endpoint, from a config file.",
    ),
    "declare": ("hopline.declaration", "Print the conformance declaration (tier, modes) as JSON."),
    "demo-server": (
        "hopline.demo.cli",
        "Run the built-in demo MCP server over stdio (what the relay serves by default).",
    ),
    "acp": ("hopline.acp.cli", "ACP conductor: run a chain of proxies in front of an ACP agent."),
    "acp-gateway": (
        "hopline.acp.gateway.__main__",
        "hopline's MCP gateway as an ACP proxy component (for chains other conductors run).",
    ),
    "schema": ("hopline.commands.schema", "Print the JSON Schema of the configuration file."),
    "check": ("hopline.commands.check", "Validate a configuration file and explain what it sets up."),
}

EPILOG = """\
examples:
  hopline relay --port 8000                      relay the built-in demo server at http://127.0.0.1:8000/mcp
  hopline relay --port 8000 -- npx -y @modelcontextprotocol/server-everything
  hopline relay --stdio https://example.com/mcp  let a stdio-only client reach a remote server
  hopline declare                                what this hopline claims (tier, modes), as JSON
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hopline",
        description="hopline: a gateway for agent-tool protocols (MCP, ACP).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hopline {__version__}")
    _verbosity(parser, "info")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(
            name, help=help_text, description=help_text, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
        _verbosity(p, argparse.SUPPRESS)  # also after the command: `hopline relay -v …`
    return parser


def _verbosity(parser: argparse.ArgumentParser, default: str) -> None:
    """``--log-level`` and ``-v`` (debug), where the command has no options of those names."""
    taken = {o for a in parser._actions for o in a.option_strings}
    if "--log-level" not in taken:
        parser.add_argument(
            "--log-level",
            default=default,
            choices=["debug", "info", "warning", "error"],
            help="log verbosity on stderr (default: info)",
        )
    if "-v" not in taken and "--verbose" not in taken:
        parser.add_argument(
            "-v",
            "--verbose",
            dest="log_level",
            action="store_const",
            const="debug",
            default=default,
            help="log at debug level (--log-level debug)",
        )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Libraries log every request at INFO; hopline logs what matters itself.
    for noisy in ("httpx", "httpcore", "uvicorn.error"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        return importlib.import_module(args._module).run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # stdout closed early (`hopline check … | head`)
        return 0
    except Exception as exc:  # never a traceback: one line; the traceback at --log-level debug
        logging.getLogger("hopline").debug("%s failed", args.command, exc_info=True)
        print(
            f"hopline {args.command}: {type(exc).__name__}: {exc}"
            if str(exc)
            else f"hopline {args.command}: {type(exc).__name__}",
            file=sys.stderr,
        )
        return 1
