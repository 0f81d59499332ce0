"""A sliding time window of two counters, in buckets (no timers, no I/O).

Used twice: by the breaker for (calls, failures) and by the retry budget for
(requests, retries). The window is ``buckets`` slices of ``width / buckets``
seconds; reading or adding first zeroes the slices that time has left behind, so
the cost is O(1) amortised and the clock is whatever the caller injects.
"""

from __future__ import annotations

from typing import Callable


class Window:
    __slots__ = ("_clock", "_slice", "_a", "_b", "_head", "_n")

    def __init__(self, width: float, clock: Callable[[], float], buckets: int = 10) -> None:
        if width <= 0 or buckets < 1:
            raise ValueError("a window needs a positive width and at least one bucket")
        self._clock = clock
        self._n = buckets
        self._slice = width / buckets
        self._a = [0] * buckets
        self._b = [0] * buckets
        self._head = int(clock() // self._slice)

    def _roll(self) -> int:
        now = int(self._clock() // self._slice)
        if now != self._head:
            self._advance(now)
        return now % self._n

    def _advance(self, now: int) -> None:
        """Zero the slices time has left behind since the head, and move the head to ``now``."""
        stale = min(now - self._head, self._n) if now > self._head else self._n
        for step in range(1, stale + 1):
            i = (self._head + step) % self._n
            self._a[i] = self._b[i] = 0
        self._head = now

    def add(self, a: int = 0, b: int = 0) -> None:
        # >> inlined copy of _roll (a Python call per add fewer); tests/transports/test_inlined_equivalence.py
        now = int(self._clock() // self._slice)
        if now != self._head:
            self._advance(now)
        i = now % self._n
        # << end of the copy of _roll
        self._a[i] += a
        self._b[i] += b

    def totals(self) -> tuple[int, int]:
        self._roll()
        return sum(self._a), sum(self._b)

    def clear(self) -> None:
        self._a = [0] * self._n
        self._b = [0] * self._n

    def __repr__(self) -> str:
        a, b = self.totals()
        return f"<Window {a}/{b}>"
