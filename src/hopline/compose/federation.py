"""Federation mode's members (draft §5.6, the composition is modes/federation.py): each
member's conformance declaration (``/.well-known/agent-tool-proxy``, read by
transports/declarations.py), fetched at start and again every ``routing.health_interval``,
summarized in this gateway's own declaration.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hopline.config.schema import GatewayConfig

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
