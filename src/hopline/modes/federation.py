"""Federation mode (draft §5.6): a gateway whose backends are intermediaries themselves.

Composition, routing and policy are Forward mode's; what federation adds:

- **Membership.** Each member's conformance declaration (``/.well-known/agent-tool-proxy``
  at its origin, draft §4.2, read by transports/declarations.py) is fetched at start and
  again every ``routing.health_interval``; this gateway's own declaration lists, per
  member, its name, version, tier, modes and layers, or why none could be read (a stdio
  member, a backend that publishes none: it is likely a server, not an intermediary, and
  a warning says so). Credentials configured for a member are not sent with this request.
- **Loops across the hierarchy.** The hop sequence travels with every request the gateway
  makes for a client, not only with calls: backend handshakes and list fetches carry the
  sequence the client's first request came with plus this hop, and every request that
  arrives is checked, so a member that (directly or further down) leads back here is
  refused on its first handshake and left out of the surface instead of recursing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from hopline.compose import parts
from hopline.composition import Composition
from hopline.modes import forward
from hopline.modes.forward import GATEWAY_OPTIONAL, gateway_layers

if TYPE_CHECKING:
    from hopline.compose.gateway import Gateway
    from hopline.config.schema import GatewayConfig

COMPOSITION = Composition(
    mode="federation",
    section="§5.6",
    handshake=(
        "dual-handshake (composed capabilities of member intermediaries; the hop sequence travels with handshakes, "
        "list fetches and calls)"
    ),
    layers=gateway_layers(
        parts.namespaced, "layers.routing.namespace", discovery=("modes.federation", "transports.declarations")
    ),
    optional=GATEWAY_OPTIONAL,
)


def build(config: GatewayConfig, **kw: Any) -> Gateway:
    return forward.build(config, COMPOSITION, **kw)


__all__ = ["COMPOSITION", "build", "members", "summary", "watch_members"]

log = logging.getLogger("hopline.federation")


def summary(doc: Any) -> dict[str, Any]:
    """What this gateway says of a member: the parts of its declaration that describe it."""
    from hopline.transports.declarations import Unread  # httpx: not for every `hopline` command line

    if isinstance(doc, Unread):
        return {"declared": False, "reason": doc.reason}
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("intermediary"), dict)
        or not isinstance(doc.get("tier"), int)
    ):
        return {"declared": False, "reason": "its declaration is not an agent-tool-proxy declaration"}
    who = doc["intermediary"]
    return {
        "declared": True,
        "name": str(who.get("name", "")),
        "version": str(who.get("version", "")),
        "tier": doc["tier"],
        "modes": [m for m in doc.get("modes") or [] if isinstance(m, str)],
        "layers": [n for n in doc.get("layers") or [] if isinstance(n, int)],
    }


async def members(config: GatewayConfig) -> dict[str, dict[str, Any]]:
    """Every enabled member's declaration, in short (see :func:`summary`)."""
    from hopline.transports.declarations import Unread, fetch_declarations

    enabled = {bid: spec.url for bid, spec in config.backends.items() if spec.enabled}
    fetched = await fetch_declarations({bid: url for bid, url in enabled.items() if url})
    stdio = Unread("a stdio member: no declaration to fetch")
    return {bid: summary(fetched.get(bid, stdio)) for bid in enabled}


async def watch_members(config: GatewayConfig, into: dict[str, dict[str, Any]]) -> None:
    """Keep ``into`` (the declaration's member table) current; warn once per member that
    does not declare itself an intermediary."""
    warned: set[str] = set()
    while True:
        try:
            found = await members(config)
        except Exception:  # noqa: BLE001 (keep the last table; never let the watcher die)
            log.exception("federation: reading the members' declarations failed")
            found = dict(into)
        into.clear()
        into.update(found)
        for bid, member in found.items():
            if not member["declared"] and bid not in warned:
                warned.add(bid)
                log.warning("federation member %s does not declare itself an intermediary: %s", bid, member["reason"])
        await asyncio.sleep(config.routing.health_interval or 60.0)
