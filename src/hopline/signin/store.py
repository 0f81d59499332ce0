"""The authorization server's state: signing keys, registered clients, sign-ins in flight, codes, grants and
refresh tokens.

:class:`SigninStore` is the interface (``redis_store.RedisStore`` is the replicas' one: every operation is one
key's read, write or compare-and-set); :class:`SqliteStore` keeps it in one SQLite file (stdlib ``sqlite3``, WAL, one
connection per process, every call a short local transaction). Codes and refresh tokens are stored only as
keyed hashes (HMAC-SHA256 under the configured secret key): the file alone does not let anyone use one. The
private signing key is stored encrypted (AES-256-GCM under a key derived from the same secret). Every row has
an expiry; expired rows are swept as new ones are written.
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol

import orjson

SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (kid TEXT PRIMARY KEY, sealed BLOB NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS clients (client_id TEXT PRIMARY KEY, doc BLOB NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY, doc BLOB NOT NULL, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS codes (
  hash TEXT PRIMARY KEY, doc BLOB NOT NULL, expires REAL NOT NULL, used INTEGER NOT NULL DEFAULT 0,
  grant_id TEXT);
CREATE TABLE IF NOT EXISTS grants (
  id TEXT PRIMARY KEY, client_id TEXT NOT NULL, doc BLOB NOT NULL, expires REAL NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS refresh (
  hash TEXT PRIMARY KEY, grant_id TEXT NOT NULL, expires REAL NOT NULL, used INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS refresh_grant ON refresh(grant_id);
"""


class SigninStore(Protocol):
    """What the authorization server keeps (values are JSON-able dicts; secrets arrive hashed or sealed)."""

    def keys(self) -> list[tuple[str, bytes]]: ...
    def add_key(self, kid: str, sealed: bytes, *, first: bool = False) -> bool:
        """Keep a signing key; ``first``: only if the store has none yet (False: another was first)."""
        ...

    def client(self, client_id: str) -> dict[str, Any] | None: ...
    def add_client(self, client_id: str, doc: dict[str, Any], limit: int) -> bool: ...
    def put_pending(self, key: str, doc: dict[str, Any], ttl: float) -> None: ...
    def pending(self, key: str) -> dict[str, Any] | None: ...
    def take_pending(self, key: str) -> dict[str, Any] | None: ...
    def put_code(self, code: str, doc: dict[str, Any], ttl: float) -> None: ...
    def use_code(self, code: str) -> tuple[str, dict[str, Any] | None]: ...
    def code_grant(self, code: str, grant_id: str) -> None: ...
    def add_grant(self, grant_id: str, client_id: str, doc: dict[str, Any], ttl: float) -> None: ...
    def grant(self, grant_id: str) -> dict[str, Any] | None: ...
    def revoke_grant(self, grant_id: str) -> None: ...
    def put_refresh(self, token: str, grant_id: str, ttl: float) -> None: ...
    def use_refresh(self, token: str) -> tuple[str, str | None]: ...
    def refresh_grant(self, token: str) -> str | None: ...
    def close(self) -> None: ...


class Full(Exception):
    """The store holds as many sign-ins in flight as it may (``max_pending``)."""


