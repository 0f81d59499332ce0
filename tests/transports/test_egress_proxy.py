"""The sandbox's egress rules (allowlist.py) and proxy (transports/egress.py), in process: the rules as
data, then the proxy on a real Unix socket against a real echo server on loopback."""

from __future__ import annotations

import asyncio
import os

import pytest

from hopline.allowlist import Rule, address_allowed, matching, parse
from hopline.transports.egress import EgressProxy


@pytest.mark.parametrize(
    "entry, host, ports",
    [
        ("API.GitHub.com", "api.github.com", (443, 80)),
        ("x.example:8443", "x.example", (8443,)),
        ("*.example.com", "*.example.com", (443, 80)),
        ("[::1]:80", "::1", (80,)),
        ("10.0.0.1", "10.0.0.1", (443, 80)),
    ],
)
def test_entries_parse(entry, host, ports):
    assert Rule.parse(entry) == Rule(host, ports)


@pytest.mark.parametrize("entry", ["", "a b", "http://x", "x:0", "x:99999", "*.com", "[::1", "ex_ample.com", "a..b",
                                   "x:y:z", "user@host", "10.0.0.0/8"])  # fmt: skip
def test_malformed_entries_are_refused(entry):
    with pytest.raises(ValueError):
        Rule.parse(entry)


def test_a_wildcard_admits_names_under_the_domain_not_the_domain_or_lookalikes():
    rules = parse(["*.example.com"])
    assert matching(rules, "A.Example.COM.", 443) is not None
    assert matching(rules, "example.com", 443) is None and matching(rules, "evilexample.com", 443) is None
    assert matching(rules, "a.example.com", 22) is None


def test_private_addresses_need_an_entry_naming_the_address_and_port():
    rules = parse(["127.0.0.1:9", "db.internal:5432"])
    assert address_allowed("127.0.0.1", 9, rules) and not address_allowed("127.0.0.1", 10, rules)
    assert not address_allowed("10.1.2.3", 5432, rules)  # a listed *name* that resolves privately
    assert not address_allowed("::ffff:127.0.0.2", 9, rules) and address_allowed("::ffff:127.0.0.1", 9, rules)
    assert not address_allowed("169.254.169.254", 80, rules) and not address_allowed("100.100.100.200", 80, rules)
    assert address_allowed("93.184.215.14", 443, rules)  # public


async def _echo() -> tuple[asyncio.AbstractServer, int]:
    async def serve(reader, writer):
        writer.write(b"echo:" + await reader.read(100))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _ask(directory: str, head: bytes, then: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_unix_connection(os.path.join(directory, "proxy.sock"))
    writer.write(head + then)
    await writer.drain()
    out = await asyncio.wait_for(reader.read(4096), 10)
    if then and out.startswith(b"HTTP/1.1 200"):
        out += await asyncio.wait_for(reader.read(4096), 10)
    writer.close()
    return out


async def test_the_proxy_tunnels_what_is_listed_and_answers_everything_else_at_once():
    server, port = await _echo()
    proxy = EgressProxy(parse([f"127.0.0.1:{port}"]), name="t")
    directory = await proxy.start()
    try:
        assert oct(os.stat(directory).st_mode & 0o777) == "0o711"
        ok = await _ask(directory, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode(), b"hi")
        assert ok.startswith(b"HTTP/1.1 200") and ok.endswith(b"echo:hi")
        plain = await _ask(directory, b"GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\n\r\n")
        assert plain.startswith(b"HTTP/1.1 405") and b"only CONNECT" in plain
        big = await _ask(directory, b"CONNECT a:1 HTTP/1.1\r\nX: " + b"x" * 20000 + b"\r\n\r\n")
        assert big.startswith(b"HTTP/1.1 431")
        bad = await _ask(directory, b"CONNECT nowhere HTTP/1.1\r\n\r\n")
        assert bad.startswith(b"HTTP/1.1 400")
        assert proxy.describe()["refused"] == 3 and proxy.describe()["allowed"] == 1
    finally:
        await proxy.aclose()
        server.close()
    assert not os.path.exists(directory)


async def test_tunnels_at_once_are_bounded():
    server, port = await _echo()
    proxy = EgressProxy(parse([f"127.0.0.1:{port}"]), name="t", max_tunnels=1)
    directory = await proxy.start()
    try:
        reader, writer = await asyncio.open_unix_connection(os.path.join(directory, "proxy.sock"))
        writer.write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")  # held open: the one tunnel
        second = await _ask(directory, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert second.startswith(b"HTTP/1.1 503") and b"tunnels are open already" in second
        writer.close()
    finally:
        await proxy.aclose()
        server.close()
