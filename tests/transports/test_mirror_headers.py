"""2026-07-28 mirror headers at hopline's two HTTP ends (SEP-2243, issue 18 item 4).

- Codec: which arguments a tool's inputSchema mirrors (``x-mcp-header``), how their headers are
  written, and when a request's ``Mcp-Param-*`` headers do not mirror its arguments.
- Through ``hopline relay`` in front of tests/servers/conformance_server.py (the official SDK):
  surrounding whitespace in ``Mcp-Name`` is accepted (RFC 9110 §5.5), the backend gets the
  ``Mcp-Param-*`` headers it requires, and a header that contradicts the body is refused with
  400 / -32020 by hopline itself once it has seen the tool listed.
"""

from __future__ import annotations

import httpx
import pytest

from hopline.header_codec import (
    ParamMaps,
    encode_header_value,
    param_headers,
    param_map,
    param_problem,
    param_syntax_problem,
)
from tests.conftest import SERVERS
from tests.peers import start_script, stop

pytestmark = pytest.mark.timeout(60)

SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "deep": {"type": "object", "properties": {"flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
        "other": {"type": "string"},
    },
}


def test_the_map_follows_properties_chains_only():
    found = param_map(SCHEMA)
    assert found == {
        "mcp-param-region": ("Mcp-Param-Region", ("region",), "string"),
        "mcp-param-count": ("Mcp-Param-Count", ("count",), "integer"),
        "mcp-param-flag": ("Mcp-Param-Flag", ("deep", "flag"), "boolean"),
    }
    assert param_map({"type": "object", "properties": {"a": {"type": "string"}}}) == {}
    assert param_map(None) == {}


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"n": {"type": "number", "x-mcp-header": "N"}}},  # number: not mirrorable
        {"properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}},
        {"properties": {"a": {"type": "string", "x-mcp-header": "not a token"}}},
        {"items": {"type": "string", "x-mcp-header": "A"}},  # off the properties chain
        {"type": "string", "x-mcp-header": "Root"},
    ],
)
def test_an_invalid_annotation_makes_the_tool_mirror_nothing(schema):
    assert param_map(schema) is None
    maps = ParamMaps()
    maps.learn({"tools": [{"name": "t", "inputSchema": schema}]})
    assert maps.get("t") is None


def test_headers_from_arguments():
    found = param_map(SCHEMA)
    assert param_headers(found, {"region": "eu-west", "count": 3, "deep": {"flag": False}}) == {
        "mcp-param-region": "eu-west",
        "mcp-param-count": "3",
        "mcp-param-flag": "false",
    }
    assert param_headers(found, {"region": "  ünïcode ", "count": None}) == {
        "mcp-param-region": encode_header_value("  ünïcode "),
    }
    assert param_headers(found, {}) == {}


@pytest.mark.parametrize(
    "arguments, headers, problem",
    [
        ({"region": "eu"}, {b"mcp-param-region": "eu"}, None),
        ({"region": "eu"}, {b"mcp-param-region": "  eu \t"}, None),  # OWS is not part of a value
        ({"region": "Hello"}, {b"mcp-param-region": "=?base64?SGVsbG8=?="}, None),
        ({"count": 42}, {b"mcp-param-count": "42.0"}, None),  # integers compare numerically
        ({"region": "eu"}, {}, "Mcp-Param-Region header is missing"),
        ({}, {b"mcp-param-region": "eu"}, "Mcp-Param-Region header is present but the argument"),
        ({"region": "eu"}, {b"mcp-param-region": "us"}, "Mcp-Param-Region header does not match"),
        ({"count": 42}, {b"mcp-param-count": "42.5"}, "Mcp-Param-Count header does not match"),
        ({"region": "eu"}, {b"mcp-param-region": "=?base64?!!?="}, "Mcp-Param-Region header does not match"),
    ],
)
def test_param_problem(arguments, headers, problem):
    got = param_problem(param_map(SCHEMA), arguments, headers)
    assert (got is None) if problem is None else (got is not None and got.startswith(problem)), got


def test_syntax_problems_whatever_the_tool():
    assert param_syntax_problem({b"mcp-param-x": "fine value"}) is None
    assert "visible ASCII" in param_syntax_problem({b"mcp-param-x": "caf\xe9"})
    assert "malformed base64" in param_syntax_problem({b"mcp-param-x": "=?base64?***?="})
    # found among other headers, first, last or between; a name merely containing it is no Mcp-Param
    others = {b"host": "caf\xe9", b"x-mcp-param-y": "caf\xe9"}
    assert param_syntax_problem(others) is None
    assert "visible ASCII" in param_syntax_problem({**others, b"mcp-param-x": "caf\xe9"})
    assert "visible ASCII" in param_syntax_problem({b"mcp-param-x": "caf\xe9", **others})
    assert "visible ASCII" in param_syntax_problem({b"host": "a", b"mcp-param-x": "caf\xe9", b"accept": "b"})


