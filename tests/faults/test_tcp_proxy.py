"""The fault proxy itself, against a loopback echo server: pass, delay, drop, cut, refuse, corrupt, heal."""

from __future__ import annotations

import asyncio

import pytest

from tests.faults.tcp_proxy import FaultProxy


@pytest.fixture
async def proxy():
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(1024):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    p = await FaultProxy.start(server.sockets[0].getsockname()[1])
    yield p
    await p.aclose()
    server.close()


async def roundtrip(p: FaultProxy, payload: bytes = b"hello\n", timeout: float = 2.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", p.port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), timeout)
    finally:
        writer.close()


async def test_it_passes_bytes_through(proxy):
    assert await roundtrip(proxy) == b"hello\n"
    assert proxy.stats.accepted == 1 and proxy.stats.up == 6 and proxy.stats.down == 6


async def test_delay_holds_each_chunk(proxy):
    proxy.delay(0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await roundtrip(proxy) == b"hello\n"
    assert loop.time() - started >= 0.4  # once up, once down


async def test_drop_is_a_black_hole_without_fin_or_rst(proxy):
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"before\n")
    assert await asyncio.wait_for(reader.readexactly(7), 2) == b"before\n"
    proxy.drop()  # applies to the open connection too
    writer.write(b"lost\n")
    await writer.drain()
    with pytest.raises(asyncio.TimeoutError):  # silence: neither data nor EOF nor reset
        await asyncio.wait_for(reader.read(100), 0.3)
    assert proxy.stats.dropped == 5
    writer.close()


async def test_cut_resets_open_connections(proxy):
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"x")
    assert await asyncio.wait_for(reader.readexactly(1), 2) == b"x"
    proxy.cut()
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(reader.readexactly(1), 2)
    writer.close()
    assert proxy.stats.reset == 1
    assert await roundtrip(proxy) == b"hello\n"  # new connections still pass


async def test_refuse_resets_new_connections_until_healed(proxy):
    proxy.refuse()
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError, BrokenPipeError)):
        await roundtrip(proxy)
    assert proxy.stats.refused == 1
    proxy.heal()
    assert await roundtrip(proxy) == b"hello\n"


async def test_corrupt_mangles_what_comes_back(proxy):
    proxy.corrupt()
    got = await roundtrip(proxy, b"jsonrpc\n")
    assert got != b"jsonrpc\n" and len(got) == 8
    proxy.heal()
    assert await roundtrip(proxy, b"jsonrpc\n") == b"jsonrpc\n"
