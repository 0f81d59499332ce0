"""hopline's MCP-over-ACP bridge: a proxy component for agents that cannot consume ACP-transport MCP servers.

    python -m hopline.acp.bridge [--transport http|stdio]
    hopline acp --mcp-bridge http|stdio -- "proxy1" "agent --acp"   (inserted right before the agent)

It runs as a proxy (it accepts whichever proxy handshake it is offered: D5/D2
``proxy/initialize``, D4/D3 ``_proxy/initialize``, D1 ``initialize`` with
``_meta.proxy``) and forwards everything in both directions, except:

- **Session setup** (``session/new|load|resume|fork`` on its way to the agent):
  every ACP-transport server in ``mcpServers`` (any dialect's shape) becomes a
  loopback Streamable HTTP server ``{"type":"http","url":"http://127.0.0.1:PORT/mcp/<token>"}``
  (``--transport http``, the default) or a stdio server whose command is
  ``hopline relay --stdio <that url>`` (``--transport stdio``; every agent supports
  stdio MCP servers). One HTTP listener serves them all; the random path is the credential.
- **MCP traffic**: what the agent's MCP client sends there is relayed over this
  ACP connection as MCP-over-ACP (:mod:`hopline.acp.bridge.mcp`): ``mcp/connect``
  per MCP session, ``mcp/message``, ``mcp/disconnect``, spelled d4 for ``serverId``
  declarations, d2 for ``id``, d1 or d3 (by its own handshake) for ``acp:`` URLs.
  Both MCP eras are served (the listener is hopline's own).
- **The initialize answer** going up gets ``agentCapabilities.mcpCapabilities.acp: true``
  when the agent behind it takes HTTP MCP servers (or always, with stdio), so
  proxies upstream may declare ACP-transport servers.

**Session correlation.** Every MCP request the bridge relays carries the ACP
session id the server was declared for in the inner request's
``params._meta["io.hopline/acp-session-id"]`` (and in ``mcp/connect``'s
``_meta``): the bridge learns it from the ``session/new`` answer (or the
``sessionId`` of ``session/load|resume``). While that ``session/new`` is still
unanswered no session id exists yet: a request that does something
(``tools/call``, ``resources/read``, ``prompts/get``, …) waits for the answer, so
it carries the id; the requests agents send to set their MCP servers up
(``initialize``, ``ping``, ``server/discover``, ``*/list``) go at once, without it,
because holding them would deadlock agents that answer ``session/new`` only
after their MCP servers are up.

Logs go to stderr; stdout carries ACP only. Endpoints live as long as the bridge.

Modules: :mod:`.proxy` (the proxy: forwarding, handshake, session rewrites),
:mod:`.mcp` (the MCP side: served servers, channel, backends, loopback app), :mod:`.__main__`
(the process: stdio, the HTTP listener, shutdown).
"""

from hopline.acp.bridge.mcp import Served
from hopline.acp.bridge.proxy import Bridge
from hopline.acp.mcp_wire import SESSION_META_KEY

__all__ = ["Bridge", "Served", "SESSION_META_KEY"]
