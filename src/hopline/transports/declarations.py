"""Reading other intermediaries' conformance declarations over HTTP (draft §4.2).

An intermediary publishes its declaration at the well-known path at its origin
(:data:`~hopline.transports.app.DECLARATION_PATH`, the path this hopline serves its own
at). Only the document is read here: what it says is the caller's to judge
(compose/federation.py). No credentials go with the request, redirects are not
followed, and a body over :data:`MAX_DECLARATION` is not read further.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from hopline.transports.app import DECLARATION_PATH

MAX_DECLARATION = 256 * 1024


@dataclass(frozen=True)
class Unread:
    """Why a declaration could not be read. The reason never holds the URL (it may hold a secret)."""

    reason: str


def declaration_url(url: str) -> str:
    """The declaration of the intermediary at ``url``: the well-known path at its origin (no userinfo, no query)."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{DECLARATION_PATH}"


async def fetch_declaration(http: httpx.AsyncClient, url: str) -> Any:
    """The parsed declaration of the intermediary at ``url``, or :class:`Unread`."""
    try:
        async with http.stream("GET", declaration_url(url), headers={"accept": "application/json"}) as r:
            if r.status_code != 200:
                return Unread(f"no declaration (HTTP {r.status_code})")
            body = b""
            async for chunk in r.aiter_bytes():
                body += chunk
                if len(body) > MAX_DECLARATION:
                    return Unread("its declaration is too large")
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return Unread("its declaration is not JSON")
    except httpx.HTTPError as exc:  # the URL may hold a secret: name the error's type only
        return Unread(f"unreachable ({type(exc).__name__})")


async def fetch_declarations(urls: Mapping[str, str], *, timeout: float = 5.0) -> dict[str, Any]:
    """Every ``id → url``'s declaration (parsed, or :class:`Unread`), fetched at once."""
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as http:
        fetched = await asyncio.gather(*(fetch_declaration(http, url) for url in urls.values()))
    return dict(zip(urls, fetched))
