"""Each backend's state at start, said once it is known: ``backend demo: up (5 tools)``,
``backend crashy: unavailable: backend exited with status 3``.

A shared backend's session is started to learn it: the one a handshake-era client that
declares no capabilities shares, and it is kept for the clients (closing it would throw
away the pool's warm child and make the first client wait for a cold start; measured with
bench/run_gateway.py --parts lists: 10 cold stdio starts at once outlasted the 10 s startup
timeout). A backend whose sessions are a client's own (``share: isolated``) or depend on the
caller's credentials is not started for this, and says so. What fails is retried by the
first call, as ever: this only reports it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from hopline.binding import Era
from hopline.layers.session.sharing import describe


async def report(gateway: Any, say: Callable[[str], None]) -> None:
    """Say one line per enabled backend, as each becomes known (concurrently)."""
    limit = gateway.config.routing.startup_timeout
    await asyncio.gather(*(_one(gateway, b, limit, say) for b in list(gateway.registry.connectors)))


async def _one(gateway: Any, backend_id: str, limit: float, say: Callable[[str], None]) -> None:
    if not gateway.sharing.shares(backend_id):
        say(f"backend {backend_id}: isolated (a child per client session, started when one connects)")
        return
    if gateway.propagation.per_principal(backend_id):
        say(f"backend {backend_id}: per caller (started with each caller's credentials)")
        return
    try:
        session = await asyncio.wait_for(gateway.sharing.session(backend_id, caps={}, prefer=Era.HANDSHAKE), limit)
        tools = await asyncio.wait_for(session.list_all("tools/list"), limit) if session.supports("tools") else []
    except Exception as exc:
        say(f"backend {backend_id}: unavailable: {describe(exc, backend_id)}")
        return
    say(f"backend {backend_id}: up ({len(tools)} tool{'' if len(tools) == 1 else 's'})")
