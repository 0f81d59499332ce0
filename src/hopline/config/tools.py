"""Tool modes (Layer 7 progressive disclosure): standard, search, code.

(Section skeleton: the owning layer fills in its settings.)
"""

from __future__ import annotations

from hopline.config.section import Section


class ToolsConfig(Section):
    """Tool modes (Layer 7 progressive disclosure): standard, search, code."""
