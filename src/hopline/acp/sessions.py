"""Sessions seen by the conductor, and how a restarted component gets them back (``--on-crash restart``).

Every answered session setup (``session/new|load|resume|fork``) tells
:mod:`hopline.acp.mcp_routes` which ACP session the servers it declared belong
to. For every component under the restart policy (proxy or terminal agent) it
also records the setup params as that component received them (cwd,
``mcpServers`` as declared upstream of it and spelled for it, additional
directories), until the session ends: a successful ``session/close`` or
``session/delete`` (or one cut short by a crash) forgets the session, so a
closed session is never re-established.

When a restarted component has taken its place again (:mod:`hopline.acp.handshake`):

- if the agent advertised ``agentCapabilities.loadSession`` (for a restarted
  agent: in its new ``initialize`` answer), the conductor sends the component
  one ``session/load`` per session it had, as its predecessor would. A proxy
  rebuilds its state and forwards the load (with whatever MCP servers it
  declares afresh); the agent replays the history as ``session/update``
  notifications, which the client and every component above the restarted one
  already have, so they go no further up than the restarted component.
  A load that the component refuses loses that session; one cut short by
  another crash is tried again on the next restart.
- if not, its sessions cannot be re-established: requests naming them are
  answered with an error (reason ``session-lost``) instead of reaching a
  component that no longer knows them. New sessions work.

Traffic for the component is held meanwhile and delivered, in order, once every
load is answered. Nothing here waits: the shell bounds the whole restart in time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from hopline.acp.lifecycle import Event, State, step
from hopline.jsonrpc import Message, UnavailableError

if TYPE_CHECKING:
    from hopline.acp.chain import Chain
    from hopline.acp.id_tables import Pending
    from hopline.acp.mcp_routes import McpRoutes

LOAD_FIELDS = ("cwd", "mcpServers", "additionalDirectories")


class Conductor(Protocol):
    """What is read and called here of the router (:class:`hopline.acp.router.Router` has it)."""

    chain: Chain
    mcp: McpRoutes
    last: int
    names: list[str]
    state: list[State]
    answers: list[Any]
    restarts: list[int]

    def request_now(self, t: int, method: str, params: Any, then: Callable[[Message], Message | None]) -> None: ...

    def _flush(self, t: int) -> None: ...


class Sessions:
    def __init__(self, router: Conductor) -> None:
        self.r = router
        self.setups: dict[
            str, dict[int, dict[str, Any]]
        ] = {}  # session id → {position: setup params as received there}
        self.lost: dict[str, tuple[str, str]] = {}  # session id → (why it cannot be served any more, which component)
        self.replaying: dict[str, int] = {}  # session id → the restarted position reloading it
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
        if isinstance(params, dict) and self.r.chain.policy(pending.position) == "restart":
            self.setups.setdefault(sid, {})[pending.position] = params

    def closed(self, sid: str) -> None:
        """Session ``sid`` ended: it is never re-established, and its MCP servers are gone."""
        self.setups.pop(sid, None)
        self.r.mcp.servers.session_ended(sid)

    def refusal(self, params: Any) -> UnavailableError | None:
        sid = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(sid, str) and sid in self.lost:
            why, name = self.lost[sid]
            return UnavailableError(why, backend=name, reason="session-lost")
        return None

    def muted(self, src: int, method: str, params: Any) -> bool:
        """Is this the replayed history of a session being reloaded, leaving the restarted component?"""
        return (
            method == "session/update"
            and isinstance(params, dict)
            and self.replaying.get(params.get("sessionId")) == src
        )  # type: ignore[arg-type]

    def reload(self, t: int) -> None:
        """Component ``t`` took its place again: give it its sessions back (or lose them)."""
        r = self.r
        agent = r.answers[r.last]
        caps = agent.get("agentCapabilities") if isinstance(agent, dict) else None
        mine = [(sid, setups[t]) for sid, setups in self.setups.items() if t in setups and sid not in self.lost]
        if not (isinstance(caps, dict) and caps.get("loadSession") is True):
            for sid, _ in mine:
                self.lost[sid] = (
                    f"session {sid!r} was lost when ACP component {r.names[t]!r} restarted "
                    "(the agent does not support session/load); start a new session",
                    r.names[t],
                )
                self.setups.pop(sid, None)
            return self._done(t)
        self.loading[t] = len(mine)
        if not mine:
            return self._done(t)
        for sid, params in mine:
            load = {k: params[k] for k in LOAD_FIELDS if k in params}
            load["sessionId"] = sid
            load.setdefault("mcpServers", [])
            self.replaying[sid] = t
            r.request_now(t, "session/load", load, self._loaded(t, sid))

    def _loaded(self, t: int, sid: str):
        def then(answer: Message) -> None:
            self.replaying.pop(sid, None)
            err = answer.body.get("error")
            if isinstance(err, dict) and isinstance(err.get("data"), dict) and err["data"].get("reason") == "exited":
                pass  # cut short by another crash: tried again on the next restart, or refused with the rest
            elif "result" not in answer.body:
                err = err or {}
                self.setups.pop(sid, None)
                self.lost[sid] = (
                    f"session {sid!r} could not be reloaded after ACP component {self.r.names[t]!r} restarted: "
                    f"{err.get('message', err)}",
                    self.r.names[t],
                )
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
