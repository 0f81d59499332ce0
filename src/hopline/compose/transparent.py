"""Transparent mode from configuration: what the level 1 proxy is handed.

Level 1: :func:`settings` (the proxy's share of the ``transparent`` section) and
:class:`Rules` (the header policy, ``layers/policy/transparent.py``, as the proxy asks it:
:class:`~hopline.transports.transparent.HeaderRules`).
"""

from __future__ import annotations

from typing import Any

from hopline.binding import MODERN_VERSIONS
from hopline.config.transparent import TransparentConfig
from hopline.layers.policy.transparent import HEADER_ERROR, HeaderPolicy, body_method, claimed_method, read_headers, rules_view
from hopline.transports.transparent import ProxySettings


def settings(t: TransparentConfig) -> ProxySettings:
    return ProxySettings(
        destinations=t.destinations, destination=t.destination, header=t.header, unknown_method=t.unknown_method,
        max_body=t.max_body, max_method_body=t.max_method_body, connect_timeout=t.connect_timeout,
    )


class Rules:
    """The header policy (``transparent.rules``) as the level 1 proxy asks it."""

    error = HEADER_ERROR

    def __init__(self, t: TransparentConfig) -> None:
        self.policy = HeaderPolicy(t.rules)
        self.judges = bool(self.policy.programs)
        self.reads_method = self.policy.reads.method
        # headers refused when repeated: the routing ones, the ones a rule reads, the one naming the destination (None: any)
        self.strict = self.policy.reads.refused_when_repeated([t.header] if t.destination == "header" else [])

    def read(self, raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None]:
        return read_headers(raw, self.strict)

    def claimed(self, method: str, headers: dict[str, str]) -> tuple[str | None, str | None]:
        return claimed_method(method, headers)

    def body_method(self, body: bytes) -> str | None:
        return body_method(body)

    def allows(self, http: dict[str, Any]) -> bool:
        headers = http["headers"]  # shown to the rules without the mirror headers when nobody validates them
        return self.policy.allows({**http, "headers": rules_view(headers, headers.get("mcp-protocol-version") in MODERN_VERSIONS)})
