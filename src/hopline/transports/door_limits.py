"""The front door's bounds and counters as plain data (transports/front_door.py uses them).

Kept apart from the protocol so that command-line parsers and the composition root can name
the defaults without importing uvicorn.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DoorLimits:
    """The bounds of one listener (what each means: transports/front_door.py); the defaults suit a \
production gateway."""

    max_connections: int = 4096
    max_connections_per_source: int = 256
    idle_timeout: float = 15.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    max_url_bytes: int = 8 * 1024


class DoorCounters:
    """What the front door did, per reason (cheap attributes; ``open`` is the current count)."""

    __slots__ = (
        "open",
        "accepted",
        "over_total",
        "over_source",
        "idle_reaped",
        "header_timeout",
        "body_timeout",
        "header_too_large",
        "too_many_headers",
        "url_too_long",
    )

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}
