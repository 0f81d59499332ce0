"""Hop metadata under the binding's HOP-KEY (draft §12.2), and loop detection.

Each request hopline forwards gets one entry **appended** to the sequence under
HOP-KEY (MCP: ``io.modelcontextprotocol/proxy-hops``, read from the binding, or
configured): ``name``, ``mode``, ``version``, ``timestamp`` (RFC 3339, UTC,
milliseconds) and ``instance``, this process's identity. Earlier entries are kept
exactly as they came; the order of the sequence is the path.

Refused (as the request's fault, -32600, so an upstream breaker does not count it):

- a request whose sequence already holds an entry with this ``instance``: it has
  been here before, so forwarding it again would loop (:class:`LoopDetected`);
- a request whose sequence would exceed ``max_depth`` entries with ours
  (:class:`TooManyHops`; also caps a client that pre-fills 10⁴ fake hops, BAD-15);
- a HOP-KEY value that is not an array: it cannot be appended to, and replacing
  it would erase the path (-32602).

The ``instance`` defaults to a random token per process (two hoplines with the same
configuration must not mistake each other for themselves); set it explicitly to
detect loops across the processes of one deployment.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Callable

from hopline.jsonrpc import InvalidParams, InvalidRequest


class LoopDetected(InvalidRequest):
    def __init__(self, instance: str, depth: int) -> None:
        super().__init__(
            f"request loop: this request already passed through this hopline (instance {instance!r}) "
            f"{depth} hop(s) ago; check the federation's backend URLs",
            data={"reason": "loop", "instance": instance},
        )


class TooManyHops(InvalidRequest):
    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(
            f"request has passed through {depth} intermediaries; at most {limit} are allowed with this one",
            data={"reason": "max_hops", "limit": limit},
        )


_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))  # a timestamp's tail, formatted once


def new_instance_id() -> str:
    return secrets.token_hex(8)


class Hops:
    """Checks and extends one request's hop sequence. Pure apart from the clock."""

    __slots__ = ("key", "name", "mode", "version", "instance", "max_depth", "_clock", "_second", "_stamp")

    def __init__(
        self,
        *,
        key: str,
        name: str,
        mode: str,
        version: str,
        instance: str | None = None,
        max_depth: int = 16,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.key = key
        self.name = name
        self.mode = mode
        self.version = version
        self.instance = instance or new_instance_id()
        self.max_depth = max_depth
        self._clock = clock
        self._second = -1
        self._stamp = ""

    def timestamp(self) -> str:
        second, ms = divmod(round(self._clock() * 1000), 1000)
        if second != self._second:  # formatting the date once a second, not per request
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return self._stamp + _MILLIS[ms]

    def entry(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "version": self.version,
            "timestamp": self.timestamp(),
            "instance": self.instance,
        }

    def incoming(self, meta: dict[str, Any]) -> list[Any]:
        """The sequence this request arrived with, after the loop and depth checks."""
        hops = meta.get(self.key)
        if hops is None:
            return []
        if not isinstance(hops, list):
            raise InvalidParams(f"_meta[{self.key!r}] must be an array of hop entries")
        if len(hops) + 1 > self.max_depth:
            raise TooManyHops(len(hops), self.max_depth)
        for i, hop in enumerate(hops):
            if isinstance(hop, dict) and hop.get("instance") == self.instance:
                raise LoopDetected(self.instance, len(hops) - i)
        return hops

    def extended(self, meta: dict[str, Any], extra: dict[str, Any] | None = None) -> list[Any]:
        """The checked incoming sequence with this hop's entry appended (a new list)."""
        entry = self.entry()
        if extra:
            entry.update(extra)
        return [*self.incoming(meta), entry]

    def stamp(self, meta: dict[str, Any]) -> dict[str, Any]:
        """A new ``_meta`` with this hop appended (for requests outside the call layers,
        e.g. the gateway's own list fetches)."""
        return {**meta, self.key: self.extended(meta)}

    def __repr__(self) -> str:
        return f"<Hops {self.key} {self.name}/{self.mode} instance={self.instance} max={self.max_depth}>"
