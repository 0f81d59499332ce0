"""Authentication of clients (Layer 5): bearer JWTs, API keys. Absent: no authentication.

(Section skeleton: the owning layer fills in its settings.)
"""

from __future__ import annotations

from hopline.config.section import Section


class AuthConfig(Section):
    """Authentication of clients (Layer 5): bearer JWTs, API keys. Absent: no authentication."""
