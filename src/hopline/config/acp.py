"""An ACP proxy chain conducted by `hopline acp --config FILE`.

(Section skeleton: the owning layer fills in its settings.)
"""

from __future__ import annotations

from hopline.config.section import Section


class AcpConfig(Section):
    """An ACP proxy chain conducted by `hopline acp --config FILE`."""
