"""hopline's ACP conductor: proxy chains in front of an ACP agent (issue 7, seed 003).

Layout (sans-io core, thin asyncio shell; DESIGN §2):

- :mod:`hopline.acp.dialects`   the five proxy-chain dialects (D1..D5) as data: handshake,
                                successor envelopes, recognition of what a peer sent.
- :mod:`hopline.acp.lifecycle`  the per-position state machine (handshake, crash, restart), as a table.
- :mod:`hopline.acp.hops`       per-connection id rewriting and the in-flight tables.
- :mod:`hopline.acp.router`     the routing core: messages in, messages out, no I/O.
- :mod:`hopline.acp.handshake`  the proxy handshake and dialect detection (mixed into the router).
- :mod:`hopline.acp.mcp_wire`   MCP-over-ACP spellings D1..D5 as data; the session ``_meta`` key.
- :mod:`hopline.acp.mcp_servers` who declared which ACP-transport MCP server; declarations per receiver.
- :mod:`hopline.acp.mcp_routes` MCP-over-ACP routing: to the declarer and back, translated.
- :mod:`hopline.acp.sessions`   sessions a restarted proxy gets back (``--on-crash restart``).
- :mod:`hopline.acp.chain`      what a chain is made of (component commands, roles, dialects).
- :mod:`hopline.acp.conductor`  the asyncio shell: spawns components lazily, pumps channels.
- :mod:`hopline.acp.trace`      ``--trace FILE``: one JSON line per routed message.
- :mod:`hopline.acp.cli`        ``hopline acp [options] -- "proxy1 args" ... "agent --acp"``.
- :mod:`hopline.acp.bridge`     ``python -m hopline.acp.bridge``: ACP-transport MCP servers as
                                loopback HTTP (or stdio) servers for agents that need those.

MCP requests routed to a declarer carry the ACP session id in the inner
``params._meta["io.hopline/acp-session-id"]`` (:data:`hopline.acp.mcp_wire.SESSION_META_KEY`).
"""
