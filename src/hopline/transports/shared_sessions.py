"""The mutable part of handshake-era sessions, shared by replicas (Redis), or kept here.

A sealed session id (session_seal.py) carries what a session negotiated; what changes
afterwards lives in a :class:`SharedSessions` store:

- **ended** sessions (a client's DELETE): remembered until the id's maximum age, so no
  replica resumes them, and announced so each replica closes its own copy at once;
- the client's **standing requests** (``resources/subscribe``, ``logging/setLevel``):
  replayed into a session resumed on another replica;
- **notifications for the client's GET stream** that arrive on a replica whose copy
  of the session has no GET stream: published to the replica that holds it.

:class:`MemorySessions` keeps all three in this process (one replica that outlives its
sessions' calls, or tests); :class:`RedisSessions` shares them through Redis: keys
``{prefix}end:{sid}`` and ``{prefix}s:{sid}`` (a hash), channels ``{prefix}ends`` and
``{prefix}n:{sid}`` (one pattern subscription per replica). None of this is on a call's path: a call on a session this
replica already holds touches no store.

Store down (Redis unreachable or slower than ``timeout``): every operation raises
:class:`StoreUnavailable` at once (after one failed try, none for ``retry_interval``);
callers decide what the client sees (session_table.py: a session that must be resumed
is refused with 503 and ``Retry-After``; sessions already held keep working).

Fail closed (issue 29). The store's **epoch** (``{prefix}epoch``, random, written by the
first replica that uses the store, never expiring) is sealed into each session id; a
resume checks it, so a store that lost its memory (restarted without persistence,
flushed) resumes none of the sessions made before: their ends are forgotten, so they
are refused (404: the client initializes again). What a replica reads and acts on is
authenticated with a key derived from the session key (HMAC-SHA256 over bytes already
at hand): standing requests (bound to their session and field), the messages for a GET
stream (bound to their session, stamped, each accepted once within ``WINDOW`` seconds)
and the ends announced. A standing entry that is not what hopline wrote (unsigned,
forged, of the wrong type) makes the resume fail closed (:class:`StoreAnswerInvalid`:
503, counted); a forged or replayed message is dropped and counted
(``counters.forged``). The trust model for Redis is in the README (Replicas).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import time
from typing import Any, Callable, Protocol

import orjson

__all__ = ["MemorySessions", "RedisSessions", "SharedSessions", "StoreAnswerInvalid", "StoreUnavailable", "STANDING"]

log = logging.getLogger("hopline.http")

# The client requests a resumed session must see again, and how each is keyed.
STANDING = frozenset({"resources/subscribe", "resources/unsubscribe", "logging/setLevel"})
MAX_STANDING = 256  # standing requests kept per session (subscriptions, level)
WINDOW = 30.0  # seconds a message for a GET stream stays acceptable (the replicas' clocks agree within it)
MAX_SEEN = 65_536  # messages for GET streams remembered (to refuse a replay) within WINDOW
MAC = 32  # bytes of an HMAC-SHA256


class StoreUnavailable(Exception):
    """The shared store did not answer in time."""


class StoreAnswerInvalid(Exception):
    """The shared store answered something hopline did not write (a wrong type, an entry
    not signed with this deployment's key): nothing in it can be trusted for this session."""


def derive(keys: list[bytes]) -> list[bytes]:
    """The shared state's MAC keys, from the session keys (the first one signs)."""
    return [hashlib.sha256(b"hopline shared state\0" + key).digest() for key in keys]


class _Signer:
    """HMAC-SHA256 with the first key, checked against every key (rotation). The parts are
    length-prefixed: no entry's MAC can be read as another's with its parts split elsewhere."""

    __slots__ = ("keys",)

    def __init__(self, keys: list[bytes]) -> None:
        self.keys = derive(keys) if keys else [os.urandom(32)]  # no key given: signed for this process only

    @staticmethod
    def _mac(key: bytes, parts: tuple[bytes, ...]) -> bytes:
        mac = hmac.new(key, digestmod=hashlib.sha256)
        for part in parts:
            mac.update(len(part).to_bytes(4, "big"))
            mac.update(part)
        return mac.digest()

    def sign(self, *parts: bytes) -> bytes:
        return self._mac(self.keys[0], parts)

    def valid(self, mac: bytes, *parts: bytes) -> bool:
        return any(hmac.compare_digest(mac, self._mac(key, parts)) for key in self.keys)


def standing_field(method: str, params: dict[str, Any]) -> tuple[str, bytes | None]:
    """The field a standing request sets (None: deletes) in its session's hash."""
    if method == "logging/setLevel":
        return "level", orjson.dumps({"method": method, "params": params})
    uri = str(params.get("uri", ""))
    if method == "resources/unsubscribe":
        return "sub:" + uri, None
    return "sub:" + uri, orjson.dumps({"method": "resources/subscribe", "params": {"uri": uri}})


class SharedSessions(Protocol):
    counters: Any  # where forged messages are counted (the listener's Admission), if anywhere

    async def epoch(self) -> str | None: ...
    async def resumable(self, sid: str, epoch: Any) -> list[dict[str, Any]] | None: ...
    async def is_ended(self, sid: str) -> bool: ...
    async def end(self, sid: str, ttl: float) -> None: ...
    async def record(self, sid: str, method: str, params: dict[str, Any], ttl: float) -> None: ...
    async def standing(self, sid: str) -> list[dict[str, Any]]: ...
    async def publish(self, sid: str, data: bytes) -> bool: ...
    def listen(self, sid: str, deliver: Callable[[bytes], None]) -> Callable[[], None]: ...
    def on_end(self, ended: Callable[[str], None]) -> None: ...
    async def ready(self, timeout: float) -> None: ...
    async def aclose(self) -> None: ...


class MemorySessions:
    """The store for one process: what it remembers ends with it."""

    def __init__(self, *, max_ended: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._ended: dict[str, float] = {}
        self._standing: dict[str, dict[str, bytes]] = {}
        self._max_ended = max_ended
        self._clock = clock
        self._ends: list[Callable[[str], None]] = []
        self.counters: Any = None

    async def epoch(self) -> str | None:
        return None  # nothing outlives this process: no generation to check

    async def resumable(self, sid: str, epoch: Any) -> list[dict[str, Any]] | None:
        return None if await self.is_ended(sid) else await self.standing(sid)

    async def is_ended(self, sid: str) -> bool:
        until = self._ended.get(sid)
        return until is not None and until > self._clock()

    async def end(self, sid: str, ttl: float) -> None:
        now = self._clock()
        if len(self._ended) >= self._max_ended:
            self._ended = {s: t for s, t in self._ended.items() if t > now}
            while len(self._ended) >= self._max_ended:  # still full: forget the oldest
                del self._ended[next(iter(self._ended))]
        self._ended[sid] = now + ttl
        self._standing.pop(sid, None)
        for ended in self._ends:
            ended(sid)

    async def record(self, sid: str, method: str, params: dict[str, Any], ttl: float) -> None:
        field, value = standing_field(method, params)
        fields = self._standing.setdefault(sid, {})
        if value is None:
            fields.pop(field, None)
        elif field in fields or len(fields) < MAX_STANDING:
            fields[field] = value

    async def standing(self, sid: str) -> list[dict[str, Any]]:
        return [orjson.loads(v) for v in self._standing.get(sid, {}).values()]

    async def publish(self, sid: str, data: bytes) -> bool:
        return False  # one process: a copy without a GET stream is the only copy

    def listen(self, sid: str, deliver: Callable[[bytes], None]) -> Callable[[], None]:
        return lambda: None

    def on_end(self, ended: Callable[[str], None]) -> None:
        self._ends.append(ended)

    async def ready(self, timeout: float) -> None:
        pass

    async def aclose(self) -> None:
        pass


class RedisSessions:
    """The store shared by replicas, in Redis (redis-py's asyncio client); ``keys``: the
    session keys (the first signs; all are accepted, for rotation)."""

    def __init__(
        self,
        client: Any,
        *,
        keys: list[bytes] | None = None,
        prefix: str = "hopline:",
        timeout: float = 0.25,
        retry_interval: float = 1.0,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.timeout = timeout
        self.retry_interval = retry_interval
        self.counters: Any = None
        self._mac = _Signer(keys or [])
        self._epoch: str = ""  # the last epoch the store answered ("": none yet)
        self._seen: dict[bytes, float] = {}  # stamps of messages for GET streams accepted, until they expire
        self._down_until: float | None = None
        self._ends: list[Callable[[str], None]] = []
        self._listeners: dict[str, Callable[[bytes], None]] = {}
        self._task: asyncio.Task | None = None
        self._tried = asyncio.Event()  # the first subscription attempt is over, whatever its outcome

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisSessions:
        from hopline.redis_client import connect

        return cls(connect(url, kwargs.get("timeout", 0.25)), **kwargs)

    async def _call(self, what: Callable[[], Any]) -> Any:
        if self._down_until is not None and time.monotonic() < self._down_until:
            raise StoreUnavailable("the session store is unreachable")
        try:
            async with asyncio.timeout(self.timeout):
                try:
                    result = await what()
                except Exception as exc:
                    if not _is_closed_connection(exc):
                        raise
                    # A pooled connection Redis closed (it restarted) is no outage: once more, on a fresh one
                    # (without it each replica's first operation after a restart fails, and a session made
                    # then would seal the former epoch).
                    result = await what()
        except StoreAnswerInvalid:
            raise
        except Exception as exc:  # redis errors, OSError, timeouts: the store is down
            if _is_answer_error(exc):  # WRONGTYPE and the like: it answered, wrongly
                raise StoreAnswerInvalid(f"the session store answered an error ({type(exc).__name__})") from None
            if self._down_until is None:
                log.warning("session store unreachable (%s)", type(exc).__name__)
            self._down_until = time.monotonic() + self.retry_interval
            raise StoreUnavailable(f"the session store is unreachable ({type(exc).__name__})") from None
        if self._down_until is not None:
            log.warning("session store reachable again")
            self._down_until = None
        return result

    def _epoch_commands(self, pipe: Any) -> None:
        """Queue: the epoch written if the store has none (its first use, or it lost its memory), then read."""
        key = f"{self.prefix}epoch"
        pipe.set(key, os.urandom(16).hex().encode(), nx=True)
        pipe.get(key)

    def _read_epoch(self, raw: Any) -> str:
        if not isinstance(raw, bytes) or not 0 < len(raw) <= 64:
            raise StoreAnswerInvalid("the session store's epoch is not one hopline wrote")
        self._epoch = raw.decode("ascii", "replace")
        return self._epoch

    async def epoch(self) -> str | None:
        """The store's generation, sealed into a new session id (one round trip); while the
        store is down, the last one known ("" if none: such a session resumes nowhere else)."""

        async def run() -> Any:
            async with self.client.pipeline(transaction=False) as pipe:
                self._epoch_commands(pipe)
                return await pipe.execute()

        try:
            return self._read_epoch((await self._call(run))[-1])
        except (StoreUnavailable, StoreAnswerInvalid):
            return self._epoch

    async def resumable(self, sid: str, epoch: Any) -> list[dict[str, Any]] | None:
        """The standing requests to replay into ``sid`` resumed here; None if it cannot be
        (ended, or sealed under another epoch than the store's: its end may be forgotten).
        StoreAnswerInvalid if the store's answer is not what hopline wrote."""

        async def run() -> Any:
            async with self.client.pipeline(transaction=False) as pipe:
                self._epoch_commands(pipe)
                pipe.exists(f"{self.prefix}end:{sid}")
                pipe.hgetall(f"{self.prefix}s:{sid}")
                return await pipe.execute()

        answer = await self._call(run)
        if not isinstance(answer, list) or len(answer) != 4:
            raise StoreAnswerInvalid("the session store answered an unexpected shape")
        current = self._read_epoch(answer[1])
        if not isinstance(answer[2], int) or not isinstance(answer[3], dict):
            raise StoreAnswerInvalid("the session store answered values of an unexpected type")
        if epoch != current:
            log.info("session %s refused: sealed under another epoch of the session store", sid[:8])
            return None
        if answer[2]:
            return None
        return self._standing(sid, answer[3])

    def _standing(self, sid: str, entries: dict[Any, Any]) -> list[dict[str, Any]]:
        out = []
        key = sid.encode()
        for field, value in entries.items():
            if not isinstance(field, bytes) or not isinstance(value, bytes) or len(value) <= MAC:
                raise StoreAnswerInvalid("a standing request in the session store is not one hopline wrote")
            if not self._mac.valid(value[:MAC], b"s", key, field, value[MAC:]):
                raise StoreAnswerInvalid("a standing request in the session store is not signed with the session key")
            request = orjson.loads(value[MAC:])  # signed: ours, so valid JSON of the form below
            if request.get("method") in STANDING and isinstance(request.get("params"), dict):
                out.append(request)
        return out

    async def is_ended(self, sid: str) -> bool:
        return bool(await self._call(lambda: self.client.exists(f"{self.prefix}end:{sid}")))

    async def end(self, sid: str, ttl: float) -> None:
        announcement = self._mac.sign(b"e", sid.encode()) + sid.encode()

        async def run() -> None:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.set(f"{self.prefix}end:{sid}", b"1", ex=max(1, int(ttl)))
                pipe.delete(f"{self.prefix}s:{sid}")
                pipe.publish(f"{self.prefix}ends", announcement)
                await pipe.execute()

        await self._call(run)

    async def record(self, sid: str, method: str, params: dict[str, Any], ttl: float) -> None:
        field, value = standing_field(method, params)
        key = f"{self.prefix}s:{sid}"
        signed = None if value is None else self._mac.sign(b"s", sid.encode(), field.encode(), value) + value

        async def run() -> None:
            if signed is None:
                await self.client.hdel(key, field)
                return
            if await self.client.hlen(key) >= MAX_STANDING and not await self.client.hexists(key, field):
                return
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hset(key, field, signed)
                pipe.expire(key, max(1, int(ttl)))
                await pipe.execute()

        await self._call(run)

    async def standing(self, sid: str) -> list[dict[str, Any]]:
        entries = await self._call(lambda: self.client.hgetall(f"{self.prefix}s:{sid}"))
        if not isinstance(entries, dict):
            raise StoreAnswerInvalid("the session store answered values of an unexpected type")
        return self._standing(sid, entries)

    async def publish(self, sid: str, data: bytes) -> bool:
        """Send ``data`` to the replica holding ``sid``'s GET stream; False if none listens.
        Signed, bound to ``sid``, stamped with the time and 8 random bytes (accepted once)."""
        stamp = int(time.time() * 1000).to_bytes(8, "big") + os.urandom(8)
        signed = self._mac.sign(b"n", sid.encode(), stamp, data) + stamp + data
        try:
            return bool(await self._call(lambda: self.client.publish(f"{self.prefix}n:{sid}", signed)))
        except (StoreUnavailable, StoreAnswerInvalid):
            return False

    def _opened(self, sid: bytes, raw: Any) -> bytes | None:
        """The message in ``raw`` published for ``sid`` by a replica, once; None (counted) otherwise."""
        if isinstance(raw, bytes) and len(raw) > MAC + 16:
            stamp, data = raw[MAC : MAC + 16], raw[MAC + 16 :]
            now = time.time()
            sent = int.from_bytes(stamp[:8], "big") / 1000
            if (
                abs(now - sent) <= WINDOW
                and stamp not in self._seen
                and self._mac.valid(raw[:MAC], b"n", sid, stamp, data)
            ):
                if len(self._seen) >= MAX_SEEN:
                    self._seen = {s: t for s, t in self._seen.items() if t > now}
                if len(self._seen) < MAX_SEEN:  # full of live stamps: refused, never forgotten early
                    self._seen[stamp] = sent + WINDOW
                    return data
        self._count_forged()
        return None

    def _count_forged(self) -> None:
        if self.counters is not None:
            self.counters.forged += 1

    def listen(self, sid: str, deliver: Callable[[bytes], None]) -> Callable[[], None]:
        """Deliver what other replicas publish for ``sid`` while this replica holds its GET
        stream; the answer stops it. Every replica receives every such message (one
        pattern subscription, made before its first session: no subscription to wait
        for per stream) and keeps those it has a listener for (checked then, not before)."""
        self._listeners[sid] = deliver

        def stop() -> None:
            if self._listeners.get(sid) is deliver:
                del self._listeners[sid]

        return stop

    def on_end(self, ended: Callable[[str], None]) -> None:
        self._ends.append(ended)

    async def ready(self, timeout: float) -> None:
        """The first subscription tried (ends and notifications), at most ``timeout`` seconds:
        waited for once, by the first session; with Redis down the try fails at once (or
        after ``self.timeout`` connecting) and sessions go on without it."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._subscriber(), name="session-store-pubsub")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._tried.wait()

    def _heard(self, message: dict[str, Any], ends: bytes, note: bytes) -> None:
        """One message from the subscription: an end announced, or a message for a GET stream."""
        channel, data = message.get("channel"), message.get("data")
        if channel == ends:
            if not isinstance(data, bytes) or len(data) <= MAC or not self._mac.valid(data[:MAC], b"e", data[MAC:]):
                self._count_forged()
                return
            sid = data[MAC:].decode("ascii", "replace")
            for ended in self._ends:
                ended(sid)
        elif isinstance(channel, bytes) and channel.startswith(note):
            sid = channel[len(note) :]
            deliver = self._listeners.get(sid.decode("ascii", "replace"))
            if deliver is not None:
                opened = self._opened(sid, data)
                if opened is not None:
                    deliver(opened)

    async def _subscriber(self) -> None:
        """One pub/sub connection for the ends channel and every replica's notifications;
        subscribed again after Redis comes back."""
        ends = f"{self.prefix}ends".encode()
        note = f"{self.prefix}n:".encode()
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(ends)
                await pubsub.psubscribe(note + b"*")
                self._tried.set()
                while True:
                    message = await pubsub.get_message(timeout=30.0)
                    if message is None or message.get("type") not in ("message", "pmessage"):
                        continue
                    self._heard(message, ends, note)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: try again shortly
                self._tried.set()
                log.debug("session store pub/sub: %s", type(exc).__name__)
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                await asyncio.sleep(self.retry_interval)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.client.aclose()


def _is_closed_connection(exc: Exception) -> bool:
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
    except ImportError:  # pragma: no cover - the redis extra is what makes this store
        return False
    return isinstance(exc, RedisConnectionError)


def _is_answer_error(exc: Exception) -> bool:
    """Redis answered with an error (WRONGTYPE…), or redis-py could not read its answer as
    the command's: not an outage."""
    try:
        from redis.exceptions import DataError, ResponseError
    except ImportError:  # pragma: no cover - the redis extra is what makes this store
        return False
    return isinstance(exc, (ResponseError, DataError, ValueError, TypeError, UnicodeError))
