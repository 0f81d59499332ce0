"""Rate limiting: token buckets keyed by principal, backend and tool (Layer 5).

An interceptor (chain.py) at **post-route**, after the visibility guard — so a hidden
tool is refused as unknown before it can spend, or reveal itself through, a token.
Only client invokes (``to_backend``) are limited.

Each configured :class:`Limit` that applies to a call (its ``backends``, ``tools`` and
``methods`` filters, when set, all match) names one bucket: the limit's name plus the
values of its ``per`` dimensions (``principal`` = issuer and subject, ``backend``,
``tool`` = the backend's own tool/prompt name or URI). A bucket holds up to ``burst``
tokens and refills at ``rate`` per second; a call takes one token from *every*
applicable bucket or from none (all-or-nothing, so a refusal by one limit never
drains another). Over the limit: :class:`RateLimited`, a JSON-RPC error whose
``data.retryAfter`` says in seconds when the call would pass.

Stores
- :class:`MemoryStore`: one process; buckets in a bounded dict (the oldest bucket is
  dropped first, which can only forgive, never over-refuse).
- :class:`RedisStore`: several replicas share buckets in Redis; one atomic Lua script
  per call (read, refill, check and take every bucket of the call). Time comes from
  the replica's clock (injectable), so replicas need synchronised clocks. A key lives
  for one full refill after its last use. When Redis does not answer within
  ``timeout`` the configured fail mode applies — ``open`` (allow) or ``closed``
  (:class:`~hopline.jsonrpc.UnavailableError`, reason ``rate_limit_unavailable``) —
  for ``retry_interval`` seconds before Redis is tried again; the outage and the
  recovery are each logged once. In a Redis Cluster the buckets of one call must share
  a slot; hopline does not add hash tags (a single server or a primary/replica pair is
  what this is tested with).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal, Protocol, Sequence

from hopline.jsonrpc import HoplineError, Id, UnavailableError
from hopline.layers.policy.chain import Decision, PostRoute, reject

log = logging.getLogger("hopline.policy")

Dimension = Literal["principal", "backend", "tool"]
SEP = "\x1f"  # cannot occur in a backend id, and keeps "a|b"+"c" apart from "a"+"b|c"


class RateLimited(HoplineError):
    """Over a rate limit; ``data.retryAfter`` is in seconds. (Proposed for jsonrpc.py.)"""

    code = -31004
    http_status = 200  # a JSON-RPC answer: the client's own HTTP exchange worked

    def __init__(self, retry_after: float, *, limit: str, request_id: Id | None = None) -> None:
        super().__init__(
            f"Rate limit exceeded ({limit}); retry after {retry_after:g} s",
            data={"reason": "rate_limited", "limit": limit, "retryAfter": retry_after},
            request_id=request_id,
        )


@dataclass(frozen=True, slots=True)
class Limit:
    name: str
    per: tuple[Dimension, ...]
    rate: float  # tokens per second
    burst: float
    backends: frozenset[str] | None = None
    tools: frozenset[str] | None = None
    methods: frozenset[str] | None = None

    def applies(self, view: PostRoute) -> bool:
        return (
            (self.backends is None or view.backend in self.backends)
            and (self.tools is None or view.target in self.tools)
            and (self.methods is None or view.method in self.methods)
        )

    def key(self, view: PostRoute) -> str:
        parts = [self.name]
        for dim in self.per:
            if dim == "principal":
                parts.append(f"{view.principal.issuer or ''}{SEP}{view.principal.subject}")
            elif dim == "backend":
                parts.append(view.backend)
            else:
                parts.append(view.target or "")
        return SEP.join(parts)


Bucket = tuple[str, float, float]  # key, rate, burst


class Store(Protocol):
    async def take(self, buckets: Sequence[Bucket]) -> tuple[float, int] | None:
        """Take one token from every bucket, or none: ``(0, -1)`` when taken, else
        ``(seconds to wait, index of the bucket that refused)``; ``None``: the store is
        unavailable and fails closed."""


class MemoryStore:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000) -> None:
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: dict[str, list[float]] = {}  # key → [tokens, updated at]

    async def take(self, buckets: Sequence[Bucket]) -> tuple[float, int]:
        return self.take_now(buckets)

    def take_now(self, buckets: Sequence[Bucket]) -> tuple[float, int]:
        now = self._clock()
        states = []
        wait, refused = 0.0, -1
        for i, (key, rate, burst) in enumerate(buckets):
            state = self._buckets.get(key)
            tokens = burst if state is None else min(burst, state[0] + max(0.0, now - state[1]) * rate)
            states.append(tokens)
            if tokens < 1.0 and (1.0 - tokens) / rate > wait:
                wait, refused = (1.0 - tokens) / rate, i
        if refused >= 0:
            return wait, refused
        for (key, _rate, _burst), tokens in zip(buckets, states):
            if key not in self._buckets and len(self._buckets) >= self._max_keys:
                del self._buckets[next(iter(self._buckets))]
            self._buckets[key] = [tokens - 1.0, now]
        return 0.0, -1

    def __repr__(self) -> str:
        return f"<MemoryStore {len(self._buckets)} buckets>"


# KEYS: the buckets; ARGV: now, then rate and burst per bucket. Returns {wait, index}:
# wait "0" when every bucket gave a token (index 0), else the seconds until the
# refusing bucket (1-based index) would have one; nothing is taken then.
_LUA = """
local now = tonumber(ARGV[1])
local wait, refused = 0, 0
local tokens = {}
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  local state = redis.call('HMGET', key, 't', 'ts')
  local t, ts = tonumber(state[1]), tonumber(state[2])
  if t == nil or ts == nil then
    t = burst
  elseif now > ts then
    t = math.min(burst, t + (now - ts) * rate)
  end
  tokens[i] = t
  if t < 1 and (1 - t) / rate > wait then
    wait, refused = (1 - t) / rate, i
  end
