"""The gateway's own listen on a 2026-07-28 backend counts only its own acknowledgement.

A backend session carries more than one ``subscriptions/listen``: the gateway's (list changes,
resource subscriptions) and any task listens opened for clients (task_push.py). A task listen
whose wait gave up is closed, so its acknowledgement, arriving late, belongs to nobody; tagged
with that listen's subscription id, it must not be taken as the gateway's listen being in place.
"""

from __future__ import annotations

import asyncio

from hopline import jsonrpc as j
from hopline.binding import Era
from hopline.layers.discovery.backend import BackendInfo, BackendSession
from hopline.layers.session.backend_listens import BackendListens
from hopline.layers.transport.rpc import RpcPeer
from hopline.transports.memory import memory_pair


async def _listening() -> tuple[BackendListens, object, j.Message, RpcPeer]:
    ours, theirs = memory_pair()
    peer = RpcPeer(ours, name="b")
    info = BackendInfo(Era.MODERN, "2026-07-28", capabilities={"tools": {"listChanged": True}})
    listens = BackendListens(hub=None)  # type: ignore[arg-type]  # acknowledgements need no hub
    listens.attach("b", BackendSession("b", peer, info, {}, timeout=None))
    request = await asyncio.wait_for(theirs.receive(), 2)  # the gateway's own listen, sent to the backend
    assert request.method == "subscriptions/listen"
    return listens, theirs, request, peer


async def test_another_listens_acknowledgement_leaves_ours_pending():
    listens, _theirs, request, peer = await _listening()
    waiting = asyncio.ensure_future(listens.subscribe(object(), [], wait=5))  # type: ignore[arg-type]
    listens.acknowledged("b", request.id + 1)  # a (late) task listen's, tagged with its own id
    await asyncio.sleep(0.05)  # the waiter would be woken in the next turn; give it several
    assert not waiting.done()
    listens.acknowledged("b", request.id)  # ours
    await asyncio.wait_for(waiting, 2)
    await listens.aclose()
    await peer.aclose()


async def test_an_untagged_acknowledgement_still_counts():
    listens, _theirs, _request, peer = await _listening()
    waiting = asyncio.ensure_future(listens.subscribe(object(), [], wait=5))  # type: ignore[arg-type]
    listens.acknowledged("b")  # a backend that does not tag it: as before
    await asyncio.wait_for(waiting, 2)
    await listens.aclose()
    await peer.aclose()