class SqliteStore:
    """:class:`SigninStore` in one SQLite file (see the module docstring)."""

    def __init__(
        self, path: str, secret: bytes, *, clock: Callable[[], float] = time.time, max_pending: int = 10_000
    ) -> None:
        self.max_pending = max_pending
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        if path != ":memory:":
            Path(path).chmod(0o600)
        self._hash_key = hmac.new(secret, b"hopline-signin-hash", hashlib.sha256).digest()
        self._lock = threading.Lock()
        self._clock = clock

    def _h(self, value: str) -> str:
        return hmac.new(self._hash_key, value.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()

    def _one(self, sql: str, *args: Any) -> Any:
        with self._lock:
            return self._db.execute(sql, args).fetchone()

    def _run(self, sql: str, *args: Any) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    def _sweep(self) -> None:
        now = self._clock()
        with self._lock:
            for table in ("pending", "codes", "refresh", "grants"):
                self._db.execute(f"DELETE FROM {table} WHERE expires < ?", (now,))

    # -- signing keys ----------------------------------------------------------------------
    def keys(self) -> list[tuple[str, bytes]]:
        with self._lock:
            return [(k, bytes(s)) for k, s in self._db.execute("SELECT kid, sealed FROM keys ORDER BY created")]

    def add_key(self, kid: str, sealed: bytes, *, first: bool = False) -> bool:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if first and self._db.execute("SELECT count(*) FROM keys").fetchone()[0]:
                    return False
                self._db.execute("INSERT INTO keys VALUES (?, ?, ?)", (kid, sealed, self._clock()))
                return True
            finally:
                self._db.execute("COMMIT")

    # -- clients (registered ones; CIMD documents are cached in memory) ----------------------
    def client(self, client_id: str) -> dict[str, Any] | None:
        row = self._one("SELECT doc FROM clients WHERE client_id = ?", client_id)
        return None if row is None else orjson.loads(row[0])

    def add_client(self, client_id: str, doc: dict[str, Any], limit: int) -> bool:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                (count,) = self._db.execute("SELECT count(*) FROM clients").fetchone()
                if count >= limit:
                    return False
                self._db.execute("INSERT INTO clients VALUES (?, ?, ?)", (client_id, orjson.dumps(doc), self._clock()))
                return True
            finally:
                self._db.execute("COMMIT")

    # -- sign-ins in flight --------------------------------------------------------------------
    def put_pending(self, key: str, doc: dict[str, Any], ttl: float) -> None:
        """Keep a sign-in in flight (replacing its earlier state); :class:`Full` over ``max_pending``."""
        self._sweep()
        h = self._h(key)
        with self._lock:
            (count,) = self._db.execute("SELECT count(*) FROM pending WHERE id != ?", (h,)).fetchone()
        if count >= self.max_pending:
            raise Full(f"{count} sign-ins are in flight already")
        self._run("INSERT OR REPLACE INTO pending VALUES (?, ?, ?)", h, orjson.dumps(doc), self._clock() + ttl)

    def pending(self, key: str) -> dict[str, Any] | None:
        row = self._one("SELECT doc FROM pending WHERE id = ? AND expires >= ?", self._h(key), self._clock())
        return None if row is None else orjson.loads(row[0])

    def take_pending(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "DELETE FROM pending WHERE id = ? AND expires >= ? RETURNING doc", (self._h(key), self._clock())
            ).fetchone()
        return None if row is None else orjson.loads(row[0])

    # -- authorization codes: single use; a second use is reported ("replayed") ----------------
    def put_code(self, code: str, doc: dict[str, Any], ttl: float) -> None:
        self._sweep()
        self._run("INSERT INTO codes (hash, doc, expires) VALUES (?, ?, ?)", self._h(code), orjson.dumps(doc),
                  self._clock() + ttl)  # fmt: skip

    def use_code(self, code: str) -> tuple[str, dict[str, Any] | None]:
        """("ok", doc) the first time; ("replayed", doc) after; ("unknown", None)."""
        h = self._h(code)
        with self._lock:
            row = self._db.execute(
                "UPDATE codes SET used = 1 WHERE hash = ? AND used = 0 AND expires >= ? RETURNING doc",
                (h, self._clock()),
            ).fetchone()
            if row is not None:
                return "ok", orjson.loads(row[0])
            row = self._db.execute("SELECT doc, grant_id FROM codes WHERE hash = ? AND used = 1", (h,)).fetchone()
        if row is None:
            return "unknown", None
        return "replayed", {**orjson.loads(row[0]), "grant_id": row[1]}

    def code_grant(self, code: str, grant_id: str) -> None:
        self._run("UPDATE codes SET grant_id = ? WHERE hash = ?", grant_id, self._h(code))

    # -- grants and their refresh tokens ---------------------------------------------------------
    def add_grant(self, grant_id: str, client_id: str, doc: dict[str, Any], ttl: float) -> None:
        self._run("INSERT INTO grants (id, client_id, doc, expires) VALUES (?, ?, ?, ?)", grant_id, client_id,
                  orjson.dumps(doc), self._clock() + ttl)  # fmt: skip

    def grant(self, grant_id: str) -> dict[str, Any] | None:
        row = self._one("SELECT doc FROM grants WHERE id = ? AND revoked = 0 AND expires >= ?", grant_id, self._clock())
        return None if row is None else orjson.loads(row[0])

    def revoke_grant(self, grant_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE grants SET revoked = 1 WHERE id = ?", (grant_id,))
            self._db.execute("DELETE FROM refresh WHERE grant_id = ?", (grant_id,))

    def put_refresh(self, token: str, grant_id: str, ttl: float) -> None:
        self._sweep()
        self._run("INSERT INTO refresh (hash, grant_id, expires) VALUES (?, ?, ?)", self._h(token), grant_id,
                  self._clock() + ttl)  # fmt: skip
        with self._lock:  # the grant lives as long as its newest refresh token
            self._db.execute(
                "UPDATE grants SET expires = max(expires, ?) WHERE id = ?", (self._clock() + ttl, grant_id)
            )

    def use_refresh(self, token: str) -> tuple[str, str | None]:
        """("ok", grant) the first time (the token is spent); ("replayed", grant) after; ("unknown", None)."""
        h = self._h(token)
        with self._lock:
            row = self._db.execute(
                "UPDATE refresh SET used = 1 WHERE hash = ? AND used = 0 AND expires >= ? RETURNING grant_id",
                (h, self._clock()),
            ).fetchone()
            if row is not None:
                return "ok", row[0]
            row = self._db.execute("SELECT grant_id FROM refresh WHERE hash = ? AND used = 1", (h,)).fetchone()
        return ("replayed", row[0]) if row is not None else ("unknown", None)

    def refresh_grant(self, token: str) -> str | None:
        row = self._one("SELECT grant_id FROM refresh WHERE hash = ? AND used = 0", self._h(token))
        return None if row is None else row[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
