"""One converted tool call: arguments → HTTP request → ``CallToolResult`` (the I/O edge).

In: an :class:`~hopline.conversion.operations.Operation`, the call's arguments, and the
backend's settings (base URL, configured headers, timeout, one shared
``httpx.AsyncClient``). Out: a ``CallToolResult`` dict. Never raises for anything the
API, the network or the caller did; only cancellation propagates.

Answers
- 2xx with a JSON body: ``structuredContent`` (the value if it is an object, else
  ``{"result": value}``) and the JSON as a text block. A body that claims JSON but is not
  is an ``isError`` result. Other text bodies come back as text, images as an image
  block, other binary bodies as a one-line description; an empty body as
  ``HTTP <status> (no content)``.
- 3xx/4xx/5xx: ``isError`` with the status and the first :data:`MAX_ERROR_TEXT` bytes of
  the body. Redirects are not followed (the configured headers must not reach another
  host).
- A body larger than :data:`MAX_RESPONSE` is not read further: ``isError``.
- Network failures and timeouts: ``isError`` naming the backend and the error type,
  never the URL (a URL may carry a secret), as ``transports/streamable_http_client.py``
  does for MCP backends.
- Bad arguments (:mod:`hopline.conversion.arguments`): ``isError`` with the reason.

Headers: the operation's header parameters first, then the backend's configured
``headers`` (which win). Nothing from the MCP client's request (its token included)
is ever forwarded.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from hopline.conversion.arguments import build, problem
from hopline.conversion.operations import Operation

log = logging.getLogger("hopline.conversion")

MAX_RESPONSE = 1024 * 1024
MAX_ERROR_TEXT = 4096
ACCEPT = "application/json, text/plain;q=0.9, */*;q=0.5"


def error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@dataclass
class Api:
    """Where one backend's converted calls go."""

    backend: str
    base_url: str
    headers: dict[str, str]
    timeout: float
    client: httpx.AsyncClient

    async def call(self, operation: Operation, arguments: dict[str, Any]) -> dict[str, Any]:
        found = problem(operation, arguments)
        if found:
            return error(f"{operation.tool}: {found}")
        request = build(operation, arguments)
        headers = {"Accept": ACCEPT, **request.headers, **self.headers}
        bad = next((k for k, v in request.headers.items() if any(c in v for c in "\r\n\0")), None)
        if bad is not None:
            return error(f"{operation.tool}: the value for header {bad} must not contain line breaks")
        content: bytes | None = None
        if request.has_json:
            content = orjson.dumps(request.json)
            headers["Content-Type"] = operation.body.media_type if operation.body else "application/json"
        try:
            async with self.client.stream(
                request.method,
                self.base_url + request.path,
                params=request.query or None,
                headers=headers,
                content=content,
                data=request.form,
                timeout=self.timeout,
            ) as response:
                body = await _read_capped(response)
                if body is None:
                    return error(
                        f"{operation.describe()}: the API's answer is larger than {MAX_RESPONSE // 1024} KiB; not read"
                    )
                return answer(
                    operation,
                    response.status_code,
                    response.reason_phrase,
                    response.headers.get("content-type", ""),
                    body,
                )
        except httpx.TimeoutException as exc:
            log.warning(
                "backend %s: %s timed out after %ss (%s)",
                self.backend,
                operation.describe(),
                self.timeout,
                type(exc).__name__,
            )
            return error(
                f"backend {self.backend}: the API did not answer {operation.describe()} "
                f"within {self.timeout:g} s ({type(exc).__name__})"
            )
        except httpx.HTTPError as exc:
            log.warning("backend %s: %s failed: %s", self.backend, operation.describe(), exc)
            return error(f"backend {self.backend}: the API could not be reached ({type(exc).__name__})")


async def _read_capped(response: httpx.Response) -> bytes | None:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_RESPONSE:
        return None
    out = bytearray()
    async for chunk in response.aiter_bytes():
        out += chunk
        if len(out) > MAX_RESPONSE:
            return None
    return bytes(out)


def _is_json(content_type: str) -> bool:
    base = content_type.split(";", 1)[0].strip().lower()
    return base == "application/json" or base.endswith("+json")


def _is_text(content_type: str) -> bool:
    base = content_type.split(";", 1)[0].strip().lower()
    return (
        base.startswith("text/")
        or base.endswith(("+xml", "/xml", "/yaml", "/x-yaml", "/javascript", "/csv"))
        or base == "application/x-www-form-urlencoded"
    )


def answer(operation: Operation, status: int, reason: str, content_type: str, body: bytes) -> dict[str, Any]:
    """The tool result for one HTTP response (pure; tested without a network)."""
    if not 200 <= status < 300:
        shown = body[:MAX_ERROR_TEXT].decode("utf-8", "replace")
        more = f" ... ({len(body)} bytes in all)" if len(body) > MAX_ERROR_TEXT else ""
        return error(
            f"{operation.describe()} failed: HTTP {status} {reason}".rstrip() + (f"\n{shown}{more}" if shown else "")
        )
    if not body:
        return _text(f"HTTP {status} (no content)")
    if _is_json(content_type) or not content_type:
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            if content_type:
                return error(
                    f"{operation.describe()}: the API answered HTTP {status} with a body that is not valid JSON: "
                    f"{body[:200].decode('utf-8', 'replace')}"
                )
        else:
            return {
                "content": [{"type": "text", "text": orjson.dumps(value).decode()}],
                "structuredContent": value if isinstance(value, dict) else {"result": value},
            }
    base = content_type.split(";", 1)[0].strip().lower()
    if base.startswith("image/"):
        return {"content": [{"type": "image", "data": base64.b64encode(body).decode(), "mimeType": base}]}
    if _is_text(content_type) or not content_type:
        return _text(body.decode("utf-8", "replace"))
    return _text(f"HTTP {status}: {len(body)} bytes of {base} (binary, not shown)")
