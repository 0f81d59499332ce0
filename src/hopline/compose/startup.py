"""Each backend's state at start, said once it is known: ``backend demo: up (5 tools)``,
``backend crashy: unavailable: backend exited with status 3``.

A shared backend's session is started to learn it: the one a handshake-era client that
declares no capabilities shares, and it is kept for the clients (closing it would throw
away the pool's warm child and make the first client wait for a cold start; measured with
bench/run_gateway.py --parts lists: 10 cold stdio starts at once outlasted the 10 s startup
timeout). A backend whose sessions are a client's own (``share: isolated``) or depend on the
caller's credentials is not started for this, and says so. What fails is retried by the
first call, as ever: this only reports it.

A failure says why (``describe``: the limit and the setting for a start that outlasted
``routing.startup_timeout``, and what the child said outside the protocol: its stderr's tail,
its stdout junk, quoted and redacted). A start that outlasted the limit goes on; its line
follows when it comes up. Each backend's first outcome is kept in ``gateway.first_starts``
for /status and readiness (compose/status.py), and one that outlasted the limit is marked
slow (``registry.slow``) so that clients' handshakes do not wait for it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from hopline.binding import Era
from hopline.jsonrpc import UnavailableError
from hopline.layers.session.sharing import describe


async def report(gateway: Any, say: Callable[[str], None]) -> None:
    """Say one line per enabled backend, as each becomes known (concurrently). Until each has
    one, the gateway is not ready (``gateway.first_starts``: /readyz, README "Readiness")."""
    limit = gateway.config.routing.startup_timeout
    ids = list(gateway.registry.connectors)
    gateway.first_starts.update(dict.fromkeys(ids))
    await asyncio.gather(*(_one(gateway, b, limit, say) for b in ids))


async def _one(gateway: Any, backend_id: str, limit: float, say: Callable[[str], None]) -> None:
    if not gateway.sharing.shares(backend_id):
        gateway.first_starts[backend_id] = "isolated"
        say(f"backend {backend_id}: isolated (a child per client session, started when one connects)")
        return
    if gateway.propagation.per_principal(backend_id):
        gateway.first_starts[backend_id] = "per caller"
        say(f"backend {backend_id}: per caller (started with each caller's credentials)")
        return
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        session = await asyncio.wait_for(gateway.sharing.session(backend_id, caps={}, prefer=Era.HANDSHAKE), limit)
    except Exception as exc:
        why = describe(exc, backend_id, limit=limit, said=gateway.registry.said(backend_id))
        gateway.first_starts[backend_id] = UnavailableError(
            f"backend {backend_id} unavailable: {why}", backend=backend_id, reason="start_failed"
        )
        say(f"backend {backend_id}: unavailable: {why}")
        if isinstance(exc, asyncio.TimeoutError):
            gateway.registry.slow.add(backend_id)  # clients' handshakes do not wait for it (links.py)
            await _late(gateway, backend_id, limit, began, say)
        return
    gateway.first_starts[backend_id] = "up"
    await _tools(gateway, session, backend_id, limit, say)


async def _late(gateway: Any, backend_id: str, limit: float, began: float, say: Callable[[str], None]) -> None:
    """A start that outlasted ``routing.startup_timeout`` goes on: say so if it comes up."""
    try:
        session = await gateway.sharing.session(backend_id, caps={}, prefer=Era.HANDSHAKE)
    except Exception:
        return  # it failed after all: the next request says why
    took = asyncio.get_running_loop().time() - began
    gateway.first_starts[backend_id] = "up"
    gateway.registry.slow.discard(backend_id)
    await _tools(
        gateway,
        session,
        backend_id,
        limit,
        say,
        f", {took:.0f} s after its start (routing.startup_timeout is {limit:g} s)",
    )


async def _tools(
    gateway: Any, session: Any, backend_id: str, limit: float, say: Callable[[str], None], late: str = ""
) -> None:
    try:
        tools = await asyncio.wait_for(session.list_all("tools/list"), limit) if session.supports("tools") else []
    except Exception as exc:
        say(f"backend {backend_id}: up{late}, but its tools/list failed: {describe(exc, backend_id)}")
        return
    say(f"backend {backend_id}: up ({len(tools)} tool{'' if len(tools) == 1 else 's'}){late}")
