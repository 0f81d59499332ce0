"""``hopline relay``: arguments → a Relay composition → serve until a signal."""

from __future__ import annotations

import argparse
import sys

DESCRIPTION_EPILOG = """\
targets:
  -- CMD ARGS...        a stdio MCP server to spawn (one child per client session unless --shared)
  URL                   a remote Streamable HTTP server (…/mcp) or legacy SSE server (…/sse)
  (nothing)             the built-in demo server (`hopline demo-server`)

examples:
  hopline relay --port 8000                                   demo server at http://127.0.0.1:8000/mcp
  hopline relay --port 8000 -- npx -y @modelcontextprotocol/server-everything
  hopline relay --port 8000 https://example.com/mcp -H 'Authorization: Bearer $TOKEN'
  hopline relay --stdio https://example.com/mcp -H 'Authorization: Bearer $TOKEN'

endpoints: /mcp (Streamable HTTP, both eras), /sse + /messages (legacy HTTP+SSE),
/.well-known/agent-tool-proxy (conformance declaration), /healthz.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = DESCRIPTION_EPILOG
    p.add_argument("--stdio", action="store_true", help="serve one client on stdin/stdout and relay to the remote URL given as target")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on; 0 picks a free one (default: 8000)")
    p.add_argument("--shared", action="store_true", help="share one backend process among all client sessions (ids remapped per client)")
    p.add_argument("--max-children", type=int, default=8, metavar="N", help="stdio target: child processes at most, spares and shared ones included; "
                   "a new session beyond it gets an error at once (default: 8)")
    p.add_argument("--prewarm", type=int, default=1, metavar="N", help="stdio target: spare children kept started ahead (after the first session) "
                   "so a new session need not wait for one to start; 0: none (default: 1)")
    p.add_argument("--child-idle-timeout", type=float, default=300.0, metavar="SECONDS", help="stdio target: close a session whose child has had nothing "
                   "in flight this long (the client gets 404 and re-initializes); at the cap such a child is reclaimed at once; 0: never (default: 300)")
    p.add_argument("--stateless-http", action="store_true", help="handshake-era clients get no session (each POST is independent)")
    p.add_argument("--transport", choices=["auto", "streamable-http", "sse"], default="auto", help="transport of a remote URL target (auto: …/sse means legacy SSE)")
    p.add_argument("-H", "--header", action="append", default=[], metavar="'NAME: VALUE'", help="header sent to a remote target on every request (repeatable)")
    p.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE", help="environment variable for a stdio target (repeatable)")
    p.add_argument("--cwd", help="working directory for a stdio target")
    p.add_argument("--request-timeout", type=float, default=300.0, metavar="SECONDS", help="answer a request the backend has not answered with a timeout error (default: 300)")
    p.add_argument("--max-body", type=int, default=4 * 1024 * 1024, metavar="BYTES", help="largest request body accepted; larger gets 413 (default: 4 MiB)")
    p.add_argument("--max-sessions", type=int, default=1000, help="sessions held at once; more get 503 (default: 1000)")
    p.add_argument("--session-ttl", type=float, default=1800.0, metavar="SECONDS", help="end sessions idle this long (default: 1800)")
    p.add_argument("--mcp-path", default="/mcp", help="path of the Streamable HTTP endpoint (default: /mcp)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN", help="extra allowed Origin (loopback origins are always allowed)")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="extra allowed Host header value (DNS-rebinding protection)")
    p.add_argument("--no-host-check", action="store_true", help="disable the Host check that is on by default when bound to loopback")
    p.add_argument("target", nargs=argparse.REMAINDER, help="-- CMD ARGS..., or URL")


def _parse_headers(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, value = v.partition(":")
        if not sep or not name.strip():
            raise SystemExit(f"hopline relay: bad --header {v!r}; expected 'Name: value'")
        if any(c in value for c in "\r\n"):
            raise SystemExit("hopline relay: header values must not contain CR or LF")
        out[name.strip()] = value.strip()
    return out


def _parse_env(values: list[str]) -> dict[str, str] | None:
    if not values:
        return None
    env = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep:
            raise SystemExit(f"hopline relay: bad --env {v!r}; expected KEY=VALUE")
        env[key] = value
    return env


def run(args: argparse.Namespace) -> int:
    from hopline.modes import relay_serve
    from hopline.modes.relay import RemoteTarget, StdioTarget

    target = list(args.target)
    if target and target[0] == "--":
        target = target[1:]
    headers = _parse_headers(args.header)
    if len(target) == 1 and target[0].startswith(("http://", "https://")):
        spec: StdioTarget | RemoteTarget = RemoteTarget(target[0], args.transport, headers)
    elif args.stdio:
        print("hopline relay --stdio needs a URL target: hopline relay --stdio https://host/mcp", file=sys.stderr)
        return 2
    elif target:
        spec = StdioTarget(target, _parse_env(args.env), args.cwd)
    else:
        spec = StdioTarget([sys.executable, "-m", "hopline.demo"], _parse_env(args.env), args.cwd)
    if args.stdio:
        return relay_serve.serve_stdio(spec, args)  # type: ignore[arg-type]
    return relay_serve.serve_http(spec, args)
