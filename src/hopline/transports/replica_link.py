"""A request one replica must hand to another, over Redis pub/sub.

Some state cannot move: a call held open on a handshake-era backend (an MRTR
``requestState`` of hopline's) lives in the replica that opened it. When a client's
retry reaches another replica, that replica hands the request to the one that holds the
call, over the Redis the replicas share, and answers with what it gets back: the client
cannot tell.

Each replica has an id (random, per process) and listens on ``{prefix}r:{id}``. A request
is ``{"k": "req", "id", "from", "to", "t", "body", "who"}`` (``who``: the caller's principal,
its token never included); its answer ``{"k": "res", "id", "to", "body"}`` goes to the
asker's channel. Every envelope is signed (HMAC-SHA256, a key derived from the session
key), so that only replicas of this deployment can hand each other work; a request older
than ``MAX_AGE`` seconds, unsigned, addressed to another replica, or seen before (its id is
remembered until it expires: a captured envelope published again is not run again) is
dropped. The asker waits at most the request's deadline; the replica it names being gone
(nobody subscribed) is an error at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
import time
from typing import Any, Awaitable, Callable

import orjson

from hopline.jsonrpc import UnavailableError

__all__ = ["ReplicaLink"]

log = logging.getLogger("hopline.http")

MAX_AGE = 30.0  # seconds a forwarded request stays acceptable
MAX_WAITING = 1024  # forwarded requests in flight from this replica
MAX_SEEN = 65_536  # request ids remembered until they expire (a replay is refused)

Handler = Callable[[dict[str, Any], dict[str, Any], float], Awaitable[dict[str, Any]]]


class ReplicaLink:
    """This replica's end: :meth:`forward` asks another; ``handler`` serves what others ask."""

    def __init__(self, client: Any, *, secret: bytes, prefix: str = "hopline:", timeout: float = 0.25) -> None:
        self.client = client
        self.replica = secrets.token_hex(8)
        self.prefix = prefix
        self.timeout = timeout
        self.handler: Handler | None = None
        self._key = hashlib.sha256(b"hopline replicas\0" + secret).digest()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._task: asyncio.Task | None = None
        self._ready = asyncio.Event()
        self._running: set[asyncio.Task] = set()
        self._seen: dict[str, float] = {}  # request ids served, until they expire
        self.refused = 0  # envelopes dropped: unsigned, replayed, expired or addressed to another replica

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> ReplicaLink:
        from hopline.redis_client import connect

        return cls(connect(url, kwargs.get("timeout", 0.25)), **kwargs)

    def _channel(self, replica: str) -> str:
        return f"{self.prefix}r:{replica}"

    def _sign(self, envelope: dict[str, Any]) -> bytes:
        data = orjson.dumps(envelope)
        return hmac.new(self._key, data, hashlib.sha256).digest() + data

    def _open(self, raw: bytes) -> dict[str, Any] | None:
        sig, data = raw[:32], raw[32:]
        if not hmac.compare_digest(sig, hmac.new(self._key, data, hashlib.sha256).digest()):
            return None
        try:
            envelope = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        return envelope if isinstance(envelope, dict) else None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._listen(), name="replica-link")

    async def ready(self, timeout: float) -> None:
        """Listening (at most ``timeout`` seconds): before this replica hands out a state
        that names it, so that a retry elsewhere finds it subscribed."""
        self.start()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._ready.wait()

    async def forward(
        self, replica: str, body: dict[str, Any], who: dict[str, Any], timeout: float | None, what: str = "call"
    ) -> dict[str, Any]:
        """The answer replica ``replica`` gives to ``body``, asked as ``who`` (``what`` it
        holds, for the errors: a held call, a task), within ``timeout`` seconds (the
        exchange's; ``None``: :data:`MAX_AGE`, as long as the holder would work on it)."""
        timeout = MAX_AGE if timeout is None else min(timeout, MAX_AGE)
        if len(self._waiting) >= MAX_WAITING:
            raise UnavailableError("too many requests handed to other replicas at once; retry shortly")
        await self.ready(min(timeout, 1.0))
        rid = secrets.token_hex(12)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        envelope = {
            "k": "req",
            "id": rid,
            "from": self.replica,
            "to": replica,
            "t": time.time(),
            "body": body,
            "who": who,
        }
        try:
            try:
                async with asyncio.timeout(self.timeout):
                    heard = await self.client.publish(self._channel(replica), self._sign(envelope))
            except Exception as exc:  # Redis down
                why = type(exc).__name__
                raise UnavailableError(
                    f"this {what} is held by another replica and the session store is unreachable ({why})"
                ) from None
            if not heard:
                raise UnavailableError(f"the replica holding this {what} is gone; start the {what} again")
            try:
                async with asyncio.timeout(timeout):
                    return await future
            except TimeoutError:
                raise UnavailableError(f"the replica holding this {what} did not answer in time") from None
        finally:
            self._waiting.pop(rid, None)

    async def _listen(self) -> None:
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel(self.replica))
                self._ready.set()
                while True:
                    message = await pubsub.get_message(timeout=30.0)
                    if message is None or message.get("type") != "message":
                        continue
                    envelope = self._open(message["data"])
                    if envelope is None:
                        self.refused += 1
                        log.warning("replica link: dropped a message that is not signed with this deployment's key")
                    elif envelope.get("to") != self.replica:
                        self.refused += 1
                        log.warning("replica link: dropped a message addressed to another replica")
                    elif envelope.get("k") == "res":
                        future = self._waiting.get(str(envelope.get("id")))
                        if future is not None and not future.done() and isinstance(envelope.get("body"), dict):
                            future.set_result(envelope["body"])
                    elif envelope.get("k") == "req" and self._first(envelope):
                        task = asyncio.get_running_loop().create_task(self._serve(envelope))
                        self._running.add(task)
                        task.add_done_callback(self._running.discard)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: subscribe again shortly
                self._ready.set()  # askers find out for themselves (publish fails)
                log.debug("replica link: %s", type(exc).__name__)
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                await asyncio.sleep(1.0)

    def _first(self, envelope: dict[str, Any]) -> bool:
        """A signed request not yet served and not expired; its id remembered until it expires."""
        now = time.time()
        sent = envelope.get("t")
        rid = f"{envelope.get('from')}/{envelope.get('id')}"
        if not isinstance(sent, (int, float)) or not now - MAX_AGE < sent < now + MAX_AGE:
            self.refused += 1
            return False
        if rid in self._seen:
            self.refused += 1
            log.warning("replica link: dropped a request already served (a replay)")
            return False
        if len(self._seen) >= MAX_SEEN:
            self._seen = {r: until for r, until in self._seen.items() if until > now}
            if len(self._seen) >= MAX_SEEN:  # full of live ids: refused, never forgotten early
                self.refused += 1
                log.warning("replica link: too many requests handed over within %g s; one was dropped", MAX_AGE)
                return False
        self._seen[rid] = sent + MAX_AGE
        return True

    async def _serve(self, envelope: dict[str, Any]) -> None:
        body = envelope.get("body")
        if self.handler is None or not isinstance(body, dict):
            return
        try:
            answer = await self.handler(body, envelope.get("who") or {}, MAX_AGE)
        except Exception as exc:  # a bug here must not kill the link
            log.exception("replica link: a forwarded request failed")
            answer = {"jsonrpc": "2.0", "id": body.get("id"), "error": {"code": -32603, "message": type(exc).__name__}}
        reply = {"k": "res", "id": envelope.get("id"), "to": envelope.get("from"), "body": answer}
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.timeout):
                await self.client.publish(self._channel(str(envelope.get("from"))), self._sign(reply))

    async def aclose(self) -> None:
        for task in [self._task, *self._running]:
            if task is not None:
                task.cancel()
        await self.client.aclose()
