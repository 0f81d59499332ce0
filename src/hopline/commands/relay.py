"""``hopline relay``: arguments → the relay composition (modes/relay.py) → serve until a signal (serve_relay.py).

The target is a URL (options may come before or after it), or a command after ``--``
(everything after ``--`` is the command's, options included), or nothing (the demo
server). Header values given with ``-H`` and a URL's userinfo and query are secrets:
they are never printed (the startup line names headers only, errors name the URL as
``scheme://host:port/path``).
"""

from __future__ import annotations

import argparse
from typing import Any
import dataclasses
import logging
import os
import re
import sys

from hopline.transports.door_limits import DoorLimits
from hopline.declaration import Deployment, declare
from hopline.transports.targets import RemoteTarget, StdioTarget

log = logging.getLogger("hopline.relay")

DESCRIPTION_EPILOG = """\
targets:
  -- CMD ARGS...        a stdio MCP server to spawn (one child per client session unless --shared);
                        everything after -- belongs to the command
  URL                   a remote Streamable HTTP server (…/mcp) or legacy SSE server (…/sse);
                        options may come before or after it
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
    p.add_argument(
        "--stdio",
        action="store_true",
        help="serve one client on stdin/stdout and relay to the remote URL given as target",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument(
        "--port", type=port_number, default=8000, help="port to listen on; 0 picks a free one (default: 8000)"
    )
    p.add_argument(
        "--shared",
        action="store_true",
        help="share one backend process among all client sessions (ids remapped per client)",
    )
    p.add_argument(
        "--max-children",
        type=int,
        default=8,
        metavar="N",
        help="stdio target: child processes at most, spares and shared ones included; "
        "a new session beyond it gets an error at once (default: 8)",
    )
    p.add_argument(
        "--prewarm",
        type=int,
        default=1,
        metavar="N",
        help="stdio target: spare children kept started ahead (after the first session) "
        "so a new session need not wait for one to start; 0: none (default: 1)",
    )
    p.add_argument(
        "--child-idle-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="stdio target: close a session whose child has had nothing "
        "in flight this long (the client gets 404 and re-initializes); 0: never (default: 300)",
    )
    p.add_argument(
        "--child-reclaim-after",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="stdio target, at --max-children: a new session takes the child of the least recently active session idle "
        "this long, or idle 1 s after only initializing (a burst's or one-shot client's leftovers); the closed "
        "session's client gets 404 and re-initializes (default: 60)",
    )
    p.add_argument(
        "--stateless-http", action="store_true", help="handshake-era clients get no session (each POST is independent)"
    )
    p.add_argument(
        "--transport",
        choices=["auto", "streamable-http", "sse"],
        default="auto",
        help="transport of a remote URL target (auto: …/sse means legacy SSE)",
    )
    p.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="header sent to a remote target on every request (repeatable)",
    )
    p.add_argument(
        "-e",
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment variable for a stdio target (repeatable)",
    )
    p.add_argument("--cwd", help="working directory for a stdio target")
    p.add_argument(
        "--inherit-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this variable of hopline's environment to a stdio target (a name or glob such as 'AWS_*'; '*' for "
        "all; repeatable); by default a child gets only PATH, HOME, USER, locale and the like",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="answer a request the backend has not answered with a timeout error (default: 300)",
    )
    p.add_argument(
        "--max-body",
        type=int,
        default=4 * 1024 * 1024,
        metavar="BYTES",
        help="largest request body accepted; larger gets 413 (default: 4 MiB)",
    )
    p.add_argument("--max-sessions", type=int, default=1000, help="sessions held at once; more get 503 (default: 1000)")
    p.add_argument(
        "--max-pending-sessions",
        type=int,
        default=16,
        metavar="N",
        help="session creations in flight at once; more get 503 (default: 16)",
    )
    p.add_argument(
        "--handshake-timeout",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="longest a session creation may take (default: 20)",
    )
    p.add_argument(
        "--stream-buffer-messages",
        type=int,
        default=1000,
        metavar="N",
        help="unread messages per stream before it is cut off (default: 1000)",
    )
    p.add_argument(
        "--stream-buffer-bytes",
        type=int,
        default=8 << 20,
        metavar="BYTES",
        help="unread bytes per stream before it is cut off (default: 8 MiB)",
    )
    p.add_argument(
        "--session-ttl",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="end sessions idle this long (default: 1800)",
    )
    p.add_argument("--mcp-path", default="/mcp", help="path of the Streamable HTTP endpoint (default: /mcp)")
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="extra allowed Origin (loopback origins are always allowed)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="extra allowed Host header value (DNS-rebinding protection): a host (any port) or host:port",
    )
    p.add_argument(
        "--no-host-check",
        action="store_true",
        help="disable the Host check that is on by default when bound to loopback",
    )
    p.add_argument(
        "--replica",
        action="store_true",
        help="one of several relays behind a load balancer: handshake-era sessions any of them can resume; "
        "reads HOPLINE_SESSION_KEY (required, the same on every replica) and REDIS_URL (optional) from the "
        "environment (the `state:` section of a configuration file)",
    )
    door = p.add_argument_group("front door (bounds of the HTTP listener)")
    d = DoorLimits()
    door.add_argument(
        "--max-connections",
        type=int,
        default=d.max_connections,
        metavar="N",
        help=f"open connections at once; more get 503 (default: {d.max_connections})",
    )
    door.add_argument(
        "--max-connections-per-source",
        type=int,
        default=d.max_connections_per_source,
        metavar="N",
        help=f"open connections at once from one client address (default: {d.max_connections_per_source})",
    )
    door.add_argument(
        "--idle-timeout",
        type=float,
        default=d.idle_timeout,
        metavar="SECONDS",
        help="close a connection that begins no request for this long, new or keep-alive (default: "
        f"{d.idle_timeout:g})",
    )
    door.add_argument(
        "--header-timeout",
        type=float,
        default=d.header_timeout,
        metavar="SECONDS",
        help=f"a request's line and headers must arrive within this (408 after; default: {d.header_timeout:g})",
    )
    door.add_argument(
        "--body-timeout",
        type=float,
        default=d.body_timeout,
        metavar="SECONDS",
        help=f"a request's body must arrive within this after its headers (408 after; default: {d.body_timeout:g})",
    )
    door.add_argument(
        "--max-header-bytes",
        type=int,
        default=d.max_header_bytes,
        metavar="BYTES",
        help=f"largest request head, request line and headers (431 above; default: {d.max_header_bytes})",
    )
    door.add_argument(
        "--max-headers",
        type=int,
        default=d.max_headers,
        metavar="N",
        help=f"most header fields in a request (431 above; default: {d.max_headers})",
    )
    door.add_argument(
        "--max-url-bytes",
        type=int,
        default=d.max_url_bytes,
        metavar="BYTES",
        help=f"longest request target (414 above; default: {d.max_url_bytes})",
    )
    p.add_argument(
        "target",
        nargs="*",
        metavar="URL | -- CMD ARGS",
        help="a remote server's URL, or -- and the command of a stdio server",
    )


def port_number(text: str) -> int:
    """A TCP port for ``--port`` (0: a free one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535; 0 picks a free one)")
    return port


