"""hopline's MCP gateway inside an ACP chain: a proxy component that gives every session the gateway's tools.

    hopline acp --config FILE              (the file's acp.components has ``- builtin: gateway``)
    hopline acp --config FILE --gateway -- "agent --acp"
    python -m hopline.acp.gateway --config FILE     (the same component as a process, for other conductors)

It runs as a proxy (any dialect's handshake; :class:`hopline.acp.proxy_core.ProxyCore`)
and forwards everything both ways, except:

- **Session setup** (``session/new|load|resume|fork`` on its way to the agent): it
  adds one MCP server with the ACP transport, under a fresh id per session
  (``{"type":"acp","name":<server_name>,"serverId":"hopline-gateway-…"}``; after a D1
  handshake ``{"type":"http","url":"acp:<uuid>"}``). The conductor shows it to the
  agent in the agent's own spelling, or hopline's bridge turns it into a loopback
  HTTP or stdio MCP server for agents that cannot consume ACP-transport servers.
- **MCP traffic** for those servers, which the conductor routes straight to their
  declarer: each MCP-over-ACP connection is one client session of a hopline
  :class:`~hopline.compose.gateway.Gateway` built from the same file's ``backends``
  (namespaced tools, prompts and resources of every backend, with whatever the
  gateway applies to its clients), in every MCP-over-ACP dialect (d1..d5;
  :mod:`.provider`). Requests reach the backends with the ACP session id under
  ``params._meta["io.hopline/acp-session-id"]``.
- **Session end**: a successful ``session/close`` or ``session/delete`` closes the
  gateway sessions of that session's server.

So a coding agent gets the gateway's tools without any change to the agent or the
editor. In ``hopline acp`` it runs in process (:mod:`hopline.acp.launch`); if its
task fails, the conductor sees the component exit and applies ``on_crash``.
"""

from hopline.acp.gateway.proxy import GatewayProxy, serve

__all__ = ["GatewayProxy", "serve"]
