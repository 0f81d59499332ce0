"""The consent pages, mounted on hopline's HTTP listener (unauthenticated paths, like the sign-in server's):

- ``GET /connect/start?link=…``: a consent link (:meth:`Connections.consent`); spends it and redirects to the
  upstream authorization server, setting the cookie the callback checks. A bearer token, if the request carries
  one, must be the link's principal's.
- ``GET /connect/callback``: the upstream redirect URI; stores the tokens and says the call can be retried.
- ``GET /connect/client/<backend>.json``: the Client ID Metadata Document of that backend's client.

Every refusal is a 400 page with a reason that names no token; nothing here is cached by the browser.
"""

from __future__ import annotations

import html
import logging
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl

import orjson

from hopline.connect.manager import CALLBACK_PATH, METADATA_PATH, START_PATH, Connections, LinkRefused
from hopline.connect.oauth import OAuthFailure
from hopline.context import Principal

log = logging.getLogger("hopline.connect")
COOKIE = "hopline_connect"


class ConnectApp:
    def __init__(
        self,
        connections: Connections,
        authenticate: Callable[[list[tuple[bytes, bytes]]], Awaitable[Any]] | None = None,
    ) -> None:
        """``authenticate(raw_headers)``: the front door's check (a Principal, or a refusal) for a request that
        carries credentials."""
        self.connections = connections
        self.authenticate = authenticate
        self.secure = connections.public_url.startswith("https://")

    def handles(self, path: str) -> bool:
        return path in (START_PATH, CALLBACK_PATH) or path.startswith(METADATA_PATH)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope["path"]
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, 405, b"Method Not Allowed", "text/plain")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            if path.startswith(METADATA_PATH):
                backend = self.connections.backends.get(path[len(METADATA_PATH) :].removesuffix(".json"))
                if backend is None or not backend.spec.client_metadata_document:
                    await _send(send, 404, b"Not Found", "text/plain")
                    return
                await _send(send, 200, orjson.dumps(backend.client_metadata()), "application/json",
                            [(b"cache-control", b"max-age=300")])  # fmt: skip
            elif path == START_PATH:
                presented = await self._presented(headers, scope["headers"])
                url, cookie = await self.connections.start(query.get("link", ""), presented)
                flags = "; Secure" if self.secure else ""
                set_cookie = f"{COOKIE}={cookie}; Path=/connect; HttpOnly; SameSite=Lax; Max-Age=600{flags}"
                await _send(
                    send, 302, b"", "text/plain", [(b"location", url.encode()), (b"set-cookie", set_cookie.encode())]
                )
            else:
                backend_id, subject = await self.connections.finish(query, _cookie(headers.get("cookie", "")))
                await _page(send, 200, f"Connected to {backend_id}",
                            f"Your account at {backend_id} is connected for {subject}. Go back to your MCP client "
                            "and try the call again.")  # fmt: skip
        except (LinkRefused, OAuthFailure) as exc:
            log.info("connect: refused %s: %s", path, exc)
            await _page(send, 400, "Cannot connect", str(exc))
        except Exception:  # a bug or a malformed link: a page, never a traceback
            log.exception("connect: %s failed", path)
            await _page(send, 400, "Cannot connect", "this consent link or answer cannot be used")

    async def _presented(self, headers: dict[str, str], raw: list[tuple[bytes, bytes]]) -> Principal | None:
        if self.authenticate is None or "authorization" not in headers:
            return None
        decision = await self.authenticate(raw)
        if not isinstance(decision, Principal):
            raise LinkRefused("the credentials this request carries are not valid")
        return decision


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


async def _page(send: Any, status: int, title: str, text: str) -> None:
    body = (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
    ).encode()
    await _send(send, status, body, "text/html; charset=utf-8")


async def _send(send: Any, status: int, body: bytes, ctype: str, extra: list[tuple[bytes, bytes]] = ()) -> None:
    headers = [
        (b"content-type", ctype.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"referrer-policy", b"no-referrer"),
        *extra,
    ]
    if not any(k == b"cache-control" for k, _ in extra):
        headers.append((b"cache-control", b"no-store"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
