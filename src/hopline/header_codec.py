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


# -- Mcp-Param-* (2026-07-28 custom headers, SEP-2243) -----------------------------------------
# A tool argument whose inputSchema property carries "x-mcp-header": "X" travels, on a 2026-07-28
# tools/call over HTTP, as the header Mcp-Param-X too. Only a property reached from the root by
# `properties` alone counts, typed string, integer or boolean; a tool with any other annotation is
# one an HTTP client drops, so it mirrors nothing (reference/mcp-wire.md §5).
PARAM_PREFIX = "mcp-param-"
X_MCP_HEADER = "x-mcp-header"
PARAM_TYPES = frozenset(("string", "integer", "boolean"))
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NESTED = ("items", "contains", "additionalProperties", "unevaluatedItems", "unevaluatedProperties", "not", "if")
_NESTED += ("then", "else", "propertyNames", "contentSchema")
_NESTED_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_NESTED_MAPS = ("$defs", "definitions", "patternProperties", "dependentSchemas")

# header name (lower case) -> (the header as declared, the argument's path, its JSON type)
ParamMap = dict[str, tuple[str, tuple[str, ...], str]]


def param_map(schema: Any) -> ParamMap | None:
    """A tool's ``Mcp-Param-*`` headers from its inputSchema; None if an annotation is invalid
    (misplaced, not a token, on another type, or repeated)."""
    found: ParamMap = {}
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        token = node.get(X_MCP_HEADER)
        if token is not None:
            kind = node.get("type")
            if not path or not isinstance(token, str) or not token or not set(token) <= _TOKEN:
                return None
            if kind not in PARAM_TYPES:
                return None
            key = PARAM_PREFIX + token.lower()
            if key in found:
                return None
            found[key] = ("Mcp-Param-" + token, path, kind)
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                stack.extend(((*path, k) if path is not None else None, v) for k, v in value.items())
            elif keyword in _NESTED:
                stack.append((None, value))
            elif keyword in _NESTED_LISTS and isinstance(value, list):
                stack.extend((None, v) for v in value)
            elif keyword in _NESTED_MAPS and isinstance(value, dict):
                stack.extend((None, v) for v in value.values())
    return found


def strict_decode(value: str) -> str | None:
    """:func:`decode_header_value`, but None for a sentinel that is not canonical base64 of UTF-8."""
    if not (value.startswith(_PREFIX) and value.endswith(_SUFFIX)):
        return value
    payload = value[len(_PREFIX) : -len(_SUFFIX)]
    try:
        raw = base64.b64decode(payload, validate=True)
        return raw.decode("utf-8") if base64.b64encode(raw).decode("ascii") == payload else None
    except (binascii.Error, UnicodeDecodeError):
        return None


def _argument(arguments: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(arguments, dict):
            return None
        arguments = arguments.get(key)
    return arguments


def _rendered(value: Any) -> str | None:
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def param_headers(found: ParamMap, arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a tools/call with these arguments (absent or null: no header)."""
    out = {}
    for key, (_, path, _) in found.items():
        text = _rendered(_argument(arguments, path))
        if text is not None:
            out[key] = encode_header_value(text)
    return out


def _same(kind: str, value: Any, header: str) -> bool:
    if kind == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        whole, dot, fraction = header.partition(".")
        digits = whole[1:] if whole.startswith("-") else whole
        if digits.isdigit() and digits.isascii() and (not dot or (fraction.isdigit() and set(fraction) == {"0"})):
            return float(value).is_integer() and int(whole) == int(value)  # 42 equals 42.0
    return header == _rendered(value)


def param_problem(found: ParamMap, arguments: Any, headers: dict[bytes, str]) -> str | None:
    """Why a tools/call's ``Mcp-Param-*`` headers do not mirror its arguments (-32020), or None:
    each declared header present exactly when its argument is, and equal to it once decoded."""
    for key, (name, path, kind) in found.items():
        raw = headers.get(key.encode())
        value = _argument(arguments, path)
        argument = ".".join(path)
        if value is None:
            if raw is not None:
                return f"{name} header is present but the argument {argument!r} is absent"
            continue
        if raw is None:
            return f"{name} header is missing but the argument {argument!r} is present"
        text = strict_decode(raw.strip(" \t"))
        if text is None or not _same(kind, value, text):
            return f"{name} header does not match the argument {argument!r}"
    return None


def param_syntax_problem(headers: dict[bytes, str]) -> str | None:
    """A ``Mcp-Param-*`` header that is wrong whatever the tool: a character outside visible
    ASCII (encode such a value as ``=?base64?…?=``) or a sentinel that does not decode.
    Header names are lower case and hold no line feed (the HTTP parser refuses one), so one
    search over the joined names finds whether any is a ``Mcp-Param-*`` at all (a call per
    request, not one per header: bench/profile_call.py --era 2026)."""
    if b"\nmcp-param-" not in b"\n" + b"\n".join(headers):
        return None
    for key, raw in headers.items():
        if not key.startswith(b"mcp-param-"):
            continue
        value = raw.strip(" \t")
        if any(not (0x20 <= ord(c) < 0x7F) for c in value):
            return f"{key.decode()} header has a character outside visible ASCII; send it as =?base64?...?="
        if strict_decode(value) is None:
            return f"{key.decode()} header carries a malformed base64 value"
    return None


class ParamMaps:
    """Each tool's ``Mcp-Param-*`` map, learned from the tools/list answers that pass by
    (at most ``limit`` tools: the oldest goes first). A tool whose annotations are invalid
    maps to None: it mirrors and validates nothing."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self.tools: dict[str, ParamMap | None] = {}

    def learn(self, result: Any) -> None:
        tools = result.get("tools") if isinstance(result, dict) else None
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                found = param_map(tool.get("inputSchema"))
                self.tools.pop(tool["name"], None)
                if found != {}:  # a tool without annotations is not kept: it mirrors nothing anyway
                    if len(self.tools) >= self.limit:
                        del self.tools[next(iter(self.tools))]
                    self.tools[tool["name"]] = found

    def get(self, name: Any) -> ParamMap | None:
        """The tool's map; None for a tool not seen, without annotations, or with invalid ones."""
        return self.tools.get(name) if isinstance(name, str) else None
