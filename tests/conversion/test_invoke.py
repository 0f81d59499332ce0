"""HTTP responses → tool results, and one call through httpx (a mock transport)."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from hopline.conversion.invoke import MAX_ERROR_TEXT, MAX_RESPONSE, Api, answer
from hopline.conversion.operations import convert

DOC = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
    "/things/{id}": {"put": {"operationId": "put", "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                                                                  {"name": "X-Mode", "in": "header", "schema": {"type": "string"}},
                                                                  {"name": "X-Key", "in": "header", "schema": {"type": "string"}}],
                             "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"v": {"type": "integer"}}}}}},
                             "responses": {"200": {"description": "ok"}}}}}}
OP = convert(DOC).operations[0]


def text(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


# -- answer(): pure ---------------------------------------------------------------------------
def test_a_json_object_is_structured_content_and_text():
    result = answer(OP, 200, "OK", "application/json; charset=utf-8", b'{"a": 1}')
    assert result == {"content": [{"type": "text", "text": '{"a":1}'}], "structuredContent": {"a": 1}}


def test_other_json_values_are_wrapped_in_result():
    assert answer(OP, 200, "OK", "application/problem+json", b"[1, 2]")["structuredContent"] == {"result": [1, 2]}
    assert answer(OP, 201, "Created", "application/json", b"3")["structuredContent"] == {"result": 3}


def test_a_body_that_claims_json_but_is_not_is_an_error():
    result = answer(OP, 200, "OK", "application/json", b"<html>")
    assert result["isError"] and "not valid JSON" in text(result)


def test_without_a_content_type_json_is_still_recognised_and_text_is_text():
    assert answer(OP, 200, "OK", "", b'{"a": 1}')["structuredContent"] == {"a": 1}
    assert answer(OP, 200, "OK", "", b"plain words") == {"content": [{"type": "text", "text": "plain words"}]}


def test_text_images_binary_and_empty_bodies():
    assert text(answer(OP, 200, "OK", "text/csv", b"a,b\n1,2")) == "a,b\n1,2"
    image = answer(OP, 200, "OK", "image/png", b"\x89PNG")["content"][0]
    assert image == {"type": "image", "data": base64.b64encode(b"\x89PNG").decode(), "mimeType": "image/png"}
    assert text(answer(OP, 200, "OK", "application/octet-stream", b"\0\1\2")) == "HTTP 200: 3 bytes of application/octet-stream (binary, not shown)"
    assert text(answer(OP, 204, "No Content", "", b"")) == "HTTP 204 (no content)"


def test_error_statuses_carry_the_status_and_a_truncated_body():
    result = answer(OP, 503, "Service Unavailable", "text/plain", b"x" * (MAX_ERROR_TEXT + 10))
    assert result["isError"] and text(result).startswith("PUT /things/{id} failed: HTTP 503 Service Unavailable\n")
    assert text(result).endswith(f"... ({MAX_ERROR_TEXT + 10} bytes in all)") and text(result).count("x") == MAX_ERROR_TEXT
    assert answer(OP, 302, "Found", "", b"")["isError"]  # redirects are not followed


# -- Api.call(): through httpx ------------------------------------------------------------------------
def api(handler: Any, **kw: Any) -> Api:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return Api("things", "https://api.example/v1", {"X-Key": "configured", **kw.pop("headers", {})}, 2.0, client)


async def test_the_request_carries_the_path_headers_and_body():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    result = await api(handler).call(OP, {"id": "a/b", "X-Mode": "fast", "X-Key": "from-the-model", "v": 7})
    assert result["structuredContent"] == {"ok": True}
    request = seen[0]
    assert request.method == "PUT" and request.url.raw_path == b"/v1/things/a%2Fb"
    assert request.headers["X-Mode"] == "fast" and request.headers["X-Key"] == "configured"  # configured headers win
    assert request.headers["Content-Type"] == "application/json" and request.content == b'{"v":7}'


async def test_bad_arguments_never_reach_the_api():
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request expected")

    assert "missing required argument: id" in text(await api(handler).call(OP, {}))
    result = await api(handler).call(OP, {"id": "1", "X-Mode": "a\r\nInjected: yes"})
    assert result["isError"] and "line breaks" in text(result)


@pytest.mark.parametrize("error", [httpx.ConnectError("connect to https://user:pw@api.example/v1 failed"), httpx.ReadTimeout("timed out")])
async def test_network_failures_name_the_backend_and_the_error_type_not_the_url(error):
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    result = await api(handler).call(OP, {"id": "1"})
    assert result["isError"] and "backend things" in text(result) and type(error).__name__ in text(result)
    assert "api.example" not in text(result) and "pw" not in text(result)


async def test_an_oversized_answer_is_an_error():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"x" * (MAX_RESPONSE + 1), headers={"content-type": "text/plain"})

    result = await api(handler).call(OP, {"id": "1"})
    assert result["isError"] and "larger than" in text(result)
