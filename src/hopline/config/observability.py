"""Observability: trace context, hop metadata, metrics, logs, OpenTelemetry.

Defaults: trace context propagated (and generated when absent); hop metadata
appended under the binding's HOP-KEY, with loop detection; one log line per
request; Prometheus metrics off until an admin port is set; OTLP export off until
an endpoint is set.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from hopline.config.section import Section


class TraceConfig(Section):
    """W3C Trace Context in _meta (draft §12.1): propagated verbatim, never altered in place."""

    enabled: bool = Field(
        True, description="Propagate trace context and add this hop's span context (io.hopline/traceparent)."
    )
    generate: bool = Field(True, description="Add a traceparent to requests that carry none.")


class HopsConfig(Section):
    """Hop metadata (draft §12.2): each forwarded request gets this hop appended."""

    enabled: bool = Field(
        True, description="Append a hop entry (name, mode, version, timestamp, instance) to every forwarded request."
    )
    key: str | None = Field(
        None,
        min_length=1,
        description="The _meta key of the hop sequence; default: the binding's HOP-KEY "
        "(io.modelcontextprotocol/proxy-hops).",
    )
    instance: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="This hopline's identity in hop entries; a request already carrying it is refused as a loop. "
        "Default: random per process (set it to detect loops across the processes of one deployment).",
    )
    max_depth: int = Field(16, ge=1, le=1000, description="Most hop entries a request may carry, this hop's included.")


class MetricsConfig(Section):
    """Prometheus /metrics on a separate admin listener."""

    port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Admin listener port (0 picks a free one); absent: no metrics. `hopline serve --admin-port` "
        "overrides it.",
    )
    host: str = Field("127.0.0.1", min_length=1, description="Admin listener address.")
    path: str = Field("/metrics", pattern=r"^/", description="Path of the Prometheus exposition.")


class LogsConfig(Section):
    """Structured logs."""

    format: Literal["console", "json"] = Field(
        "console", description="console: key=value lines for people; json: one JSON object per line."
    )
    requests: bool = Field(True, description="One line per routed request at info level, with its trace id.")


class OtelConfig(Section):
    """OpenTelemetry spans and metrics exported over OTLP/HTTP, named by the MCP semantic conventions (needs the
    `otel` extra)."""

    endpoint: str | None = Field(
        None,
        description="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces; a base URL (http://127.0.0.1:4318) "
        "gets /v1/traces appended; metrics go to its /v1/metrics sibling; absent: nothing exported.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Headers for the OTLP endpoint (use ${VAR} for tokens)."
    )
    service_name: str | None = Field(
        None, min_length=1, description="service.name of the spans; default: the gateway's `name`."
    )
    sample_ratio: float = Field(
        1.0, ge=0, le=1, description="Share of new traces recorded (incoming sampled flags are honoured)."
    )

    @field_validator("endpoint")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    "must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:4318 (/v1/traces is "
                    "appended)"
                )
            if parts.path in ("", "/"):  # the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it
                url = url.split("?", 1)[0].rstrip("/") + "/v1/traces" + (f"?{parts.query}" if parts.query else "")
        return url


class ObservabilityConfig(Section):
    """Observability: trace context, hop metadata, metrics, logs, OpenTelemetry."""

    trace: TraceConfig = Field(default_factory=TraceConfig)
    hops: HopsConfig = Field(default_factory=HopsConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    logs: LogsConfig = Field(default_factory=LogsConfig)
    otel: OtelConfig = Field(default_factory=OtelConfig)
