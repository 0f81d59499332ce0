"""Who owns each task the gateway exposed, and where it lives (Layer 6; reference/mcp-wire.md §8).

A backend mints its task ids, often guessably (``task-1``, ``task-2``), and several callers
may reach one backend through the same credential, so the backend cannot tell them apart.
The gateway therefore exposes ids of its own (:func:`mint`: 128 random bits; in Forward
mode with the backend id in front so the route stays readable) and keeps, per exposed id, a
:class:`TaskRecord`: the backend, the backend's own id, the owner and the tool that
created it. Every ``tasks/*`` request is resolved through the record, and a record whose
owner is not the caller is answered exactly like a task that does not exist.

The owner (:func:`owner_of`) is the authenticated principal (issuer and subject) or, where
nobody authenticated, the client session. A 2026-07-28 request with no principal has no
session either: its tasks are bound to ``anonymous`` and the unguessable id is the only
capability (the extension's own model; documented in the README).

:class:`TaskStore` is the seam: four async methods, so that a store shared between
replicas (Redis, issue 15) can replace :class:`MemoryTaskStore`, which is the default
for one process. The composition root hands the store in (``compose/gateway.py``).

Contract of a store
- ``put(task, record, ttl)`` keeps the record for ``ttl`` seconds (then it is gone, as if
  deleted); ``get(task)`` is the record or None; ``delete(task)`` forgets it (no error if
  absent); ``owned(owner, limit)`` is at most ``limit`` of that owner's live records, oldest
  first, as ``(task, record)`` pairs.
- Bounded: a store holds at most ``max_tasks`` records and ``max_per_owner`` per owner; a
  ``put`` past a bound drops the oldest record (of that owner first). A dropped task is
  unknown from then on: fail closed, never another caller's.
- Records are plain data (:meth:`TaskRecord.as_dict` / :meth:`TaskRecord.of`) so that a
  shared store can serialise them.

Sans-io: no sockets, no timers (expiry is checked when a record is read or the store is
full); the clock is injectable for tests. :class:`RedisTaskStore`, for replicas, talks to
the Redis client it is handed (as the rate limits' store does): a record is a key
``{prefix}task:{id}`` with the record's TTL, each owner's tasks a sorted set
``{prefix}tasks:{owner}`` (oldest first, capped at ``max_per_owner``); the whole is
bounded by those TTLs and caps. Redis down: the task request gets a clear error
(UnavailableError), never another caller's task. Each record is signed (HMAC-SHA256 with a
key derived from the session key, bound to its task id): a record someone with write
access to Redis wrote or rewrote (another owner, another backend task) is an unknown task,
logged and counted (``forged``), never another caller's.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Callable, Protocol

import orjson

from hopline.context import Principal
from hopline.jsonrpc import UnavailableError

log = logging.getLogger("hopline.gateway")


@dataclass(frozen=True, slots=True)
class TaskRecord:
    backend: str  # the operator-assigned backend id
    task_id: str  # the backend's own task id
    owner: str  # owner_of(...) of the caller that created it
    tool: str = ""  # the backend's own name of the tool whose call created it (policy rules see it)
    era: str = "modern"  # "modern" (the 2026-07-28 extension) or "handshake" (2025-11-25 tasks)
    replica: str = ""  # the replica whose own backend (a stdio child) holds it; "" where any replica reaches it

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def of(cls, data: dict[str, Any]) -> TaskRecord:
        return cls(**{k: str(data[k]) for k in ("backend", "task_id", "owner", "tool", "era", "replica") if k in data})


class TaskStore(Protocol):
    """Exposed task id → :class:`TaskRecord`, with a TTL and bounded in size."""

    async def get(self, task: str) -> TaskRecord | None: ...

    async def put(self, task: str, record: TaskRecord, ttl: float) -> None: ...

    async def delete(self, task: str) -> None: ...

    async def owned(self, owner: str, limit: int) -> list[tuple[str, TaskRecord]]: ...


def owner_of(principal: Principal, session: str | None) -> str:
    """The key a task is bound to: the principal when one authenticated (it has an issuer),
    else the client session (``None``: a 2026-07-28 request, which has none)."""
    if principal.issuer is not None:
        return f"principal:{principal.issuer}:{principal.subject}"
    return f"session:{session}" if session is not None else "anonymous"


def mint() -> str:
    """The gateway's part of a fresh exposed task id: 128 random bits (routing puts the
    backend id in front in Forward mode, ``layers/routing/tasks.py``)."""
    return secrets.token_urlsafe(16)


class MemoryTaskStore:
    """The one-process :class:`TaskStore`: a dict in insertion order, expiry checked on read."""

    def __init__(
        self, *, max_tasks: int = 10_000, max_per_owner: int = 1_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_tasks < 1 or max_per_owner < 1:
            raise ValueError("a task store holds at least one task")
        self.max_tasks = max_tasks
        self.max_per_owner = max_per_owner
        self._clock = clock
        self._records: OrderedDict[str, tuple[TaskRecord, float]] = OrderedDict()
        self._by_owner: dict[str, OrderedDict[str, None]] = {}
        self.dropped = 0  # records dropped to keep a bound (expired ones are not counted)

    async def get(self, task: str) -> TaskRecord | None:
        entry = self._records.get(task)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            self._forget(task)
            return None
        return entry[0]

    async def put(self, task: str, record: TaskRecord, ttl: float) -> None:
        self._forget(task)
        mine = self._by_owner.setdefault(record.owner, OrderedDict())
        if len(mine) >= self.max_per_owner:
            self._drop(next(iter(mine)))
        if len(self._records) >= self.max_tasks:
            self._expire()
            if len(self._records) >= self.max_tasks:
                self._drop(next(iter(self._records)))
        self._records[task] = (record, self._clock() + max(ttl, 0.0))
        self._by_owner.setdefault(record.owner, OrderedDict())[task] = None

    async def delete(self, task: str) -> None:
        self._forget(task)

    async def owned(self, owner: str, limit: int) -> list[tuple[str, TaskRecord]]:
        out: list[tuple[str, TaskRecord]] = []
        for task in list(self._by_owner.get(owner, ())):
            record = await self.get(task)
            if record is not None:
                out.append((task, record))
                if len(out) >= limit:
                    break
        return out

    def __len__(self) -> int:
        return len(self._records)

    def _drop(self, task: str) -> None:
        self.dropped += 1
        self._forget(task)

    def _expire(self) -> None:
        now = self._clock()
        for task in [t for t, (_, expires) in self._records.items() if expires <= now]:
            self._forget(task)

    def _forget(self, task: str) -> None:
        entry = self._records.pop(task, None)
        if entry is None:
            return
        mine = self._by_owner.get(entry[0].owner)
        if mine is not None:
            mine.pop(task, None)
            if not mine:
                del self._by_owner[entry[0].owner]

    def __repr__(self) -> str:
        return f"<MemoryTaskStore {len(self._records)}/{self.max_tasks} tasks, {self.dropped} dropped>"


class RedisTaskStore:
    """The :class:`TaskStore` replicas share, in Redis (redis-py's asyncio client); ``keys``:
    the session keys (the first signs the records; all are accepted, for rotation)."""

    def __init__(
        self,
        client: Any,
        *,
        keys: list[bytes] | None = None,
        prefix: str = "hopline:",
        timeout: float = 0.25,
        max_per_owner: int = 1_000,
    ):
        self.client = client
        self.prefix = prefix
        self.timeout = timeout
        self.max_per_owner = max_per_owner
        self._keys = (
            [hashlib.sha256(b"hopline tasks\0" + k).digest() for k in keys] if keys else [secrets.token_bytes(32)]
        )
        self.forged = 0  # records read and refused: not signed with the session key for their task id

    def _mac(self, key: bytes, task: str, data: bytes) -> bytes:
        return hmac.new(key, task.encode() + b"\0" + data, hashlib.sha256).digest()

    def _signed(self, task: str, record: TaskRecord) -> bytes:
        data = orjson.dumps(record.as_dict())
        return self._mac(self._keys[0], task, data) + data

    def _record(self, task: str, raw: Any) -> TaskRecord | None:
        """The record in ``raw`` if hopline wrote it for ``task``; None (logged, counted) otherwise."""
        if isinstance(raw, bytes) and len(raw) > 32:
            mac, data = raw[:32], raw[32:]
            if any(hmac.compare_digest(mac, self._mac(k, task, data)) for k in self._keys):
                return TaskRecord.of(orjson.loads(data))
        self.forged += 1
        log.warning("task store: a record not signed with the session key was refused (an unknown task)")
        return None

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisTaskStore:
        from hopline.redis_client import connect

        return cls(connect(url, kwargs.get("timeout", 0.25)), **kwargs)

    async def _run(self, what: Callable[[], Any]) -> Any:
        try:
            async with asyncio.timeout(self.timeout):
                return await what()
        except Exception as exc:  # redis errors, OSError, timeouts: the store is down
            raise UnavailableError(
                f"the task store is unreachable ({type(exc).__name__}); retry shortly", reason="task_store"
            ) from None

    async def get(self, task: str) -> TaskRecord | None:
        raw = await self._run(lambda: self.client.get(f"{self.prefix}task:{task}"))
        return self._record(task, raw) if raw is not None else None

    async def put(self, task: str, record: TaskRecord, ttl: float) -> None:
        owned = f"{self.prefix}tasks:{record.owner}"
        ms = max(1, int(ttl * 1000))

        async def run() -> None:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(f"{self.prefix}task:{task}", self._signed(task, record), px=ms)
                pipe.zadd(owned, {task: time.time()})
                pipe.pexpire(owned, ms, gt=True)
                pipe.zcard(owned)
                *_, size = await pipe.execute()
            if size > self.max_per_owner:  # the oldest go: unknown from now on (fail closed)
                dropped = await self.client.zpopmin(owned, size - self.max_per_owner)
                if dropped:
                    await self.client.delete(*(f"{self.prefix}task:{t.decode()}" for t, _ in dropped))

        await self._run(run)

    async def delete(self, task: str) -> None:
        async def run() -> None:
            raw = await self.client.getdel(f"{self.prefix}task:{task}")
            record = self._record(task, raw) if raw is not None else None
            if record is not None:
                await self.client.zrem(f"{self.prefix}tasks:{record.owner}", task)

        await self._run(run)

    async def owned(self, owner: str, limit: int) -> list[tuple[str, TaskRecord]]:
        async def run() -> list[tuple[str, TaskRecord]]:
            tasks = [t.decode() for t in await self.client.zrange(f"{self.prefix}tasks:{owner}", 0, limit - 1)]
            if not tasks:
                return []
            raws = await self.client.mget([f"{self.prefix}task:{t}" for t in tasks])
            found = [(t, self._record(t, r) if r is not None else None) for t, r in zip(tasks, raws)]
            # expired, unsigned, or put again for another owner: out of this owner's set too (never another's record)
            gone = [t for t, rec in found if rec is None or rec.owner != owner]
            if gone:
                await self.client.zrem(f"{self.prefix}tasks:{owner}", *gone)
            return [(t, rec) for t, rec in found if rec is not None and rec.owner == owner]  # signed, the owner's

        return await self._run(run)

    async def aclose(self) -> None:
        await self.client.aclose()

    def __repr__(self) -> str:
        return f"<RedisTaskStore {self.prefix!r}>"
