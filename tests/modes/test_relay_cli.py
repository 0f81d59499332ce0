"""``hopline relay`` arguments and secrets, and its HTTP listener's front door.

The README's forms (a URL with options before or after it, ``-- CMD ARGS…``) resolve to
the right target; header values, URL userinfo and query strings appear in no startup line,
no log line and no response, even when the upstream is dead; the front-door flags reach
the listener (slow and silent sockets are cut, a legacy SSE stream is not).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess

import httpx
import orjson
import pytest

from hopline.cli import build_parser
from tests.conftest import PY, ROOT
from tests.peers import start_sdk_http, stop

SECRET = "S3CRET-d00r"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
MODERN = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}}
BOUND = 15.0


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("argv,target,headers", [
    (["--port", "1", "http://h/mcp", "-H", "Authorization: Bearer x"], ["http://h/mcp"], ["Authorization: Bearer x"]),
    (["-H", "Authorization: Bearer x", "http://h/mcp", "--port", "1"], ["http://h/mcp"], ["Authorization: Bearer x"]),
    (["--port", "1", "--", "server", "-H", "mine", "--", "--port", "2"], ["server", "-H", "mine", "--", "--port", "2"], []),
    (["--port", "1"], [], []),
])
def test_the_documented_target_forms_parse(argv, target, headers):
    args = build_parser().parse_args(["relay", *argv])
    assert args.target == target and args.header == headers and args.port == 1


@pytest.fixture
def sdk_http():
    proc, url = start_sdk_http()
    yield url
    stop(proc)


@pytest.mark.parametrize("order", ["url-first", "url-last"])
async def test_a_url_target_with_a_header_is_relayed_and_the_header_value_is_not_printed(hopline_relay, sdk_http, order):
    flags = ["-H", f"X-Token: {SECRET}"]
    relay = hopline_relay(sdk_http + "?k=" + SECRET, *flags) if order == "url-first" else hopline_relay(*flags, sdk_http + "?k=" + SECRET)
    async with httpx.AsyncClient(timeout=BOUND) as http:
        r = await http.post(relay.url, content=orjson.dumps(INIT), headers=HEADERS)
    assert r.status_code == 200 and "mcp-session-id" in r.headers  # the SDK server answered: the URL was a URL, not a command
    banner = next(line for line in relay.stderr if "serving" in line)
    assert f"serving '{sdk_http}' with header X-Token at" in banner and SECRET not in "".join(relay.stderr)


@pytest.mark.parametrize("path", ["mcp", "sse"])
async def test_a_dead_upstream_leaks_no_secret(hopline_relay, path):
    url = f"http://user:{SECRET}@127.0.0.1:{dead_port()}/{path}?token={SECRET}"
    relay = hopline_relay(url, "-H", f"Authorization: Bearer {SECRET}")
    async with httpx.AsyncClient(timeout=BOUND) as http:
        answers = [await http.post(relay.url, content=orjson.dumps(INIT), headers=HEADERS),
                   await http.post(relay.url, content=orjson.dumps(MODERN), headers={**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"})]
    relay.stop()
    for r in answers:
        assert r.json()["error"]["code"] == -31001 and "127.0.0.1" in r.text and SECRET not in r.text
    assert any("backend unreachable" in line for line in relay.stderr) and not any(SECRET in line for line in relay.stderr)


async def test_a_command_targets_credentials_are_not_printed(hopline_relay):
    # the mcp-remote pattern: the credential is in the command's arguments (the demo ignores them)
    ignores = "import runpy, sys; sys.argv = ['demo']; runpy.run_module('hopline.demo', run_name='__main__')"
    relay = hopline_relay("--", PY, "-c", ignores, "--header", f"Authorization: Bearer {SECRET}", "--auth", SECRET, f"API_TOKEN={SECRET}")
    async with httpx.AsyncClient(timeout=BOUND) as http:
        r = await http.post(relay.url, content=orjson.dumps(INIT), headers=HEADERS)
    assert r.status_code == 200 and SECRET not in r.text
    banner = next(line for line in relay.stderr if "serving" in line)
    assert "--header Authorization: <redacted> --auth <redacted> API_TOKEN=<redacted>" in banner
    assert not any(SECRET in line for line in relay.stderr)


def test_relay_stdio_to_a_dead_upstream_logs_no_secret():
    url = f"http://user:{SECRET}@127.0.0.1:{dead_port()}/mcp?token={SECRET}"
    argv = [PY, "-m", "hopline", "relay", "--stdio", url, "-H", f"Authorization: Bearer {SECRET}"]
    done = subprocess.run(argv, input=orjson.dumps(INIT) + b"\n", capture_output=True, timeout=BOUND, cwd=ROOT)
    assert b"-31001" in done.stdout and SECRET.encode() not in done.stdout
    assert b"backend unreachable" in done.stderr and SECRET.encode() not in done.stderr


@pytest.mark.parametrize("target,said", [
    (["htp://127.0.0.1:9/mcp?token=" + SECRET], "'htp://127.0.0.1:9/mcp' is no URL hopline can relay to (scheme 'htp'): a remote target starts with http:// or https://, e.g. hopline relay http://127.0.0.1:9/mcp"),
    (["ws://h.example/mcp"], "e.g. hopline relay http://h.example/mcp"),
    (["localhost:8080/mcp"], "'localhost:8080/mcp' is neither a command nor a URL: a remote target starts with http:// or https://, e.g. hopline relay http://localhost:8080/mcp"),
    (["127.0.0.1/mcp"], "e.g. hopline relay http://127.0.0.1/mcp"),
    (["--", "hopline-no-such-server"], "command 'hopline-no-such-server' not found: it is not on PATH. Install it, give its full path, or, for a remote server, a URL starting with http:// or https://"),
    (["--", "./no/such/server.js", "--port", "1"], "command './no/such/server.js' not found: there is no executable file at that path"),
    (["npx -y @modelcontextprotocol/server-everything"], "given as one word ('npx -y @modelcontextprotocol/server-everything'): give them as separate words after --, e.g. hopline relay -- npx -y @modelcontextprotocol/server-everything"),
    (["--stdio", "htp://h.example/mcp"], "e.g. hopline relay http://h.example/mcp"),
])
def test_a_target_that_cannot_work_is_refused_at_start_with_what_to_write(target, said):
    done = subprocess.run([PY, "-m", "hopline", "relay", "--port", "0", *target], capture_output=True, text=True, timeout=BOUND, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert said in done.stderr and "serving" not in done.stderr and "Traceback" not in done.stderr and SECRET not in done.stderr


async def test_a_url_target_that_does_not_answer_is_warned_about_and_relayed(hopline_relay, sdk_http):
    url = f"http://127.0.0.1:{dead_port()}/mcp"
    relay = hopline_relay(url + "?token=" + SECRET)
    warning = next(line for line in relay.stderr if "warning" in line)
    assert f"hopline relay: warning: {url} does not answer (Connection refused); relaying anyway" in warning
    assert any("serving" in line for line in relay.stderr) and not any(SECRET in line for line in relay.stderr)
    # one that answers, and a command that is there, start with no warning
    for relay in (hopline_relay(sdk_http), hopline_relay("--", PY, "-m", "hopline.demo")):
        async with httpx.AsyncClient(timeout=BOUND) as http:
            r = await http.post(relay.url, content=orjson.dumps(INIT), headers=HEADERS)
        assert r.status_code == 200 and not any("warning" in line for line in relay.stderr)


async def until_eof(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), BOUND):
            chunks.append(chunk)
    return b"".join(chunks)


async def test_the_front_door_flags_reach_the_relay_listener_and_spare_its_sse_stream(hopline_relay):
    relay = hopline_relay("--idle-timeout", "0.3", "--header-timeout", "0.3", "--body-timeout", "0.3")
    port = int(relay.base.rsplit(":", 1)[1])
    sse_reader, sse_writer = await asyncio.open_connection("127.0.0.1", port)
    sse_writer.write(b"GET /sse HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n\r\n")
    head = await asyncio.wait_for(sse_reader.readuntil(b"\r\n\r\n"), BOUND)
    endpoint = (await asyncio.wait_for(sse_reader.readuntil(b"\n\n"), BOUND)).split(b"data: ")[1].split(b"\n")[0].decode()
    assert head.startswith(b"HTTP/1.1 200 ") and endpoint.startswith("/messages")
    # Three deadlines in turn, each cutting its socket, while the SSE stream stays open.
    silent, _ = await asyncio.open_connection("127.0.0.1", port)
    assert await until_eof(silent) == b""
    slow, slow_writer = await asyncio.open_connection("127.0.0.1", port)
    slow_writer.write(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")  # the head never completes
    assert (await until_eof(slow)).startswith(b"HTTP/1.1 408 ")
    stalled, stalled_writer = await asyncio.open_connection("127.0.0.1", port)
    stalled_writer.write(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{")
    assert (await until_eof(stalled)).startswith(b"HTTP/1.1 408 ")
    async with httpx.AsyncClient(timeout=BOUND) as http:
        r = await http.post(relay.base + endpoint, content=orjson.dumps(INIT), headers=HEADERS)
    assert r.status_code == 202
    answer = await asyncio.wait_for(sse_reader.readuntil(b'"id":1'), BOUND) + await asyncio.wait_for(sse_reader.readuntil(b"\n\n"), BOUND)
    assert b"protocolVersion" in answer  # the initialize result came on the stream that outlived every deadline
    sse_writer.close()
