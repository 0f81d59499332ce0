"""Which component declared which ACP-transport MCP server, and how each receiver is shown it.

Fed every ``session/new|load|resume|fork`` on its way down (reference §3.1, §3.3):

- A server belongs to the first position that sends it down (0 = the client, or
  in proxy mode the parent); a later declaration by the same position replaces
  it (a restarted proxy declares afresh). Its key is its id without ``acp:``.
- The dialect it will be spoken to in follows from its declaration's shape and
  the declarer's handshake dialect: ``id`` → d2; ``acp:`` URL → d1, or d3 from a
  D4/D3 proxy; ``serverId`` → d5 from a D5 proxy, else d4 (a client declaring
  ``serverId`` is tried in d4 first; see :mod:`hopline.acp.mcp_routes`).
- Each receiver gets every ACP server in the shape it speaks: a proxy by its
  dialect; the agent by ``--dialect N=D``, else by its ``initialize`` answer
  (``mcpCapabilities.acp`` → ``serverId``; ``mcp_acp_transport`` → ``acp:`` URL);
  else unchanged. The parent's successor (proxy mode) gets it unchanged.
- The session a server serves is known from ``sessionId`` in the params (load,
  resume) or in the answer (new, fork; :mod:`hopline.acp.sessions` reports it).
  When that session is closed or deleted, its servers are forgotten.

Sans-io; reads the router's per-position tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hopline.acp import mcp_wire
from hopline.acp.mcp_wire import MCP


class Tables(Protocol):
    """The router's per-position tables read here (:class:`hopline.acp.router.Router` has them)."""

    proxy_mode: bool
    last: int
    is_proxy: list[bool]
    dialect: list[str | None]
    answers: list[Any]
    upstream_dialect: str | None


@dataclass(slots=True)
class Server:
    key: str
    raw: str  # the id as its declarer wrote it
    shape: str
    declarer: int
    dialect: str  # the MCP-over-ACP dialect the declarer is spoken to in
    session: str | None = None


class Declarations:
    def __init__(self, router: Tables) -> None:
        self.r = router
        self.servers: dict[str, Server] = {}

    def get(self, key: Any) -> Server | None:
        return self.servers.get(key)

    def setup(self, src: int, t: int, method: str, params: Any) -> tuple[Any, tuple[str, ...]]:
        """Register what ``src`` declares; respell every ACP server for receiver ``t``."""
        servers = params.get("mcpServers") if isinstance(params, dict) else None
        if not isinstance(servers, list):
            return params, ()
        shape = self.shape_for(t)
        keys: list[str] = []
        out: list[Any] = []
        for entry in servers:
            found = mcp_wire.declared(entry)
            if found is not None:
                key, raw, declared_shape = found
                server = self.servers.get(key)
                if server is None or server.declarer == src:
                    server = self.servers[key] = Server(
                        key, raw, declared_shape, src, self._provider_dialect(src, declared_shape)
                    )
                keys.append(key)
                if shape is not None and shape != declared_shape:
                    entry = mcp_wire.declaration(entry, shape, mcp_wire.shown_id(server.raw, server.shape, shape))
            out.append(entry)
        if method != "session/fork" and isinstance(params.get("sessionId"), str):
            self.session_known(keys, params["sessionId"])
        changed = any(a is not b for a, b in zip(out, servers))
        return ({**params, "mcpServers": out} if changed else params), tuple(keys)

    def session_known(self, keys: tuple[str, ...] | list[str], session_id: str) -> None:
        for key in keys:
            server = self.servers.get(key)
            if server is not None:
                server.session = session_id

    def shape_for(self, t: int) -> str | None:
        r = self.r
        if r.is_proxy[t]:
            return MCP[r.dialect[t] or "d5"].shape
        if t == 0 or (r.proxy_mode and t == r.last):
            return None
        return MCP[r.dialect[t]].shape if r.dialect[t] else mcp_wire.consumer_shape(r.answers[t])

    def _provider_dialect(self, pos: int, shape: str) -> str:
        if shape == "id":
            return "d2"
        d = self.r.upstream_dialect if (pos == 0 and self.r.proxy_mode) else self.r.dialect[pos]
        if d in MCP and MCP[d].shape == shape:
            return d  # type: ignore[return-value]
        if shape == "url":
            return "d3" if d in ("d3", "d4") else "d1"
        return "d5" if d in ("d5", "d2") else "d4"

    def session_ended(self, session_id: str) -> None:
        """The session closed: its servers are gone (new connections to them are refused)."""
        for key in [k for k, s in self.servers.items() if s.session == session_id]:
            del self.servers[key]

    def lost(self, pos: int) -> None:
        for key in [k for k, s in self.servers.items() if s.declarer == pos]:
            del self.servers[key]
