"""MCP request headers toward a backend: the 2026-07-28 mirror headers and their encoding
(reference/mcp-wire.md §5 "Header value encoding"), and which caller headers may travel.

A value that is not plain visible ASCII, has leading/trailing whitespace, or looks
like the sentinel itself travels as ``=?base64?<base64 of UTF-8>?=``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from hopline.binding import META_PROTOCOL_VERSION, NAME_HEADER_PARAM

# Never taken from caller-supplied headers: hop-by-hop (RFC 9110 §7.6.1) and the ones the upstream owns.
NOT_FORWARDED = frozenset(
    "connection keep-alive proxy-authenticate proxy-authorization proxy-connection te trailer transfer-encoding "
    "upgrade host content-length mcp-session-id mcp-protocol-version mcp-method mcp-name last-event-id".split()
)
ACCEPT_BOTH = "application/json, text/event-stream"


def clean_headers(headers: dict[str, str] | None) -> dict[str, str]:
    return {k.lower(): v for k, v in (headers or {}).items() if k.lower() not in NOT_FORWARDED}


def modern_headers(body: dict[str, Any]) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and (where the method has one) ``Mcp-Name``."""
    method, params = body["method"], body["params"]
    headers = {
        "mcp-protocol-version": encode_header_value(str(params["_meta"][META_PROTOCOL_VERSION])),
        "mcp-method": encode_header_value(method),
    }
    key = NAME_HEADER_PARAM.get(method)
    if key is not None and isinstance(params.get(key), (str, int)):
        headers["mcp-name"] = encode_header_value(str(params[key]))
    return headers


_PREFIX, _SUFFIX = "=?base64?", "?="


def needs_encoding(value: str) -> bool:
    if value != value.strip() or (value.startswith(_PREFIX) and value.endswith(_SUFFIX)):
        return True
    return any(not (0x20 <= ord(c) < 0x7F) for c in value)


def encode_header_value(value: str) -> str:
    if not needs_encoding(value):
        return value
    return _PREFIX + base64.b64encode(value.encode("utf-8")).decode("ascii") + _SUFFIX


def decode_header_value(value: str) -> str:
    if value.startswith(_PREFIX) and value.endswith(_SUFFIX):
        try:
            return base64.b64decode(value[len(_PREFIX) : -len(_SUFFIX)], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value
