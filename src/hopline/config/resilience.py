"""Resilience (Layer 4): timeouts, retries, circuit breakers, partial failure.

(Section skeleton: the owning layer fills in its settings.)
"""

from __future__ import annotations

from hopline.config.section import Section


class ResilienceConfig(Section):
    """Resilience (Layer 4): timeouts, retries, circuit breakers, partial failure."""
