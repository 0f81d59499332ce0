"""The authorization server's state in Redis (``auth.signin.store_backend: redis``), shared by replicas.

The same :class:`~hopline.signin.store.SigninStore` as the SQLite file, over the ``state:`` section's Redis
(``redis_url``, ``prefix``, ``timeout``), so a sign-in one replica began another can finish, a code one issued
another redeems once, and a refresh token is spent once whichever replica sees it. Every operation is one
key's read or write, or one Lua script where a check and a write must be one step (a code or refresh token's
single use, the client and sign-in bounds, the first signing key). Codes, refresh tokens and sign-in ids are
keyed by their HMAC (as in the file); the signing key is stored sealed; every key but the signing keys and
registered clients expires with what it holds.

redis-py's synchronous client: the authorization server (Authlib) is synchronous, and hopline calls it in a
worker thread (``signin/app.py``), never on the event loop. Every operation gives up after ``timeout``.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any, Callable

import orjson

from hopline.signin.store import Full

# A code or refresh token's single use: ("ok", doc) the first time, ("replayed", doc) after.
_USE = """
local v = redis.call('HMGET', KEYS[1], 'doc', 'used', 'grant')
if not v[1] then return {'unknown'} end
if v[2] == '0' then redis.call('HSET', KEYS[1], 'used', '1') return {'ok', v[1]} end
return {'replayed', v[1], v[3] or ''}
"""
# A registered client, within the bound.
_ADD_CLIENT = """
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
return redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
"""
# A sign-in in flight, within the bound (expired ones leave the index first).
_PUT_PENDING = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
local n = redis.call('ZCARD', KEYS[2])
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then n = n - 1 end
if n >= tonumber(ARGV[5]) then return n end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
return -1
"""
# A signing key; with ARGV[4] == '1', only if there is none yet (replicas starting at once agree on one).
_ADD_KEY = """
if ARGV[4] == '1' and redis.call('HLEN', KEYS[1]) > 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
"""
# A refresh token: kept, listed under its grant, and the grant kept as long as its newest token.
_PUT_REFRESH = """
redis.call('HSET', KEYS[1], 'grant', ARGV[1], 'used', '0', 'doc', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[3], ARGV[2]) end
return 1
"""
_REVOKE = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'revoked', '1') end
for _, k in ipairs(redis.call('SMEMBERS', KEYS[2])) do redis.call('DEL', k) end
redis.call('DEL', KEYS[2])
return 1
"""


class RedisStore:
    """:class:`~hopline.signin.store.SigninStore` in Redis (see the module docstring)."""

    def __init__(
        self,
        client: Any,
        secret: bytes,
        *,
        prefix: str = "hopline:",
        clock: Callable[[], float] = time.time,
        max_pending: int = 10_000,
    ) -> None:
        self.r = client
        self.p = prefix + "signin:"
        self.max_pending = max_pending
        self._clock = clock
        self._hash_key = hmac.new(secret, b"hopline-signin-hash", hashlib.sha256).digest()
        self._use = client.register_script(_USE)
        self._add_client = client.register_script(_ADD_CLIENT)
        self._put_pending = client.register_script(_PUT_PENDING)
        self._add_key = client.register_script(_ADD_KEY)
        self._put_refresh = client.register_script(_PUT_REFRESH)
        self._revoke = client.register_script(_REVOKE)

    @classmethod
    def from_url(cls, url: str, secret: bytes, *, timeout: float, **kw: Any) -> RedisStore:
        import redis

        client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False
        )
        return cls(client, secret, **kw)

    def _h(self, value: str) -> str:
        return hmac.new(self._hash_key, value.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()

    # -- signing keys ----------------------------------------------------------------------
    def keys(self) -> list[tuple[str, bytes]]:
        sealed = self.r.hgetall(self.p + "keys")
        made = self.r.hgetall(self.p + "keys:made")
        order = sorted(sealed, key=lambda k: float(made.get(k, b"0")))
        return [(k.decode(), bytes(sealed[k])) for k in order]

    def add_key(self, kid: str, sealed: bytes, *, first: bool = False) -> bool:
        args = [kid, sealed, repr(self._clock()), "1" if first else "0"]
        return bool(self._add_key(keys=[self.p + "keys", self.p + "keys:made"], args=args))

    # -- clients ---------------------------------------------------------------------------
    def client(self, client_id: str) -> dict[str, Any] | None:
        raw = self.r.hget(self.p + "clients", client_id)
        return None if raw is None else orjson.loads(raw)

    def add_client(self, client_id: str, doc: dict[str, Any], limit: int) -> bool:
        return bool(self._add_client(keys=[self.p + "clients"], args=[client_id, orjson.dumps(doc), limit]))

    # -- sign-ins in flight ------------------------------------------------------------------
    def put_pending(self, key: str, doc: dict[str, Any], ttl: float) -> None:
        now = self._clock()
        h = self._h(key)
        args = [h, orjson.dumps(doc), max(1, int(ttl * 1000)), repr(now), self.max_pending, repr(now + ttl)]
        count = self._put_pending(keys=[self.p + "pending:" + h, self.p + "pending"], args=args)
        if count != -1:
            raise Full(f"{count} sign-ins are in flight already")

    def pending(self, key: str) -> dict[str, Any] | None:
        raw = self.r.get(self.p + "pending:" + self._h(key))
        return None if raw is None else orjson.loads(raw)

    def take_pending(self, key: str) -> dict[str, Any] | None:
        h = self._h(key)
        raw = self.r.getdel(self.p + "pending:" + h)
        self.r.zrem(self.p + "pending", h)
        return None if raw is None else orjson.loads(raw)

    # -- authorization codes ------------------------------------------------------------------
    def put_code(self, code: str, doc: dict[str, Any], ttl: float) -> None:
        key = self.p + "code:" + self._h(code)
        pipe = self.r.pipeline()
        pipe.hset(key, mapping={"doc": orjson.dumps(doc), "used": "0"})
        pipe.pexpire(key, max(1, int(ttl * 1000)))
        pipe.execute()

    def use_code(self, code: str) -> tuple[str, dict[str, Any] | None]:
        out = self._use(keys=[self.p + "code:" + self._h(code)])
        status = out[0].decode()
        if status == "unknown":
            return "unknown", None
        doc = orjson.loads(out[1])
        if status == "replayed":
            doc["grant_id"] = out[2].decode() or None
        return status, doc

    def code_grant(self, code: str, grant_id: str) -> None:
        key = self.p + "code:" + self._h(code)
        if self.r.exists(key):
            self.r.hset(key, "grant", grant_id)

    # -- grants and refresh tokens -----------------------------------------------------------------
    def add_grant(self, grant_id: str, client_id: str, doc: dict[str, Any], ttl: float) -> None:
        key = self.p + "grant:" + grant_id
        pipe = self.r.pipeline()
        pipe.hset(key, mapping={"client": client_id, "doc": orjson.dumps(doc), "revoked": "0"})
        pipe.pexpire(key, max(1, int(ttl * 1000)))
        pipe.execute()

    def grant(self, grant_id: str) -> dict[str, Any] | None:
        doc, revoked = self.r.hmget(self.p + "grant:" + grant_id, "doc", "revoked")
        return None if doc is None or revoked != b"0" else orjson.loads(doc)

    def revoke_grant(self, grant_id: str) -> None:
        self._revoke(keys=[self.p + "grant:" + grant_id, self.p + "grant-refresh:" + grant_id])

    def put_refresh(self, token: str, grant_id: str, ttl: float) -> None:
        p = self.p
        keys = [p + "refresh:" + self._h(token), p + "grant-refresh:" + grant_id, p + "grant:" + grant_id]
        self._put_refresh(keys=keys, args=[grant_id, max(1, int(ttl * 1000))])

    def use_refresh(self, token: str) -> tuple[str, str | None]:
        out = self._use(keys=[self.p + "refresh:" + self._h(token)])
        status = out[0].decode()
        return (status, None) if status == "unknown" else (status, out[1].decode())

    def refresh_grant(self, token: str) -> str | None:
        grant, used = self.r.hmget(self.p + "refresh:" + self._h(token), "grant", "used")
        return None if grant is None or used != b"0" else grant.decode()

    def close(self) -> None:
        self.r.close()
