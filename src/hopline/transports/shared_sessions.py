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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Callable, Protocol

import orjson

__all__ = ["MemorySessions", "RedisSessions", "SharedSessions", "StoreUnavailable", "STANDING"]

log = logging.getLogger("hopline.http")

# The client requests a resumed session must see again, and how each is keyed.
STANDING = frozenset({"resources/subscribe", "resources/unsubscribe", "logging/setLevel"})
MAX_STANDING = 256  # standing requests kept per session (subscriptions, level)


class StoreUnavailable(Exception):
    """The shared store did not answer in time."""


def standing_field(method: str, params: dict[str, Any]) -> tuple[str, bytes | None]:
    """The field a standing request sets (None: deletes) in its session's hash."""
    if method == "logging/setLevel":
        return "level", orjson.dumps({"method": method, "params": params})
    uri = str(params.get("uri", ""))
    if method == "resources/unsubscribe":
        return "sub:" + uri, None
    return "sub:" + uri, orjson.dumps({"method": "resources/subscribe", "params": {"uri": uri}})


class SharedSessions(Protocol):
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
    """The store shared by replicas, in Redis (redis-py's asyncio client)."""

    def __init__(
        self, client: Any, *, prefix: str = "hopline:", timeout: float = 0.25, retry_interval: float = 1.0
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.timeout = timeout
        self.retry_interval = retry_interval
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
                result = await what()
        except Exception as exc:  # redis errors, OSError, timeouts: the store is down
            if self._down_until is None:
                log.warning("session store unreachable (%s)", type(exc).__name__)
            self._down_until = time.monotonic() + self.retry_interval
            raise StoreUnavailable(f"the session store is unreachable ({type(exc).__name__})") from None
        if self._down_until is not None:
            log.warning("session store reachable again")
            self._down_until = None
        return result

    async def is_ended(self, sid: str) -> bool:
        return bool(await self._call(lambda: self.client.exists(f"{self.prefix}end:{sid}")))

    async def end(self, sid: str, ttl: float) -> None:
        async def run() -> None:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.set(f"{self.prefix}end:{sid}", b"1", ex=max(1, int(ttl)))
                pipe.delete(f"{self.prefix}s:{sid}")
                pipe.publish(f"{self.prefix}ends", sid)
                await pipe.execute()

        await self._call(run)

    async def record(self, sid: str, method: str, params: dict[str, Any], ttl: float) -> None:
        field, value = standing_field(method, params)
        key = f"{self.prefix}s:{sid}"

        async def run() -> None:
            if value is None:
                await self.client.hdel(key, field)
                return
            if await self.client.hlen(key) >= MAX_STANDING and not await self.client.hexists(key, field):
                return
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hset(key, field, value)
                pipe.expire(key, max(1, int(ttl)))
                await pipe.execute()

        await self._call(run)

    async def standing(self, sid: str) -> list[dict[str, Any]]:
        values = await self._call(lambda: self.client.hvals(f"{self.prefix}s:{sid}"))
        return [orjson.loads(v) for v in values]

    async def publish(self, sid: str, data: bytes) -> bool:
        """Send ``data`` to the replica holding ``sid``'s GET stream; False if none listens."""
        try:
            return bool(await self._call(lambda: self.client.publish(f"{self.prefix}n:{sid}", data)))
        except StoreUnavailable:
            return False

    def listen(self, sid: str, deliver: Callable[[bytes], None]) -> Callable[[], None]:
        """Deliver what other replicas publish for ``sid`` while this replica holds its GET
        stream; the answer stops it. Every replica receives every such message (one
        pattern subscription, made before its first session: no subscription to wait
        for per stream) and keeps those it has a listener for."""
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
                    channel = message["channel"]
                    if channel == ends:
                        sid = message["data"].decode()
                        for ended in self._ends:
                            ended(sid)
                    else:
                        deliver = self._listeners.get(channel[len(note) :].decode())
                        if deliver is not None:
                            deliver(message["data"])
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
