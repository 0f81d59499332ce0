"""The composition root: reads the configuration and hands each layer its settings.

This is the only place where ``hopline.config`` meets the layers: the layers under
``hopline.layers`` (and ``hopline.observability``) never import the configuration,
they take the settings they are given here.

- :mod:`.policy`: Layer 5's authorization half (CEL rules, pinning, DLP, rate limits,
  interceptors, audit).
- :mod:`.resilience`: Layer 4 (timeouts, retries, breakers, partial failure).
- :mod:`.toolmodes`: Layer 7's tool modes, a ``ToolPlan`` per endpoint.
- :mod:`.observability`: request log, metrics, trace/hop propagation, spans.
- :mod:`.connectors`: the backend connectors (``StdioBackends``, ``RemoteBackends``): Layer 1
  channels to one backend, sharing connections through Layer 6's id-remapping multiplexer.
- :mod:`.listen`: the client-facing session table a ``listen:`` section bounds.
- :mod:`.transparent`: transparent mode's parts: the level 1 proxy's settings and header
  rules, the level 2 gateway per destination (client credentials, the unverified caller).
"""