def test_the_learned_maps_are_bounded():
    maps = ParamMaps(limit=2)
    for name in ("a", "b", "c"):
        maps.learn({"tools": [{"name": name, "inputSchema": SCHEMA}]})
    assert list(maps.tools) == ["b", "c"]
    maps.learn({"tools": [{"name": "c", "inputSchema": {"type": "object"}}]})  # relisted without annotations
    assert maps.get("c") is None


# -- through the relay, against the official SDK ------------------------------------------------
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def relay():
    proc, port = start_script(str(SERVERS / "conformance_server.py"))
    from tests.conftest import _launcher, _stop_all

    launch, started = _launcher("relay")
    try:
        yield launch(f"http://127.0.0.1:{port}/mcp").url
    finally:
        _stop_all(started)
        stop(proc)


def post(url: str, method: str, params: dict, **headers: str) -> httpx.Response:
    head = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        **{k.replace("_", "-"): v for k, v in headers.items()},
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": META}}
    return httpx.post(url, json=body, headers=head, timeout=20)


def call(url: str, region: str | None, **headers: str) -> httpx.Response:
    arguments = {} if region is None else {"region": region}
    return post(url, "tools/call", {"name": "test_x_mcp_header", "arguments": arguments}, **headers)


def text(resp: httpx.Response) -> str:
    import json

    body = resp.text
    if body.startswith("event:") or body.startswith("data:") or "\ndata:" in body:
        body = [line[5:] for line in body.splitlines() if line.startswith("data:")][-1]
    answer = json.loads(body)
    return (
        answer["result"]["content"][0]["text"]
        if "result" in answer
        else f"error {answer['error']['code']}: {answer['error']['message']}"
    )


def test_whitespace_around_mirrored_values_is_accepted(relay):
    """As the suite sends it (Node's http.request keeps the value as given; httpx refuses to)."""
    import http.client
    import json
    from urllib.parse import urlsplit

    url = urlsplit(relay)
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}, "_meta": META},
    }
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=20)
    try:
        conn.request(
            "POST",
            url.path,
            json.dumps(body),
            {
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28 ",
                "mcp-method": " tools/call",
                "mcp-name": "  test_simple_text \t",
            },
        )
        resp = conn.getresponse()
        status, data = resp.status, resp.read().decode()
    finally:
        conn.close()
    assert status == 200, data
    assert "This is a simple text response for testing." in data


def test_the_backend_gets_its_mcp_param_headers(relay):
    assert post(relay, "tools/list", {}).status_code == 200  # hopline learns the tool's x-mcp-header map
    resp = call(relay, "eu-west", mcp_name="test_x_mcp_header", mcp_param_region="eu-west")
    assert (resp.status_code, text(resp)) == (200, "region=eu-west")
    # A value that must be encoded: the client sends the sentinel, the backend decodes what hopline sends.
    resp = call(relay, " ünï ", mcp_name="test_x_mcp_header", mcp_param_region=encode_header_value(" ünï "))
    assert (resp.status_code, text(resp)) == (200, "region= ünï ")


@pytest.mark.parametrize(
    "region, header, problem",
    [
        ("eu-west", "us-east", "Mcp-Param-Region header does not match the argument 'region'"),
        ("eu-west", None, "Mcp-Param-Region header is missing but the argument 'region' is present"),
        (None, "eu-west", "Mcp-Param-Region header is present but the argument 'region' is absent"),
        ("eu-west", "=?base64?not base64?=", "mcp-param-region header carries a malformed base64 value"),
    ],
)
def test_a_contradicting_header_is_refused_by_hopline(relay, region, header, problem):
    assert post(relay, "tools/list", {}).status_code == 200
    extra = {} if header is None else {"mcp_param_region": header}
    resp = call(relay, region, mcp_name="test_x_mcp_header", **extra)
    assert resp.status_code == 400
    assert text(resp) == f"error -32020: {problem}"  # hopline's words: the SDK says it otherwise


def test_a_duplicated_param_header_is_refused():
    from hopline.jsonrpc import ProtocolError
    from hopline.transports.http_util import Headers

    with pytest.raises(ProtocolError, match="duplicated mcp-param-region"):
        Headers([(b"mcp-param-region", b"a"), (b"mcp-param-region", b"b")])
