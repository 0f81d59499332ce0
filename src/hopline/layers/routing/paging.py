"""Offset paging over a composed list (draft §6.3 fan-out; reference/mcp-wire.md §4
"Pagination applies to every */list").

Contract
- ``page(items, offset, size)`` returns ``(items[offset:offset + size], next)``
  where ``next`` is the offset of the following page, or None when this page
  reaches the end (the caller then omits ``nextCursor``).
- An offset at or past the end gives ``([], None)``: the list may have shrunk
  between pages (a backend relisted), and the client should just see the end.
- A negative offset or a size below 1 is a caller bug: ValueError. Offsets come
  from a cursor the gateway signed (``cursors.py``), never from the client as is.
- Pure; no I/O; never mutates ``items``.
"""

from __future__ import annotations

import operator
from typing import Sequence, TypeVar

T = TypeVar("T")


def page(items: Sequence[T], offset: int, size: int) -> tuple[list[T], int | None]:
    """One page of ``items`` and the offset of the next page (None at the end)."""
    offset, size = operator.index(offset), operator.index(size)
    if offset < 0:
        raise ValueError(f"offset must be >= 0, not {offset}")
    if size < 1:
        raise ValueError(f"page size must be >= 1, not {size}")
    end = offset + size
    return list(items[offset:end]), (end if end < len(items) else None)
