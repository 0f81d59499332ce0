"""Authorization and the interceptor chain (Layer 5): CEL rules, rate limits, pinning, DLP, audit.

(Section skeleton: the owning layer fills in its settings.)
"""

from __future__ import annotations

from hopline.config.section import Section


class PolicyConfig(Section):
    """Authorization and the interceptor chain (Layer 5): CEL rules, rate limits, pinning, DLP, audit."""
