"""Observability: trace context, hop metadata, metrics, logs, OpenTelemetry.

(Section skeleton: the owning layer fills in its settings.)
"""

from __future__ import annotations

from hopline.config.section import Section


class ObservabilityConfig(Section):
    """Observability: trace context, hop metadata, metrics, logs, OpenTelemetry."""