def door_limits(args: argparse.Namespace) -> DoorLimits:
    """The front door's bounds from the flags (each must be positive)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(DoorLimits)}
    bad = [name for name, v in values.items() if v <= 0]
    if bad:
        raise SystemExit(f"hopline relay: --{bad[0].replace('_', '-')} must be positive")
    return DoorLimits(**values)


def describe(spec: StdioTarget | RemoteTarget) -> str:
    """The target as the startup line shows it: a command, or the URL without userinfo or query plus header names."""
    from hopline.transports.http_util import public_url

    if isinstance(spec, StdioTarget):
        from hopline.observability.redact import redact_args

        return repr(" ".join(redact_args(spec.argv)))
    names = f" with header{'s' if len(spec.headers) != 1 else ''} {', '.join(spec.headers)}" if spec.headers else ""
    return repr(public_url(spec.url)) + names


_HOST_PORT = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}(?:/\S*)?$")  # host:port[/path]
_HOST_PATH = re.compile(r"^(?:localhost|\d{1,3}(?:\.\d{1,3}){3})(?:/\S*)?$")  # localhost/mcp, 10.0.0.5/mcp
PROBE_TIMEOUT = 3.0  # seconds a URL target has to accept a connection at start


def _scheme(word: str) -> str | None:
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", word)
    return m.group(1).lower() if m else None


def unusable(target: list[str], env: dict[str, str] | None, cwd: str | None) -> str | None:
    """Why ``target`` cannot work, and what to write instead; None when it may."""
    from hopline.transports.http_util import public_url
    from hopline.transports.targets import find_command

    if not target:
        return None  # the built-in demo
    first = target[0]
    scheme = _scheme(first)
    if scheme in ("http", "https"):
        return None
    if scheme is not None:
        shown = public_url(first)
        fixed = "http" + shown[len(scheme) :] if shown.startswith(scheme) else "http://host:port/mcp"
        return (
            f"{shown!r} is no URL hopline can relay to (scheme {scheme!r}): a remote target starts with http:// or "
            f"https://, e.g. hopline relay {fixed}"
        )
    if cwd is not None and not os.path.isdir(cwd):
        return f"--cwd {cwd!r} is no directory"
    if find_command(first, env, cwd) is not None:
        return None
    if _HOST_PORT.match(first) or _HOST_PATH.match(first):
        shown = public_url("http://" + first)
        return (
            f"{shown[7:]!r} is neither a command nor a URL: a remote target starts with http:// or https://, e.g. "
            f"hopline relay {shown}"
        )
    if " " in first.strip() and len(target) == 1:
        words = first.split()
        return (
            f"command {words[0]!r} with its arguments was given as one word ({first!r}): give them as separate "
            f"words after --, e.g. hopline relay -- {' '.join(words)}"
        )
    where = (
        "there is no executable file at that path"
        if os.sep in first
        else "it is not on PATH" + (" (the PATH given with -e)" if env and "PATH" in env else "")
    )
    return (
        f"command {first!r} not found: {where}. Install it, give its full path, or, for a remote server, "
        "a URL starting with http:// or https://"
    )


def no_answer(url: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why ``url``'s host does not accept a TCP connection now (None when it does, or when the
    environment routes it through a proxy: then only the proxy could tell)."""
    import socket
    from urllib.parse import urlsplit

    from hopline.transports.h1client import usable_for

    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return f"invalid URL: {exc}"
    if not host:
        return "the URL names no host"
    if not usable_for(url):
        return None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except socket.gaierror:
        return f"the name {host} does not resolve"
    except TimeoutError:
        return f"no connection within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


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


