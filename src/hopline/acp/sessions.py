"""Sessions seen by the conductor, and how a restarted proxy gets them back (``--on-crash restart``).

Every answered session setup (``session/new|load|resume|fork``) tells
:mod:`hopline.acp.mcp_routes` which ACP session the servers it declared belong
to. Under the restart policy it also records, per proxy, the setup params as that
proxy received them (cwd, ``mcpServers`` declared upstream of it, additional
directories), for the life of the conductor.

When a restarted proxy has accepted the role again (:mod:`hopline.acp.handshake`):

- if the agent advertised ``agentCapabilities.loadSession``, the conductor sends
  the proxy one ``session/load`` per session it had, as its predecessor would.
  The proxy rebuilds its state and forwards the load (with whatever MCP servers
  it declares afresh); the agent replays the history as ``session/update``
  notifications, which the client already has, so they are not delivered to it.
  A load that fails loses that session.
- if not, its sessions cannot be re-established: requests naming them are
  answered with an error (reason ``session-lost``) instead of reaching a proxy
  that no longer knows them. New sessions work.

Traffic for the proxy is held meanwhile and delivered, in order, once every load
is answered. Nothing here waits: the shell bounds the whole restart in time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hopline.acp.lifecycle import Event, State, step
from hopline.jsonrpc import Message, UnavailableError

if TYPE_CHECKING:
    from hopline.acp.hops import Pending
    from hopline.acp.router import Router

LOAD_FIELDS = ("cwd", "mcpServers", "additionalDirectories")


class Sessions:
    def __init__(self, router: Router) -> None:
        self.r = router
        self.setups: dict[str, dict[int, dict[str, Any]]] = {}  # session id → {proxy position: setup params}
        self.lost: dict[str, tuple[str, str]] = {}  # session id → (why it cannot be served any more, which proxy)
        self.replaying: set[str] = set()
        self.loading: dict[int, int] = {}  # position → loads not answered yet

    def setup_answered(self, pending: Pending, answer: Message) -> None:
        params, keys = pending.setup
        result = answer.body.get("result")
        if not isinstance(result, dict):
            return
        sid = result.get("sessionId") or (params.get("sessionId") if isinstance(params, dict) else None)
        if not isinstance(sid, str):
            return
        self.r.mcp.servers.session_known(keys, sid)
        self.lost.pop(sid, None)  # set up again (an agent may reuse ids): served again
        if self.r.chain.on_crash == "restart" and self.r.is_proxy[pending.position] and isinstance(params, dict):
            self.setups.setdefault(sid, {})[pending.position] = params

    def refusal(self, params: Any) -> UnavailableError | None:
        sid = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(sid, str) and sid in self.lost:
            why, name = self.lost[sid]
            return UnavailableError(why, backend=name, reason="session-lost")
        return None

    def muted(self, method: str, params: Any) -> bool:
        return method == "session/update" and isinstance(params, dict) and params.get("sessionId") in self.replaying

    def reload(self, t: int) -> None:
        """Proxy ``t`` accepted the role again: give it its sessions back (or lose them)."""
        r = self.r
        agent = r.answers[r.last]
        caps = agent.get("agentCapabilities") if isinstance(agent, dict) else None
        mine = [(sid, setups[t]) for sid, setups in self.setups.items() if t in setups and sid not in self.lost]
        if not (isinstance(caps, dict) and caps.get("loadSession") is True):
            for sid, _ in mine:
                self.lost[sid] = (f"session {sid!r} was lost when ACP component {r.names[t]!r} restarted (the agent does not support session/load); start a new session", r.names[t])
            return self._done(t)
        self.loading[t] = len(mine)
        if not mine:
            return self._done(t)
        for sid, params in mine:
            load = {k: params[k] for k in LOAD_FIELDS if k in params}
            load["sessionId"] = sid
            load.setdefault("mcpServers", [])
            self.replaying.add(sid)
            r.request_now(t, "session/load", load, self._loaded(t, sid))

    def _loaded(self, t: int, sid: str):
        def then(answer: Message) -> None:
            self.replaying.discard(sid)
            if "result" not in answer.body:
                err = answer.body.get("error") or {}
                self.lost[sid] = (f"session {sid!r} could not be reloaded after ACP component {self.r.names[t]!r} restarted: {err.get('message', err)}", self.r.names[t])
            self.loading[t] = self.loading.get(t, 1) - 1
            if self.loading[t] <= 0 and self.r.state[t] is State.RELOADING:
                self._done(t)
            return None

        return then

    def _done(self, t: int) -> None:
        r = self.r
        r.state[t] = step(r.state[t], Event.RELOADED)
        r.restarts[t] = 0
        r._flush(t)
