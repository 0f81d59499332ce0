"""Bad input at the Streamable HTTP / SSE listener, through a real relay process.

Each case from issue 2's list (and test-battery BAD-01/02/05/07/14/16/17/18) gets a
status code *and* a JSON-RPC-shaped body; no body ever carries a traceback.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from tests.conftest import _launcher, _stop_all


JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def no_traceback(resp: httpx.Response) -> None:
    assert "Traceback" not in resp.text and 'File "' not in resp.text


@pytest.fixture(scope="module")
def relay():
    # One relay for the whole module: every case is a request of its own (sessions it opens are its
    # own), so none sees another's state; starting a relay and a demo child per case was most of the time.
    launch, started = _launcher("relay")
    yield launch("--max-body", "2000")  # the built-in demo server
    _stop_all(started)


def post(relay, body, headers=None, **kw) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    r = httpx.post(relay.url, content=content, headers={**JSON, **(headers or {})}, timeout=10, **kw)
    no_traceback(r)
    return r


def open_session(relay) -> str:
    r = post(relay, INIT)
    assert r.status_code == 200, r.text
    return r.headers["mcp-session-id"]


@pytest.mark.parametrize("payload", [b"{not json", b'{"jsonrpc":"2.0","id":1,', b"", b"\xff\xfe", b'{"a":NaN}'])
def test_malformed_json_is_parse_error(relay, payload):
    r = post(relay, payload)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32700
    assert r.json()["id"] is None


def test_batch_is_invalid_request(relay):
    r = post(relay, [INIT, INIT])
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32600
    assert r.json()["id"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "x"},
        {"id": 1, "method": "x"},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "x"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "x"},
        {"jsonrpc": "2.0", "id": None, "method": "x"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1, "method": "x", "params": 3},
        {"jsonrpc": "2.0", "id": 1},
        "just a string",
    ],
)
def test_envelope_errors_are_invalid_request(relay, body):
    r = post(relay, body)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32600


def test_oversize_body_is_413(relay):
    r = post(relay, {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"pad": "a" * 5000}})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == -32600


def test_oversize_body_without_content_length_is_413(relay):
    def chunks():
        yield b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"pad":"'
        for _ in range(10):
            yield b"a" * 1000
        yield b'"}}'

    r = httpx.post(relay.url, content=chunks(), headers=JSON, timeout=10)
    assert r.status_code == 413


def test_unknown_session_is_404(relay):
    r = post(relay, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"mcp-session-id": "0" * 32})
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "Session not found"


def test_missing_session_is_400(relay):
    r = post(relay, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert r.status_code == 400
    assert "Missing session ID" in r.json()["error"]["message"]


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "https://127.0.0.1.evil.example", "file://", "http://[::1].evil.example"])
def test_bad_origin_is_403(relay, origin):
    r = post(relay, INIT, {"origin": origin})
    assert r.status_code == 403


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080"])
def test_loopback_origin_is_allowed(relay, origin):
    r = post(relay, INIT, {"origin": origin})
    assert r.status_code == 200


def test_duplicate_origin_is_refused(relay):
    r = httpx.post(relay.url, content=orjson.dumps(INIT), headers=[*JSON.items(), ("origin", "http://localhost"), ("origin", "http://localhost")], timeout=10)
    assert r.status_code == 403


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.nip.io"])
def test_foreign_host_is_403_dns_rebinding(relay, host):
    r = post(relay, INIT, {"host": host})
    assert r.status_code == 403


def test_bad_protocol_version_is_400(relay):
    sid = open_session(relay)
    r = post(relay, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"mcp-session-id": sid, "mcp-protocol-version": "1999-01-01"})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32022
    assert r.json()["error"]["data"]["requested"] == "1999-01-01"


def test_wrong_content_type_is_refused(relay):
    # 415 with -32600, as the official SDKs answer (the Python SDK's own code); it was a 400 with
    # -32603, which says "internal error" about the client's own mistake.
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "application/jsonp"):
        r = post(relay, INIT, {"content-type": ctype})
        assert r.status_code == 415, ctype
        assert r.json()["error"] == {
            "code": -32600,
            "message": "Unsupported Media Type: Content-Type must be application/json",
        }
    assert post(relay, INIT, {"content-type": "Application/JSON; charset=utf-8"}).status_code == 200


def _events(text: str) -> list[dict]:
    return [orjson.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


def test_accept_decides_between_json_and_sse(relay):
    # Both official SDKs require both types; hopline takes either, and answers in the one the
    # client named: a client that takes only SSE gets its lone answer as an SSE event (it got
    # JSON it had said it could not read), one that takes neither gets 406.
    r = post(relay, INIT, {"accept": "application/json"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    for accept in ("application/*", "*/*", "Application/JSON"):
        r = post(relay, INIT, {"accept": accept})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), accept
    r = post(relay, INIT, {"accept": "text/*"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    r = post(relay, INIT, {"accept": "text/event-stream"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    (answer,) = _events(r.text)
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == "2025-11-25"
    sid = r.headers["mcp-session-id"]
    post(relay, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"mcp-session-id": sid})
    r = post(relay, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"mcp-session-id": sid, "accept": "text/event-stream"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert [m["id"] for m in _events(r.text)] == [2]
    modern = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": MODERN_META}}
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list", "accept": "text/event-stream"}
    r = post(relay, modern, headers)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert [m["id"] for m in _events(r.text)] == [3]
    for accept in ("text/html", "image/png, text/plain"):
        r = post(relay, INIT, {"accept": accept})
        assert r.status_code == 406 and r.json()["error"]["code"] == -32600, accept


def test_modern_get_and_delete_are_405(relay):
    for method in ("GET", "DELETE"):
        r = httpx.request(method, relay.url, headers={"mcp-protocol-version": "2026-07-28", "accept": "text/event-stream"}, timeout=10)
        assert r.status_code == 405
        assert r.headers["allow"] == "POST"


def test_modern_header_mismatch_is_32020(relay):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}
    r = post(relay, body, {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020
    r = post(relay, body, {"mcp-protocol-version": "2026-07-28"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {}, "_meta": MODERN_META}}
    r = post(relay, call, {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "other"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020


def test_modern_request_without_meta_is_32602(relay):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    r = post(relay, body, {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32602


def test_get_without_session_and_unknown_session(relay):
    r = httpx.get(relay.url, headers={"accept": "text/event-stream"}, timeout=10)
    assert r.status_code == 400
    r = httpx.get(relay.url, headers={"accept": "text/event-stream", "mcp-session-id": "nope"}, timeout=10)
    assert r.status_code == 404


def test_delete_ends_session_then_404(relay):
    sid = open_session(relay)
    assert httpx.delete(relay.url, headers={"mcp-session-id": sid}, timeout=10).status_code == 200
    r = post(relay, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"mcp-session-id": sid})
    assert r.status_code == 404


def test_unknown_path_is_404(relay):
    assert httpx.get(relay.base + "/nothing-here", timeout=10).status_code == 404


def test_sse_post_to_unknown_session(relay):
    r = httpx.post(relay.base + "/messages?session_id=abc", content=orjson.dumps(INIT), headers=JSON, timeout=10)
    assert r.status_code == 404
    no_traceback(r)
