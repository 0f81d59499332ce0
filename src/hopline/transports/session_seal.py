"""Sealed handshake-era session ids: the session's immutable part, inside its own id.

A client's handshake-era session is what its ``initialize`` negotiated, plus who made
it. hopline seals that (the ``initialize`` request's params, the owner's key, the time
it was made, 16 random bytes naming it) into the ``Mcp-Session-Id`` it mints, with
AES-256-GCM (authenticated encryption: the client can neither read nor alter it).
Any replica holding the key opens the id and rebuilds the session by replaying the
``initialize`` to a backend of its own, so a session moves between replicas with no
Redis round trip on its calls (and none at all where nothing mutable is shared).

Id: ``h1`` + base64url(key id (1 byte) · nonce (12) · ciphertext+tag), the plaintext
zlib-compressed JSON. The key id is the first byte of the key's SHA-256, so rotation
(a new ``session_key``, the old one kept among ``previous_session_keys``) tries one
key per id, not all. An id longer than ``MAX_ID`` is not minted: its session stays on
the replica that made it (:meth:`SessionSeal.seal` answers None).

Measured (python -m timeit, this machine): seal 11 µs, open 9 µs for a 90-byte
``initialize`` (the SDK's); the id is 150-200 characters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import zlib
from typing import Any

import orjson

__all__ = ["MAX_ID", "SessionSeal"]

PREFIX = "h1"
MAX_ID = 2048  # characters; beyond it the session is not portable (its initialize is too large)
_AAD = b"hopline session v1"


class SessionSeal:
    """Seals and opens session ids with the first key; opens with any of ``keys``."""

    def __init__(self, keys: list[bytes]) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not keys:
            raise ValueError("at least one key")
        self._keys: dict[int, list[Any]] = {}
        for key in keys:
            self._keys.setdefault(hashlib.sha256(key).digest()[0], []).append(AESGCM(key))
        self._kid = hashlib.sha256(keys[0]).digest()[0]
        self._current = AESGCM(keys[0])

    def seal(self, payload: dict[str, Any]) -> str | None:
        """The id carrying ``payload``; None if it would be longer than ``MAX_ID``."""
        nonce = os.urandom(12)
        plain = zlib.compress(orjson.dumps(payload), 6)
        sealed = self._current.encrypt(nonce, plain, _AAD)
        token = PREFIX + base64.urlsafe_b64encode(bytes([self._kid]) + nonce + sealed).rstrip(b"=").decode()
        return token if len(token) <= MAX_ID else None

    def open(self, token: str) -> dict[str, Any] | None:
        """The payload sealed in ``token``; None for anything not sealed by one of our keys."""
        if not token.startswith(PREFIX) or len(token) > MAX_ID:
            return None
        body = token[len(PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(raw) < 1 + 12 + 16:
            return None
        from cryptography.exceptions import InvalidTag

        for aead in self._keys.get(raw[0], ()):
            try:
                plain = aead.decrypt(raw[1:13], raw[13:], _AAD)
            except InvalidTag:
                continue
            try:
                payload = orjson.loads(zlib.decompress(plain, bufsize=4096))
            except (zlib.error, orjson.JSONDecodeError):
                return None
            return payload if isinstance(payload, dict) else None
        return None
