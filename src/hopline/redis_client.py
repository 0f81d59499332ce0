"""The one way hopline opens Redis (the redis extra): rate limits, replicas' shared state.

Every operation of the client gives up after ``timeout`` seconds, connecting included, and
is not retried on a timeout: a store that does not answer is down, and each caller says
what that means for its client (an answer at once, never a hang).
"""

from __future__ import annotations

from typing import Any


def connect(url: str, timeout: float) -> Any:
    """A ``redis.asyncio.Redis`` for ``url`` (redis://, rediss:// or unix://)."""
    import redis.asyncio

    return redis.asyncio.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False
    )
