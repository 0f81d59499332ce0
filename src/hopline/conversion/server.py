"""The converted tools as an in-process MCP server, and the gateway's connector for it.

:class:`OpenApiBackends` is a connector like ``StdioBackends``/``RemoteBackends``
(``open_session(era)``, ``open_exchange(era)``, ``aclose()``): each channel it opens
is a fresh :class:`ProtocolChannel`, an in-memory MCP server built on hopline's own
dual-era server machinery (:class:`~hopline.demo.protocol.DemoProtocol`), so it
answers the handshake era (``initialize``) and the stateless 2026-07-28 era
(``server/discover``, per-request ``_meta``) exactly as the demo server does. It
offers tools only: ``tools/list`` is the converted operations, ``tools/call`` an HTTP
request (:mod:`hopline.conversion.invoke`).

The spec is loaded once: the start-up check (:mod:`hopline.conversion.preflight`)
reads it and reports a spec that cannot be used; the first channel opened takes that
document (or reads the spec itself, after a hot reload) and converts it. A load that fails is an \
:class:`~hopline.jsonrpc.UnavailableError` naming the
backend, and is tried again on the next open (the gateway backs off between tries).
All calls of one backend share one ``httpx.AsyncClient``, which follows no redirect and
connects to no link-local or cloud-metadata address (:mod:`hopline.conversion.netguard`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from hopline import __version__
from hopline.binding import Era
from hopline.conversion.document import is_url
from hopline.conversion.errors import SpecError
from hopline.conversion.invoke import Api
from hopline.conversion.netguard import async_client, networks
from hopline.conversion.operations import Converted, Operation, convert
from hopline.conversion.preflight import api_base, load_spec, take
from hopline.demo.catalog import Catalog, Tool
from hopline.demo.context import Request
from hopline.demo.dispatch import Dispatcher
from hopline.demo.protocol import DemoProtocol
from hopline.jsonrpc import Message, UnavailableError, parse
from hopline.layers.transport.channel import ChannelClosed

log = logging.getLogger("hopline.conversion")
_EOF = object()
_TOOL_METHODS = frozenset({"ping", "server/discover", "tools/list", "tools/call"})


class _QueueOutbox:
    """The server's side of a :class:`ProtocolChannel`: what it sends is queued for ``receive``."""

    def __init__(self, queue: asyncio.Queue) -> None:
        self._queue = queue

    def send(self, body: dict[str, Any]) -> None:
        self._queue.put_nowait(Message(body))

    def send_raw(self, line: bytes) -> None:
        self._queue.put_nowait(parse(line))

    async def drain(self) -> None:
        return None


class ProtocolChannel:
    """A channel whose far end is a :class:`DemoProtocol` running in this process.

    ``send`` admits each request synchronously, in arrival order (the era lock and
    ``initialize`` take effect before later requests), then runs it in a task this
    channel owns; ``notifications/cancelled`` cancels that task (no answer follows).
    """

    def __init__(self, protocol: DemoProtocol, name: str) -> None:
        self.protocol, self.name = protocol, name
        self._queue: asyncio.Queue = asyncio.Queue()
        self._outbox = _QueueOutbox(self._queue)
        self._dispatcher = Dispatcher(protocol, self._outbox, name=name)
        self._inflight = self._dispatcher.inflight
        self._closed = False

    async def send(self, message: Message) -> None:
        if self._closed:
            raise ChannelClosed(f"{self.name}: closed")
        self._dispatcher.dispatch(message)

    async def receive(self) -> Message:
        item = await self._queue.get()
        if item is _EOF:
            self._queue.put_nowait(_EOF)
            raise ChannelClosed(f"{self.name}: closed")
        return item

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._dispatcher.cancel_all()
            self._queue.put_nowait(_EOF)

    def is_closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<ProtocolChannel {self.name} closed={self._closed} inflight={len(self._inflight)}>"


def catalog_for(converted: Converted, api: Api) -> Catalog:
    def runner(operation: Operation):
        async def run(arguments: dict[str, Any], req: Request) -> dict[str, Any]:
            return await api.call(operation, arguments)

        return run

    return Catalog().add(
        *(
            Tool(op.tool, op.description, op.input_schema, runner(op), annotations=op.annotations)
            for op in converted.operations
        )
    )


def protocol_for(catalog: Catalog, backend_id: str, document: dict[str, Any]) -> DemoProtocol:
    """A DemoProtocol that serves ``catalog``'s tools and nothing else."""
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    title = str(info.get("title") or backend_id)
    about = info.get("description")
    instructions = (
        f"{title}: {about}"[:2000]
        if isinstance(about, str) and about.strip()
        else f"Tools converted from the OpenAPI description of {title}."
    )
    server_info = {
        "name": f"hopline-openapi/{backend_id}",
        "title": title,
        "version": str(info.get("version") or __version__),
    }
    protocol = DemoProtocol(catalog, server_info=server_info, instructions=instructions)
    protocol.capabilities = {"tools": {"listChanged": False}}
    protocol.methods = {
        era: {m: h for m, h in table.items() if m in _TOOL_METHODS} for era, table in protocol.methods.items()
    }
    return protocol


def http_timeout(timeout: float) -> float:
    """A little under the gateway's own deadline for the call, so the API's silence comes
    back as this tool's ``isError`` result rather than as the gateway's timeout error."""
    return max(0.05, timeout - min(0.5, timeout * 0.1))


class OpenApiBackends:
    """The gateway's connector for one ``openapi`` backend."""

    def __init__(self, backend_id: str, spec: Any, *, base_dir: str | None, timeout: float) -> None:
        self.backend_id, self.spec, self.base_dir = backend_id, spec, base_dir
        self.timeout = http_timeout(timeout)
        self._ready: tuple[Catalog, dict[str, Any]] | None = None
        self._lock = asyncio.Lock()
        self._client: Any = None

    async def _load(self) -> tuple[Catalog, dict[str, Any]]:
        if self._ready is not None:
            return self._ready
        async with self._lock:
            if self._ready is None:
                location = self.spec.openapi
                try:
                    allowed = networks(self.spec.allow_addresses)
                    document = take(location, self.base_dir)
                    if document is None:
                        document, allowed = await asyncio.to_thread(load_spec, self.spec, self.base_dir)
                    converted = convert(document, self.spec.operations)
                    base_url = await asyncio.to_thread(api_base, document, self.spec, allowed)
                except SpecError as exc:
                    raise UnavailableError(
                        f"backend {self.backend_id}: {exc}", backend=self.backend_id, reason="openapi_spec"
                    ) from None
                for label, why in converted.skipped.items():
                    log.warning("backend %s: operation %s skipped: %s", self.backend_id, label, why)
                self._client = async_client(allowed, timeout=self.timeout)  # guarded addresses, no redirects
                api = Api(self.backend_id, base_url, dict(self.spec.headers), self.timeout, self._client)
                self._ready = (catalog_for(converted, api), document)
                log.info(
                    "backend %s: %d operations from %s",
                    self.backend_id,
                    len(converted.operations),
                    "the spec URL" if is_url(location) else location,
                )
        return self._ready

    async def open_session(self, era: Era) -> ProtocolChannel:
        catalog, document = await self._load()
        return ProtocolChannel(protocol_for(catalog, self.backend_id, document), f"openapi:{self.backend_id}")

    async def open_exchange(self, era: Era) -> ProtocolChannel:
        return await self.open_session(era)

    async def aclose(self) -> None:
        self._ready = None
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def __repr__(self) -> str:
        return f"<OpenApiBackends {self.backend_id} loaded={self._ready is not None}>"