end
if refused == 0 then
  for i, key in ipairs(KEYS) do
    local rate = tonumber(ARGV[2 * i])
    local burst = tonumber(ARGV[2 * i + 1])
    redis.call('HSET', key, 't', tostring(tokens[i] - 1), 'ts', ARGV[1])
    redis.call('PEXPIRE', key, math.ceil(burst / rate * 1000) + 1000)
  end
end
return {tostring(wait), refused}
"""


class RedisStore:
    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "hopline:rl:",
        timeout: float = 0.25,
        on_unavailable: Literal["open", "closed"] = "open",
        retry_interval: float = 1.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client  # a redis.asyncio.Redis
        self.prefix = prefix
        self.timeout = timeout
        self.on_unavailable = on_unavailable
        self.retry_interval = retry_interval
        self._clock = clock
        self._monotonic = monotonic
        self._script = client.register_script(_LUA)
        self._down_until: float | None = None  # monotonic time before which Redis is not tried

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisStore:
        from hopline.redis_client import connect

        return cls(connect(url, kwargs.get("timeout", 0.25)), **kwargs)

    async def take(self, buckets: Sequence[Bucket]) -> tuple[float, int] | None:
        if self._down_until is not None and self._monotonic() < self._down_until:
            return self._unavailable()
        args: list[Any] = [repr(self._clock())]
        for _key, rate, burst in buckets:
            args += [repr(rate), repr(burst)]
        try:
            async with asyncio.timeout(self.timeout):
                wait, refused = await self._script(keys=[self.prefix + key for key, _, _ in buckets], args=args)
        except Exception as exc:  # redis errors, OSError, timeouts: the store is down
            if self._down_until is None:
                log.warning(
                    "rate limit store unreachable (%s); failing %s until it answers",
                    type(exc).__name__,
                    self.on_unavailable,
                )
            self._down_until = self._monotonic() + self.retry_interval
            return self._unavailable()
        if self._down_until is not None:
            log.warning("rate limit store reachable again")
            self._down_until = None
        return float(wait), int(refused) - 1

    def _unavailable(self) -> tuple[float, int] | None:
        return (0.0, -1) if self.on_unavailable == "open" else None

    async def aclose(self) -> None:
        await self.client.aclose()

    def __repr__(self) -> str:
        return (
            f"<RedisStore {self.prefix!r} fail-{self.on_unavailable}{' down' if self._down_until is not None else ''}>"
        )


class RateLimiter:
    """The rate-limit interceptor (``name = "rate_limit"``)."""

    name = "rate_limit"

    def __init__(self, limits: Sequence[Limit], store: Store) -> None:
        self.limits = list(limits)
        self.store = store

    async def post_route(self, view: PostRoute) -> Decision | None:
        if view.direction != "to_backend":
            return None
        applying = [limit for limit in self.limits if limit.applies(view)]
        if not applying:
            return None
        taken = await self.store.take([(limit.key(view), limit.rate, limit.burst) for limit in applying])
        if taken is None:
            error = UnavailableError(
                "rate limiting is unavailable; try again shortly", backend=view.backend, reason="rate_limit_unavailable"
            )
            return reject(error, reason="rate limit store unavailable (fail closed)")
        wait, refused = taken
        if refused < 0:
            return None
        limit = applying[refused]
        retry_after = math.ceil(wait * 1000) / 1000
        return reject(
            RateLimited(retry_after, limit=limit.name), reason=f"over limit {limit.name}", retryAfter=retry_after
        )

    def __repr__(self) -> str:
        return f"<RateLimiter {[lim.name for lim in self.limits]} {self.store!r}>"
