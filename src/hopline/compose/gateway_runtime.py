"""A gateway's runtime: every long-lived task of one :class:`~hopline.compose.gateway.Gateway`,
owned by one ``asyncio.TaskGroup`` (:class:`hopline.runtime.TaskOwner`):

- the breaker trials (Layer 4's HALF-OPEN probes, ``Resilience.run``);
- the discovery health probes (draft §6.2), every ``routing.health_interval``;
- the start of the link other replicas hand held calls over (its reader is the link's own);
- a replaced pipeline's release after a hot reload (one still under way at close is
  cancelled, then released again with no grace, as the running pipeline is at shutdown).

The gateway is built without starting anything (the composition root is pure construction);
:meth:`GatewayRuntime.start` is what the listeners' entry calls (idempotent, one test when
started), :meth:`GatewayRuntime.aclose` cancels every task and awaits them all.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Coroutine, Protocol

from hopline.compose.pipeline import release
from hopline.compose.resilience import Resilience
from hopline.config.schema import GatewayConfig
from hopline.jsonrpc import Message
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.session.sharing import Sharing
from hopline.pipeline import Pipeline
from hopline.runtime import TaskOwner
from hopline.transports.replica_link import ReplicaLink

log = logging.getLogger("hopline.gateway")


class Runs(Protocol):
    """What the runtime runs its tasks against (the gateway)."""

    config: GatewayConfig
    replicas: ReplicaLink | None  # start() begins its reader
    resilience: Resilience  # run(probe): the breaker trial supervisor
    sharing: Sharing  # .shared: the open shared backend sessions the probes visit

    async def probe(self, backend_id: str) -> Message: ...

    async def health_probe(self, session: BackendSession) -> None: ...


class GatewayRuntime:
    def __init__(self, gateway: Runs) -> None:
        self.gateway = gateway
        self.tasks = TaskOwner("gateway")
        self._trials = False  # breaker trials started (and the replica link)
        self._probes = False  # health probes started
        self._releasing: dict[int, Pipeline] = {}  # replaced pipelines whose release has not finished

    def start(self) -> None:
        """Start the background work the gateway owns (breaker trials, health probes, the
        link other replicas hand held calls over). Idempotent."""
        g = self.gateway
        if self._trials and (self._probes or g.config.routing.health_interval <= 0):
            return
        if not self._trials:
            self._trials = True
            if g.replicas is not None:
                g.replicas.start()
            self.tasks.spawn(g.resilience.run(g.probe), "breaker-trials")
        if not self._probes and g.config.routing.health_interval > 0:  # (a reload may turn them on)
            self._probes = True
            self.tasks.spawn(self._health_loop(), "health-probes")

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        """One more task of the gateway's."""
        self.tasks.spawn(coro, name)

    def release(self, pipeline: Pipeline) -> None:
        """Let go of a pipeline a reload replaced (its runs in flight get their own time)."""
        self._releasing[id(pipeline)] = pipeline
        self.tasks.spawn(self._release(pipeline), "release-pipeline")

    async def _release(self, pipeline: Pipeline) -> None:
        await release(pipeline)
        self._releasing.pop(id(pipeline), None)

    async def _health_loop(self) -> None:
        """Discovery health probes (draft §6.2) of every open shared backend session, every
        ``health_interval``. A failure counts against the backend's breaker; changed
        capabilities re-compose the surface with a CHANGE-SIGNAL. Probes never start a
        backend; sessions that are not open are the reconnect loop's business."""
        g = self.gateway
        while True:
            await asyncio.sleep(g.config.routing.health_interval)
            for session in list(g.sharing.shared.values()):
                if not session.is_closed():
                    await g.health_probe(session)

    async def aclose(self) -> None:
        await self.tasks.aclose()
        for pipeline in list(self._releasing.values()):  # cut short by the close: released now, runs stopped
            try:
                await release(pipeline, grace=0)
            except Exception:  # noqa: BLE001 (the rest is still let go)
                log.exception("releasing a replaced pipeline failed")
        self._releasing.clear()
