"""Opaque gateway cursors for aggregated ``*/list`` paging (draft §6.3 fan-out;
reference/mcp-wire.md §9 "Cursors").

Contract
- ``encode(state, binding=...)`` turns a JSON-serializable mapping (e.g. which
  backend, its own cursor, an offset) into ``base64url(JSON) "." base64url(tag)``,
  unpadded, where the tag is HMAC-SHA256 under a key derived from the secret *and*
  the binding (a session id or principal). A state whose cursor would exceed
  :data:`MAX_CURSOR` raises ValueError (a gateway bug, not a client error).
- ``decode(cursor, binding=...)`` returns the state dict, or raises
  ``InvalidParams("Invalid cursor")`` (-32602) for anything else: not a string,
  longer than 4 KiB, not canonical base64url, a bad tag (tampered, another secret,
  another binding), not a JSON object. The message never says which, so the error
  is no oracle.
- Integrity, not secrecy: the state is readable by the client. Never put secrets
  or another principal's data in it. A backend's cursor therefore only ever goes
  back to that backend, and only for the principal it was issued to.
- Pure; no I/O. Secrets are per process unless given: with several gateway
  processes behind one load balancer, pass the same secret to each.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from typing import Any, Mapping

import orjson

from hopline.jsonrpc import InvalidParams

MAX_CURSOR = 4096
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    """Strict decode: only the canonical unpadded encoding of some bytes is accepted.

    The re-encode check matters: the last character of unpadded base64 carries
    unused bits, so several strings decode to the same bytes, and a changed
    character must not pass as the same cursor.
    """
    if not _B64URL.fullmatch(text):
        raise ValueError("not base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64e(data) != text:
        raise ValueError("not canonical")
    return data


class CursorCodec:
    """Opaque gateway cursors: base64url(JSON state) + HMAC-SHA256 tag, bound to a 'binding'
    string (session or principal)."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes | None = None) -> None:
        if secret is None:
            secret = secrets.token_bytes(32)
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError("cursor secret must be non-empty bytes")
        self._secret = bytes(secret)

    def _tag(self, payload: bytes, binding: str) -> bytes:
        # A key per binding: a cursor tagged for one session verifies under no other.
        key = hmac.new(
            self._secret, b"hopline-cursor\0" + binding.encode("utf-8", "surrogatepass"), hashlib.sha256
        ).digest()
        return hmac.new(key, payload, hashlib.sha256).digest()

    def encode(self, state: Mapping[str, Any], *, binding: str) -> str:
        payload = orjson.dumps(dict(state), option=orjson.OPT_SORT_KEYS)
        cursor = f"{_b64e(payload)}.{_b64e(self._tag(payload, binding))}"
        if len(cursor) > MAX_CURSOR:
            raise ValueError(f"cursor state too large ({len(cursor)} > {MAX_CURSOR} characters)")
        return cursor

    def decode(self, cursor: str, *, binding: str) -> dict[str, Any]:
        if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR or cursor.count(".") != 1:
            raise InvalidParams("Invalid cursor")
        body, _, tag = cursor.partition(".")
        try:
            payload, mac = _b64d(body), _b64d(tag)
        except (ValueError, binascii.Error):
            raise InvalidParams("Invalid cursor") from None
        if not hmac.compare_digest(mac, self._tag(payload, binding)):
            raise InvalidParams("Invalid cursor")
        try:
            state = orjson.loads(payload)
        except orjson.JSONDecodeError:  # only with our own secret leaked or a bug
            raise InvalidParams("Invalid cursor") from None
        if not isinstance(state, dict):
            raise InvalidParams("Invalid cursor")
        return state

    def __repr__(self) -> str:
        return "CursorCodec(secret=<hidden>)"
