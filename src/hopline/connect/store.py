"""Per-user upstream tokens at rest: one sealed row per (principal, backend) in a SQLite file.

Each row is sealed with AES-256-GCM under a key derived (HMAC-SHA256) from ``auth.connect.secret_key``; the
associated data is the row's own (principal, backend), so a row copied onto another principal or backend does
not open. The principal is stored only as a keyed hash. Reads are cached in memory (a present token and an
absent one alike): after the first look-up, a call costs no disk I/O; every write goes through the cache.

A file that is not a SQLite database, or one sealed under another key (a sealed canary row tells), is refused at
start with a clear :class:`StoreProblem`, nothing in it touched; a single row that does not open is a warning and
"no token" for that user (the row is kept until a new consent replaces it).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

log = logging.getLogger("hopline.connect")

SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
  principal TEXT NOT NULL, backend TEXT NOT NULL, sealed BLOB NOT NULL, updated REAL NOT NULL,
  PRIMARY KEY (principal, backend));
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
"""
CACHE_SIZE = 65536


class StoreProblem(Exception):
    """The token store cannot be used (the message is safe to show)."""


def principal_id(key: tuple[str | None, str]) -> str:
    """A principal's key as one string (issuer and subject, unambiguous)."""
    return orjson.dumps(list(key)).decode()


class TokenStore:
    def __init__(self, path: str, secret: bytes, *, clock: Callable[[], float] = time.time) -> None:
        self._aead = AESGCM(hmac.new(secret, b"hopline-connect-seal", hashlib.sha256).digest())
        self._hash_key = hmac.new(secret, b"hopline-connect-principal", hashlib.sha256).digest()
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], dict[str, Any] | None] = {}
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
            self._db.execute("SELECT count(*) FROM tokens").fetchone()
            self._check_key(path)
            if path != ":memory:":
                os.chmod(path, 0o600)
        except sqlite3.DatabaseError as exc:
            raise StoreProblem(f"the token store {path} cannot be opened as a SQLite database ({exc})") from None
        except OSError as exc:
            raise StoreProblem(f"the token store {path} cannot be opened ({exc.strerror})") from None

    @classmethod
    def probe(cls, path: str, secret: bytes) -> None:
        """Raise :class:`StoreProblem` if the file at ``path`` exists and is not a token store this key opens;
        nothing is created or written (``hopline check``, and serve before it starts anything)."""
        if path == ":memory:" or not Path(path).exists():
            return
        try:
            uri = f"{Path(path).resolve().as_uri()}?mode=ro&immutable=1"  # read only: no -wal or -shm file made
            db = sqlite3.connect(uri, uri=True, timeout=5.0)
        except sqlite3.Error as exc:
            raise StoreProblem(f"the token store {path} cannot be opened ({exc})") from None
        try:
            try:
                row = db.execute("SELECT value FROM meta WHERE name = 'canary'").fetchone()
            except sqlite3.DatabaseError as exc:
                raise StoreProblem(f"the token store {path} cannot be opened as a SQLite database ({exc})") from None
            if row is not None:
                store = cls.__new__(cls)
                store._aead = AESGCM(hmac.new(secret, b"hopline-connect-seal", hashlib.sha256).digest())
                store._db = db
                store._check_key(path)
        finally:
            db.close()

    def _check_key(self, path: str) -> None:
        """A sealed canary: a store sealed under another key is refused at start, its rows untouched."""
        row = self._db.execute("SELECT value FROM meta WHERE name = 'canary'").fetchone()
        if row is None:
            nonce = os.urandom(12)
            canary = nonce + self._aead.encrypt(nonce, b"hopline-connect", b"canary")
            self._db.execute("INSERT INTO meta VALUES ('canary', ?)", (canary,))
            return
        try:
            self._aead.decrypt(bytes(row[0])[:12], bytes(row[0])[12:], b"canary")
        except InvalidTag:
            raise StoreProblem(
                f"the token store {path} was sealed under another secret_key: set the key it was made with (its "
                "tokens are kept), or move the file away to start with no connected accounts"
            ) from None

    def _row_key(self, principal: str, backend: str) -> tuple[str, bytes]:
        h = hmac.new(self._hash_key, principal.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()
        return h, f"{h}\0{backend}".encode()

    def get(self, principal: str, backend: str) -> dict[str, Any] | None:
        """The token set of this principal at this backend, or None (cached after the first read)."""
        key = (principal, backend)
        try:
            return self._cache[key]
        except KeyError:
            pass
        h, aad = self._row_key(principal, backend)
        with self._lock:
            row = self._db.execute("SELECT sealed FROM tokens WHERE principal = ? AND backend = ?", (h, backend))
            found = row.fetchone()
        doc = None
        if found is not None:
            sealed = bytes(found[0])
            try:
                doc = orjson.loads(self._aead.decrypt(sealed[:12], sealed[12:], aad))
            except (InvalidTag, ValueError, orjson.JSONDecodeError):
                log.warning(
                    "connect: the stored token of a user for backend %s cannot be opened with this secret_key (was "
                    "the key changed?); the row is kept, the user is asked to consent again",
                    backend,
                )
        self._remember(key, doc)
        return doc

    def put(self, principal: str, backend: str, doc: dict[str, Any]) -> None:
        h, aad = self._row_key(principal, backend)
        nonce = os.urandom(12)
        sealed = nonce + self._aead.encrypt(nonce, orjson.dumps(doc), aad)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO tokens VALUES (?, ?, ?, ?)", (h, backend, sealed, self._clock()))
        self._remember((principal, backend), doc)

    def delete(self, principal: str, backend: str) -> None:
        h, _aad = self._row_key(principal, backend)
        with self._lock:
            self._db.execute("DELETE FROM tokens WHERE principal = ? AND backend = ?", (h, backend))
        self._remember((principal, backend), None)

    def count(self) -> dict[str, int]:
        """Stored token sets per backend (what operators may see)."""
        with self._lock:
            return dict(self._db.execute("SELECT backend, count(*) FROM tokens GROUP BY backend").fetchall())

    def _remember(self, key: tuple[str, str], doc: dict[str, Any] | None) -> None:
        if key not in self._cache and len(self._cache) >= CACHE_SIZE:
            del self._cache[next(iter(self._cache))]
        self._cache[key] = doc

    def close(self) -> None:
        with self._lock:
            self._db.close()