def _replica_state() -> Any:
    """``--replica``: the state a ``state:`` section would give, from the environment; False
    (said why) when it is missing or invalid. The key is never printed."""
    import os

    from pydantic import ValidationError

    from hopline.config.state import StateConfig

    key, url = os.environ.get("HOPLINE_SESSION_KEY"), os.environ.get("REDIS_URL")
    if not key:
        print(
            "hopline relay: --replica needs HOPLINE_SESSION_KEY in the environment (32 random bytes, base64url)",
            file=sys.stderr,
        )
        return False
    try:
        return StateConfig(session_key=key, redis_url=url or None)
    except ValidationError as exc:
        for error in exc.errors():
            where = {"session_key": "HOPLINE_SESSION_KEY", "redis_url": "REDIS_URL"}.get(str(error["loc"][0]), "")
            print(f"hopline relay: {where} {error['msg'].removeprefix('Value error, ')}", file=sys.stderr)
        return False


def run(args: argparse.Namespace) -> int:
    from hopline.commands.serve_relay import serve_http, serve_stdio
    from hopline.transports.http_util import SecurityPolicy, public_url

    target = list(args.target)
    if target and target[0] == "--":
        target = target[1:]
    headers = _parse_headers(args.header)
    args.limits = door_limits(args)
    env = _parse_env(args.env)
    refused = unusable(target, env, args.cwd)
    if refused is not None:
        print(f"hopline relay: {refused}", file=sys.stderr)
        return 2
    if target and _scheme(target[0]) in ("http", "https"):
        target[0] = target[0][:4].lower() + target[0][4:]  # HTTP://h/mcp is http://h/mcp
        if len(target) > 1:
            print(
                "hopline relay: a URL target takes no arguments (put options before or after it; a command goes after "
                "--)",
                file=sys.stderr,
            )
            return 2
        spec: StdioTarget | RemoteTarget = RemoteTarget(target[0], args.transport, headers, name=public_url(target[0]))
        silent = no_answer(target[0])
        if silent is not None:
            print(
                f"hopline relay: warning: {public_url(target[0])} does not answer ({silent}); relaying anyway: "
                "clients get an error (-31001) until it does",
                file=sys.stderr,
            )
    elif args.stdio:
        print("hopline relay --stdio needs a URL target: hopline relay --stdio https://host/mcp", file=sys.stderr)
        return 2
    elif target:
        spec = StdioTarget(target, env, args.cwd)
    else:
        spec = StdioTarget([sys.executable, "-m", "hopline.demo"], env, args.cwd)
    if isinstance(spec, StdioTarget):  # the built-in demo is hopline itself: it imports what we import
        spec.inherit_env = [*args.inherit_env, *([] if target else ["PYTHONPATH"])]
    if args.stdio:
        return serve_stdio(spec, args)  # type: ignore[arg-type]
    if isinstance(spec, StdioTarget) and (
        args.max_children < 1 or args.prewarm < 0 or args.child_idle_timeout < 0 or args.child_reclaim_after < 0
    ):
        log.error(
            "--max-children must be at least 1, --prewarm, --child-idle-timeout and --child-reclaim-after at least 0"
        )
        return 2
    args.state = _replica_state() if args.replica else None
    if args.state is False:
        return 2
    from hopline import runtime

    if not SecurityPolicy(bound_host=args.host).loopback:
        print(
            f"hopline relay: warning: listening on {args.host} without authentication: anyone who can "
            "reach this port can use the target",
            file=sys.stderr,
        )
    try:
        return serve_http(
            spec, args, shown=describe(spec), declaration=lambda endpoints: declare(_deployment(spec, endpoints))
        )
    except runtime.BindError as exc:
        print(f"hopline relay: {exc}", file=sys.stderr)
        return 1


def _deployment(spec: StdioTarget | RemoteTarget, endpoints: dict[str, str]) -> Deployment:
    injected = isinstance(spec, RemoteTarget) and bool(spec.headers)
    return Deployment(
        modes=["relay"], token_propagation="credential-injection" if injected else "none", endpoints=endpoints
    )
