"""Conversion mode (draft §5.7): an OpenAPI description served as an MCP server, a
translation sublayer between Layers 1 and 2. It runs inside a gateway (a backend with
``openapi:``), so its deployments are also Forward or Reverse ones.
"""

from __future__ import annotations

from hopline.composition import Composition, layer

COMPOSITION = Composition(
    mode="conversion",
    section="§5.7",
    handshake="dual-handshake (converted capabilities)",
    layers=(
        layer(1, "conversion.server", "conversion.netguard"),
        layer(2, "conversion.document", "conversion.operations"),
        layer(3, "conversion.refs"),
    ),
)
