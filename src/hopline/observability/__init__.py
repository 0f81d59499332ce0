"""Observability (cross-cutting, draft §12): trace context, hop metadata, metrics, logs, spans.

- :mod:`.trace`: W3C ``traceparent``/``tracestate`` in ``_meta`` (SEP-414), verbatim;
- :mod:`.hops`: the hop sequence under HOP-KEY, loop and depth checks;
- :mod:`.propagation`: both, as one call layer, with spans;
- :mod:`.metrics` + :mod:`.admin`: Prometheus on a separate admin listener;
- :mod:`.logs`: one structured line per request; :mod:`.otel`: OpenTelemetry spans.

What the gateway calls is :func:`hopline.compose.observability.build`.
"""
