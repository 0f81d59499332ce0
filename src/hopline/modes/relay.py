"""Relay mode (draft §5.1): transport adaptation, protocol-unaware, Layer 1 only.

Its connectors are in compose/connectors.py (``StdioBackends``, ``RemoteBackends``), its
targets in transports/targets.py, :func:`~hopline.transports.pump.pump` in
transports/pump.py; the wiring is still in relay_serve.py.
"""
