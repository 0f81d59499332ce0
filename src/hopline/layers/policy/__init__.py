"""Layer 5: policy (authentication, token propagation, authorization, audit, rate limits, pinning, DLP)."""
