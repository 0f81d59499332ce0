"""How the conductor starts a component: a command as a child process, a built-in in this process.

:class:`Launcher` is the conductor's spawner (``Component → Channel``):

- a command component is spawned with stdin/stdout piped (its stderr goes to
  ours, prefixed with its name), in its ``cwd``, with all of the conductor's
  environment (not the safe list MCP backends get: see :func:`spawn_stdio`) plus the
  chain's and the component's ``env``;
- a built-in (``Component.builtin``) runs as a task in this process behind an
  in-memory channel pair (:class:`InProcess`): ``gateway`` is
  :func:`hopline.acp.gateway.serve` over one :class:`~hopline.compose.gateway.Gateway`
  built from the configuration file, shared by every start of the component
  (a restart reuses the gateway's backend connectors).

A built-in whose task fails, or returns, looks to the conductor exactly like a
process that exited: its channel closes with a reason. :meth:`Launcher.aclose`
stops what the launcher owns (the gateway) after the conductor has closed
every component.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from hopline.acp.chain import GATEWAY, Chain, Component
from hopline.jsonrpc import Message
from hopline.layers.transport.channel import Channel, ChannelClosed
from hopline.transports.memory import memory_pair

if TYPE_CHECKING:
    from hopline.config.schema import GatewayConfig

log = logging.getLogger("hopline.acp")

Serve = Callable[[Channel], Awaitable[None]]


async def spawn_stdio(component: Component, env: dict[str, str] | None = None) -> Channel:
    from hopline.transports.stdio import StdioChild

    merged = {**(env or {}), **component.env}
    # All of the conductor's environment, deliberately (unlike MCP backends, which get the safe
    # list): the editor starts the conductor in the user's environment to run the user's agent,
    # which needs the user's credentials exactly as if the editor had started it directly.
    return await StdioChild.spawn(component.argv, name=component.name, env=merged, inherit=True, cwd=component.cwd)


class InProcess:
    """A component served by a task of this process, seen through a channel like any other."""

    def __init__(self, name: str, serve: Serve) -> None:
        self.name = name
        self._ours, theirs = memory_pair(name)
        self._reason = "stopped"
        self._task = asyncio.create_task(self._run(serve, theirs), name=f"acp-builtin-{name}")

    async def _run(self, serve: Serve, theirs: Channel) -> None:
        try:
            await serve(theirs)
        except Exception as exc:
            log.exception("ACP component %r failed", self.name)
            self._reason = f"failed: {type(exc).__name__}: {exc}"
        finally:
            await theirs.aclose()

    async def send(self, message: Message) -> None:
        await self._ours.send(message)

    async def receive(self) -> Message:
        try:
            return await self._ours.receive()
        except ChannelClosed:
            raise ChannelClosed(f"{self.name}: {self._reason}") from None

    async def aclose(self) -> None:
        """End its input; it finishes what it owes (bounded), then it is stopped."""
        await self._ours.aclose()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._task), 15)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

    def is_closed(self) -> bool:
        return self._ours.is_closed()

    def __repr__(self) -> str:
        return f"<InProcess {self.name} done={self._task.done()}>"


class Launcher:
    def __init__(self, chain: Chain, config: GatewayConfig | None = None) -> None:
        self.chain = chain
        self.config = config
        self._gateway: Any = None

    async def __call__(self, component: Component) -> Channel:
        if component.url is not None:
            if component.url.lower().startswith(("http://", "https://")):
                from hopline.acp.remote_http import AcpHttpChannel

                return AcpHttpChannel(component.url, component.name)
            from hopline.acp.remote import connect

            return await connect(component.url, component.name)
        if component.builtin is None:
            return await spawn_stdio(component, self.chain.env)
        if component.builtin == GATEWAY:
            return self._gateway_component(component)
        raise ChannelClosed(f"unknown built-in component {component.builtin!r}")

    def _gateway_component(self, component: Component) -> Channel:
        if self.config is None or not self.config.backends:
            raise ChannelClosed(
                "the gateway component needs a configuration file with `backends` (hopline acp --config FILE)"
            )
        from hopline.acp.gateway import serve
        from hopline.modes import build

        if self._gateway is None:
            self._gateway = build(self.config)
        gateway = self._gateway
        acp = self.config.acp
        name = (acp.gateway.server_name if acp is not None else None) or self.config.name
        return InProcess(component.name, lambda channel: serve(channel, channel, gateway, name=name))

    async def aclose(self) -> None:
        gateway, self._gateway = self._gateway, None
        if gateway is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(gateway.aclose(), 10)
