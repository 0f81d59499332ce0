"""Rate-limited warnings for what a peer sends that is not JSON-RPC (issue 13).

Every channel that reads a backend counts such frames (``garbage_frames``) and says so in
the log, but a backend that floods garbage must cost bounded log output: at most ``burst``
lines per ``period`` seconds, then one line with the number suppressed. O(1) state.
"""

from __future__ import annotations

import logging
import time


class RateLimitedLog:
    """At most ``burst`` warnings per ``period`` seconds on ``logger``, then a count of the rest."""

    def __init__(self, logger: logging.Logger, burst: int = 5, period: float = 10.0) -> None:
        self.logger = logger
        self.burst, self.period = burst, period
        self.window_start, self.count, self.suppressed = 0.0, 0, 0

    def warn(self, fmt: str, *args: object) -> None:
        now = time.monotonic()
        if now - self.window_start > self.period:
            if self.suppressed:
                self.logger.warning("... %d similar messages suppressed", self.suppressed)
            self.window_start, self.count, self.suppressed = now, 0, 0
        if self.count < self.burst:
            self.count += 1
            self.logger.warning(fmt, *args)
        else:
            self.suppressed += 1
