"""The 2026-07-28 header value encoding (reference/mcp-wire.md §5 "Header value encoding").

A value that is not plain visible ASCII, has leading/trailing whitespace, or looks
like the sentinel itself travels as ``=?base64?<base64 of UTF-8>?=``.
"""

from __future__ import annotations

import base64
import binascii

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
