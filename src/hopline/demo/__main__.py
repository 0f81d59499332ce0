"""``python -m hopline.demo``: the demo server without going through ``hopline``'s CLI."""

import argparse
import logging
import sys

from hopline.demo import cli

parser = argparse.ArgumentParser(
    prog="python -m hopline.demo", description="hopline's built-in demo MCP server (stdio)."
)
parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
cli.add_arguments(parser)
args = parser.parse_args()
logging.basicConfig(
    level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
)
try:
    raise SystemExit(cli.run(args))
except KeyboardInterrupt:
    raise SystemExit(130) from None
