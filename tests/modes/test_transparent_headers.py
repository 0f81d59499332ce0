"""Transparent mode, level 1: what a header rule judges is exactly what is forwarded.

A real SDK backend records every request that reaches it; a real HTTP client (httpx, and
the official SDK client) talks to a real hopline. Three ways around a header rule are
closed here: a repeated header (the rule reads one value, the backend another), a
handshake-era request whose ``Mcp-Method`` nobody validates, and a handshake-era request
with no ``Mcp-Method`` at all (reference/mcp-wire.md: an intermediary enforcing policy on
the mirror headers rejects versions older than 2026-07-28, and duplicated routing headers).
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from hopline.binding import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION
from tests.modes.test_transparent import HEADERS, INIT, intercepted, origin, write
from tests.peers import MODES, bounded, text_of
from tests.servers import recorder_server

NO_CALLS = ['http.mcp_method != "tools/call"']  # a method rule: deny tools/call, allow the rest
META = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_INFO: {"name": "t", "version": "1"}, META_CLIENT_CAPABILITIES: {}}
MODERN_CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": META}}
LEGACY_CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
MODERN = {**HEADERS, "mcp-protocol-version": "2026-07-28"}


def serve(tmp_path, hopline_serve, recorded, **transparent):
    url, record = recorded
    real = origin(url)
    gw = hopline_serve(write(tmp_path, {"destinations": {real: f"http://{real}"}, **transparent}))
    return gw.url + "/mcp", real, record


async def post(url: str, body: dict | bytes, headers: list[tuple[str, str]]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as http:
        content = body if isinstance(body, bytes) else orjson.dumps(body)
        return await http.post(url, content=content, headers=headers)


def refused_400(r: httpx.Response, header: str) -> None:
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["id"] is None and body["error"]["code"] == -32020 and header in body["error"]["message"], body


async def test_a_repeated_mcp_method_is_refused_before_the_destination(tmp_path, hopline_serve, recorded):
    url, real, record = serve(tmp_path, hopline_serve, recorded, rules=NO_CALLS)
    headers = [*MODERN.items(), ("host", real), ("mcp-method", "ping"), ("mcp-method", "tools/call"), ("mcp-name", "echo")]
    r = await post(url, MODERN_CALL, headers)
    refused_400(r, "Mcp-Method")
    assert not recorder_server.recorded(record)


async def test_a_repeated_header_a_rule_reads_is_refused_so_the_backend_never_sees_another_value(tmp_path, hopline_serve, recorded):
    url, real, record = serve(tmp_path, hopline_serve, recorded, rules=['http.headers["x-team"] == "ops"'])
    r = await post(url, INIT, [*HEADERS.items(), ("host", real), ("x-team", "ops"), ("x-team", "dev")])
    refused_400(r, "X-Team")
    one = await post(url, INIT, [*HEADERS.items(), ("host", real), ("x-team", "ops"), ("accept-language", "en"), ("accept-language", "fr")])
    assert one.status_code == 200, one.text  # a repeated header no rule reads still passes
    seen = recorder_server.recorded(record)
    assert len(seen) == 1 and [v for k, v in seen[0]["headers"] if k == "x-team"] == ["ops"]  # what the rule judged is what arrived


async def test_repeated_routing_headers_are_refused_even_without_rules(tmp_path, hopline_serve, recorded):
    url, real, record = serve(tmp_path, hopline_serve, recorded)
    for name, values in (("authorization", ("Bearer a", "Bearer b")), ("mcp-session-id", ("a", "b")), ("content-type", ("application/json", "text/plain"))):
        headers = [(k, v) for k, v in HEADERS.items() if k != name]
        r = await post(url, INIT, [*headers, ("host", real), *((name, v) for v in values)])
        refused_400(r, name.title())
    assert not recorder_server.recorded(record)


async def test_a_dynamic_read_of_the_headers_makes_every_repeated_header_refused(tmp_path, hopline_serve, recorded):
    url, real, record = serve(tmp_path, hopline_serve, recorded, rules=["size(http.headers) < 40"])
    r = await post(url, INIT, [*HEADERS.items(), ("host", real), ("accept-language", "en"), ("accept-language", "fr")])
    refused_400(r, "Accept-Language")
    assert not recorder_server.recorded(record)


async def test_a_handshake_era_request_cannot_pass_a_method_rule_without_a_trustworthy_method(tmp_path, hopline_serve, recorded):
    url, real, record = serve(tmp_path, hopline_serve, recorded, rules=NO_CALLS)
    no_header = await post(url, LEGACY_CALL, [*HEADERS.items(), ("host", real)])
    lying = await post(url, LEGACY_CALL, [*HEADERS.items(), ("host", real), ("mcp-protocol-version", "2025-11-25"), ("mcp-method", "ping")])
    unversioned = await post(url, LEGACY_CALL, [*HEADERS.items(), ("host", real), ("mcp-method", "ping")])
    init = await post(url, INIT, [*HEADERS.items(), ("host", real)])  # fail closed: even initialize, whose method is unread
    for r in (no_header, lying, unversioned, init):
        assert r.status_code == 403 and r.json()["id"] is None, r.text
        assert "transparent.unknown_method" in r.json()["error"]["message"]
    assert not recorder_server.recorded(record)


async def test_a_2026_request_must_carry_consistent_mirror_headers(tmp_path, hopline_serve, recorded):
    url, real, record = serve(tmp_path, hopline_serve, recorded, rules=NO_CALLS)
    missing = await post(url, MODERN_CALL, [*MODERN.items(), ("host", real)])
    nameless = await post(url, MODERN_CALL, [*MODERN.items(), ("host", real), ("mcp-method", "tools/call")])
    refused_400(missing, "Mcp-Method")
    refused_400(nameless, "Mcp-Name")
    denied = await post(url, MODERN_CALL, [*MODERN.items(), ("host", real), ("mcp-method", "tools/call"), ("mcp-name", "echo")])
    assert denied.status_code == 403 and denied.json()["error"]["message"] == "refused by the intermediary's policy"
    assert not recorder_server.recorded(record)


async def test_reading_the_body_for_the_method_judges_the_envelope_and_forwards_it_byte_for_byte(tmp_path, hopline_serve, recorded):
    url, real, record = serve(tmp_path, hopline_serve, recorded, rules=NO_CALLS, unknown_method="read_body", max_method_body=4096)
    base = [*HEADERS.items(), ("host", real)]
    call = await post(url, LEGACY_CALL, [*base, ("mcp-method", "ping")])  # the body, not the unvalidated header, is judged
    twice = await post(url, b'{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/call","params":{"name":"echo"}}', base)
    batch = await post(url, orjson.dumps([LEGACY_CALL]), base)
    big = await post(url, {**INIT, "params": {**INIT["params"], "pad": "x" * 5000}}, base)
    for r in (call, twice, batch, big):
        assert r.status_code == 403 and r.json()["id"] is None, r.text
    assert not recorder_server.recorded(record)
    odd = b'{"jsonrpc":"2.0","id":1,  "method":"initialize", "params":{"protocolVersion":"2025-11-25","capabilities":{},'
    odd += b'"clientInfo":{"name":"t","version":"1"}}}'
    init = await post(url, odd, base)
    assert init.status_code == 200, init.text
    assert [r["body"].encode() for r in recorder_server.recorded(record)] == [odd]


@pytest.mark.parametrize("mode", MODES)
async def test_normal_traffic_of_both_eras_still_passes_a_method_rule(tmp_path, hopline_serve, recorded, mode):
    stance = {"unknown_method": "read_body"} if mode == "legacy" else {}  # the handshake era needs its method read from the body
    url, real, record = serve(tmp_path, hopline_serve, recorded, rules=['http.mcp_method != "prompts/get"'], **stance)
    c, http = intercepted(url.removesuffix("/mcp"), real, mode)
    try:
        async with c:
            assert "echo" in {t.name for t in (await bounded(c.list_tools())).tools}
            assert text_of(await bounded(c.call_tool("echo", {"text": "ok"}))) == "ok"
    finally:
        await http.aclose()
    methods = {orjson.loads(r["body"]).get("method") for r in recorder_server.recorded(record) if r["body"]}
    assert {"tools/list", "tools/call"} <= methods


async def test_at_level_2_the_body_read_for_the_method_still_reaches_the_gateway(tmp_path, hopline_serve, recorded):
    url, real, record = serve(tmp_path, hopline_serve, recorded, level=2, rules=NO_CALLS, unknown_method="read_body")
    init = await post(url, INIT, [*HEADERS.items(), ("host", real)])
    call = await post(url, LEGACY_CALL, [*HEADERS.items(), ("host", real), ("mcp-session-id", init.headers.get("mcp-session-id", "x"))])
    assert init.status_code == 200 and init.json()["result"]["serverInfo"]["name"] == "sdk-test-server", init.text  # replayed to the gateway
    assert call.status_code == 403 and not any(r["body"] and orjson.loads(r["body"]).get("method") == "tools/call" for r in recorder_server.recorded(record))


@pytest.mark.parametrize(
    ("rules", "headers", "method"),
    [
        (['http.headers["X-Team"] == "ops"'], {"x-team"}, False),
        (["'x-a' in http.headers && http.headers.authorization != ''", 'http.path == "/mcp"'], {"x-a", "authorization"}, False),
        (['http.mcp_method != "tools/call"'], set(), True),
        (["size(http.headers) < 9"], None, True),
        (['http["headers"]["x"] == "y"'], None, True),
        (['http.headers["x\\x2d"] == "y"'], None, True),  # an escape in the name: not read statically, so everything counts
    ],
)
def test_the_headers_and_method_a_rule_reads_are_found_conservatively(rules, headers, method):
    from hopline.layers.policy.transparent import relevance

    found = relevance(rules)
    assert (None if found.headers is None else set(found.headers), found.method) == (headers, method)


@pytest.mark.parametrize(
    ("body", "method"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', "tools/list"),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', ""),  # a response: no method
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}', None),
        (b'{"jsonrpc":"2.0","id":1,"m\\u0065thod":"ping","method":"tools/call"}', None),  # the same key, escaped
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', None),
        (b'{"method": 3}', None),
        (b"\xff{}", None),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"method":"a","method":"b"}}', "tools/call"),  # nested repeats do not matter
    ],
)
def test_the_envelope_method_is_read_only_when_unambiguous(body, method):
    from hopline.layers.policy.transparent import body_method

    assert body_method(body) == method


def test_check_says_which_repeated_headers_are_refused_and_what_happens_to_unknown_methods(tmp_path, capsys):
    import argparse

    from hopline.commands import check as check_cli

    rules = [*NO_CALLS, 'http.headers["x-team"] == "ops"']
    path = write(tmp_path, {"destination": "header", "destinations": {"a:80": "http://127.0.0.1:1"}, "rules": rules})
    assert check_cli.run(argparse.Namespace(config=path)) == 0
    out = capsys.readouterr().out
    assert "repeated headers refused (400): authorization, content-length, content-type, host, mcp-method, mcp-name" in out
    assert "x-original-destination, x-team" in out and "is refused (403, fail closed) (unknown_method: refuse)" in out
