"""Version mediation for Multi Round-Trip Requests (reference/mcp-wire.md §9 "MRTR").

A handshake-era client cannot read a 2026-07-28 ``input_required`` result, but it can
answer server→client requests. :func:`mediate` turns each entry of
``inputRequests`` into such a request (``ask``), and retries the original call with
``inputResponses`` and the opaque ``requestState`` echoed unchanged, until the
backend gives a final result (bounded rounds).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from hopline.jsonrpc import Message, UnavailableError

ROUNDS = 8

Ask = Callable[[str, Any], Awaitable[Message]]
Retry = Callable[[dict[str, Any]], Awaitable[Message]]


async def mediate(ask: Ask, retry: Retry, params: dict[str, Any], answer: Message, *, backend: str) -> Message:
    for _ in range(ROUNDS):
        value = answer.body.get("result")
        if not isinstance(value, dict) or value.get("resultType") != "input_required":
            return answer
        asks = {k: r for k, r in (value.get("inputRequests") or {}).items() if isinstance(r, dict)}
        replies = await asyncio.gather(*(ask(r.get("method", ""), r.get("params")) for r in asks.values()))
        again: dict[str, Any] = {
            **params,
            "inputResponses": {key: reply.body.get("result", {}) for key, reply in zip(asks, replies)},
        }
        if "requestState" in value:
            again["requestState"] = value["requestState"]
        answer = await retry(again)
    raise UnavailableError(
        f"backend {backend} kept asking for input after {ROUNDS} rounds", backend=backend, reason="input_required_loop"
    )
