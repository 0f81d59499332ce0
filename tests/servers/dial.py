"""A client that dials an address itself, for tests that run it inside a network namespace
(``ip netns exec NS python -m tests.servers.dial ...``, from the repository root), where
an iptables REDIRECT may send its connection elsewhere. Prints one JSON line.

Usage::

    python -m tests.servers.dial sdk URL MODE[,MODE] [--ca PEM] [--header K:V]...  # the official SDK client: exercise()'s results, or its error
    python -m tests.servers.dial tls IP PORT --sni NAME --ca PEM [--host H]  # an initialize POST over TLS, and the
                                                     # certificate presented (its issuer, its names), or the error
    python -m tests.servers.dial post URL [--host H] [--header K:V]...  # one initialize POST: status, headers, body
    python -m tests.servers.dial sse URL             # the SDK's legacy HTTP+SSE client: initialize, list, call
    python -m tests.servers.dial wait HOST PORT      # until HOST:PORT accepts a connection (15 s at most)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import ssl
import sys
import time

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "dial", "version": "1"}},
}


async def sdk(url: str, mode: str, ca: str | None = None, extra: list[str] = ()) -> dict:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from tests.peers import client, exercise

    headers = dict((k.strip(), v.strip()) for k, _, v in (h.partition(":") for h in extra))
    seen: list[list] = []  # each HTTP answer's status and challenge, as the client got them

    async def record(response) -> None:
        if response.status_code >= 400:
            seen.append([response.request.method, response.status_code, response.headers.get("www-authenticate")])

    verify = ssl.create_default_context(cafile=ca) if ca is not None else True  # trusting this CA only
    http = httpx2.AsyncClient(
        verify=verify, headers=headers, timeout=httpx2.Timeout(30, read=300), trust_env=False, event_hooks={"response": [record]}
    )
    try:
        async with client(streamable_http_client(url, http_client=http), mode) as c:
            info = c.server_info.name if mode == "legacy" else None
            return {"ok": await asyncio.wait_for(exercise(c), 20), "server": info, "http_errors": seen}
    except BaseException as exc:  # noqa: BLE001 (the test reads what failed)
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        return {"error": f"{type(exc).__name__}: {exc}", "http_errors": seen}


def tls(ip: str, port: int, sni: str, ca: str, host: str | None) -> dict:
    """One initialize POST over TLS to ip:port asking for ``sni``, trusting ``ca`` only."""
    context = ssl.create_default_context(cafile=ca)
    body = json.dumps(INIT).encode()
    try:
        with socket.create_connection((ip, port), timeout=20) as raw, context.wrap_socket(raw, server_hostname=sni) as s:
            cert = s.getpeercert()
            head = (
                f"POST /mcp HTTP/1.1\r\nHost: {host or f'{sni}:{port}'}\r\ncontent-type: application/json\r\n"
                f"accept: application/json, text/event-stream\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
            )
            s.sendall(head.encode() + body)
            data = b""
            while chunk := s.recv(65536):  # connection: close: the answer ends with the connection
                data += chunk
    except (OSError, ssl.SSLError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    issuer = dict(x[0] for x in cert["issuer"])["commonName"]
    names = sorted(v for _, v in cert.get("subjectAltName", ()))
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return {"issuer": issuer, "names": names, "status": status, "body": data.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")}


async def legacy_sse(url: str) -> dict:
    """The SDK's legacy HTTP+SSE client: initialize, list, call."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    try:
        async with sse_client(url) as (read, write), ClientSession(read, write) as session:
            init = await asyncio.wait_for(session.initialize(), 20)
            tools = await asyncio.wait_for(session.list_tools(), 20)
            echo = await asyncio.wait_for(session.call_tool("echo", {"text": "over sse"}), 20)
            return {"ok": {"server": init.server_info.name, "protocol": init.protocol_version, "tools": sorted(t.name for t in tools.tools), "echo": echo.content[0].text}}
    except BaseException as exc:  # noqa: BLE001 (the test reads what failed)
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        return {"error": f"{type(exc).__name__}: {exc}"}


async def post(url: str, host: str | None, extra: list[str]) -> dict:
    import httpx

    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if host is not None:
        headers["host"] = host
    for item in extra:
        k, _, v = item.partition(":")
        headers[k.strip()] = v.strip()
    try:
        async with httpx.AsyncClient(timeout=20, trust_env=False) as http:
            r = await http.post(url, json=INIT, headers=headers)
            text = r.text if "event-stream" not in r.headers.get("content-type", "") else r.text[:4000]
            return {"status": r.status_code, "headers": dict(r.headers), "body": text}
    except httpx.HTTPError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def wait(host: str, port: int) -> dict:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return {"ok": True}
        time.sleep(0.05)
    return {"error": f"{host}:{port} not listening after 15 s"}


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sdk")
    s.add_argument("url")
    s.add_argument("mode")
    s.add_argument("--ca")
    s.add_argument("--header", action="append", default=[])
    t = sub.add_parser("tls")
    t.add_argument("ip")
    t.add_argument("port", type=int)
    t.add_argument("--sni", required=True)
    t.add_argument("--ca", required=True)
    t.add_argument("--host")
    p = sub.add_parser("post")
    p.add_argument("url")
    p.add_argument("--host")
    p.add_argument("--header", action="append", default=[])
    e = sub.add_parser("sse")
    e.add_argument("url")
    w = sub.add_parser("wait")
    w.add_argument("host")
    w.add_argument("port", type=int)
    args = parser.parse_args()
    if args.what == "sdk" and "," in args.mode:  # each era in turn, one process: {mode: result}
        out = {mode: asyncio.run(sdk(args.url, mode, args.ca, args.header)) for mode in args.mode.split(",")}
    elif args.what == "sdk":
        out = asyncio.run(sdk(args.url, args.mode, args.ca, args.header))
    elif args.what == "sse":
        out = asyncio.run(legacy_sse(args.url))
    elif args.what == "tls":
        out = tls(args.ip, args.port, args.sni, args.ca, args.host)
    elif args.what == "post":
        out = asyncio.run(post(args.url, args.host, args.header))
    else:
        out = wait(args.host, args.port)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
