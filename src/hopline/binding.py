"""The draft's seven binding parameters (§2.2) and the two MCP bindings.

Core code reads protocol constants from a :class:`Binding`, never as literals, so
a second protocol is a new binding, not a fork (DESIGN §1). The two MCP eras
differ in the handshake flag and in how a request states its version; the
draft's parameters (Appendix D) are otherwise the same.

Era helpers live here too, because every layer from the relay up must tell the
eras apart at the envelope level (DESIGN §4, reference/mcp-wire.md §1, §5).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping


class Era(enum.Enum):
    HANDSHAKE = "handshake"  # ≤ 2025-11-25: initialize, Mcp-Session-Id
    MODERN = "modern"  # 2026-07-28: per-request _meta, no session


HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN_VERSIONS = ("2026-07-28",)
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[0]
LATEST_MODERN = MODERN_VERSIONS[0]
# A handshake-era HTTP request without MCP-Protocol-Version is assumed to be this.
DEFAULT_HTTP_VERSION = "2025-03-26"

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
# On a subscriptions/listen stream: the JSON-RPC id of the listen request (its notifications and its result).
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


@dataclass(frozen=True, slots=True)
class Binding:
    """The seven parameters a binding fixes, plus the handshake flag (§2.2)."""

    name: str
    metadata_field: str
    hop_key: str
    name_delimiter: str
    name_charset: str  # a regular-expression character class
    list_methods: frozenset[str]
    invoke_methods: frozenset[str]
    change_signal: str
    handshake: bool
    versions: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "METADATA-FIELD": self.metadata_field,
            "HOP-KEY": self.hop_key,
            "NAME-DELIMITER": self.name_delimiter,
            "NAME-CHARSET": self.name_charset,
            "LIST-METHODS": sorted(self.list_methods),
            "INVOKE-METHODS": sorted(self.invoke_methods),
            "CHANGE-SIGNAL": self.change_signal,
            "handshake": self.handshake,
            "versions": list(self.versions),
        }


# The MCP methods the core names, defined once (both eras) and read everywhere else.
TOOLS_LIST, TOOLS_CALL = "tools/list", "tools/call"
PROMPTS_LIST, PROMPTS_GET = "prompts/list", "prompts/get"
RESOURCES_LIST, RESOURCES_READ, TEMPLATES_LIST = "resources/list", "resources/read", "resources/templates/list"


@dataclass(frozen=True, slots=True)
class Listing:
    """One LIST-METHOD: the result key of its items, the kind of item, the INVOKE-METHOD
    that uses an item, the capability a server must advertise, and its change signal."""

    method: str
    key: str
    kind: str
    invoke: str
    capability: str
    changed: str


LISTINGS: dict[str, Listing] = {
    listing.method: listing
    for listing in (
        Listing(TOOLS_LIST, "tools", "tool", TOOLS_CALL, "tools", "notifications/tools/list_changed"),
        Listing(PROMPTS_LIST, "prompts", "prompt", PROMPTS_GET, "prompts", "notifications/prompts/list_changed"),
        Listing(
            RESOURCES_LIST, "resources", "resource", RESOURCES_READ, "resources", "notifications/resources/list_changed"
        ),
        Listing(
            TEMPLATES_LIST,
            "resourceTemplates",
            "resourceTemplate",
            RESOURCES_READ,
            "resources",
            "notifications/resources/list_changed",
        ),
    )
}

_MCP_COMMON: dict[str, Any] = dict(
    metadata_field="_meta",
    hop_key="io.modelcontextprotocol/proxy-hops",
    name_delimiter="__",
    name_charset="[a-zA-Z0-9_-]",
    list_methods=frozenset(LISTINGS),
    invoke_methods=frozenset(listing.invoke for listing in LISTINGS.values()),
    change_signal=LISTINGS[TOOLS_LIST].changed,
)

MCP_HANDSHAKE = Binding(name="mcp-2025-11-25", handshake=True, versions=HANDSHAKE_VERSIONS, **_MCP_COMMON)
MCP_MODERN = Binding(name="mcp-2026-07-28", handshake=False, versions=MODERN_VERSIONS, **_MCP_COMMON)

BINDINGS = {Era.HANDSHAKE: MCP_HANDSHAKE, Era.MODERN: MCP_MODERN}


def era_of_version(version: str | None) -> Era:
    """The era a protocol version string belongs to.

    Mirrors the SDK's HTTP routing: a missing header or a handshake version is the
    handshake era; anything else (including unknown strings) is answered by the
    modern path, which rejects versions it does not support with -32022.
    """
    if version is None or version in HANDSHAKE_VERSIONS:
        return Era.HANDSHAKE
    return Era.MODERN


def era_of_message(body: Mapping[str, Any]) -> Era:
    """Era of a message seen on a byte stream (stdio), where no header exists.

    A 2026-07-28 request names its version in ``params._meta``; everything else
    (``initialize``, a bare legacy request) belongs to the handshake era.
    """
    params = body.get("params")
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict) and META_PROTOCOL_VERSION in meta:
            return era_of_version(meta[META_PROTOCOL_VERSION])
    return Era.HANDSHAKE


# Which param a 2026-07-28 HTTP request mirrors into the ``Mcp-Name`` header.
NAME_HEADER_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
