"""hopline's ACP conductor: proxy chains in front of an ACP agent (issue 7, seed 003).

Layout (sans-io core, thin asyncio shell; DESIGN §2):

- :mod:`hopline.acp.dialects`   the five proxy-chain dialects (D1..D5) as data: handshake,
                                successor envelopes, recognition of what a peer sent.
- :mod:`hopline.acp.lifecycle`  the per-position state machine (handshake, crash, restart), as a table.
- :mod:`hopline.acp.id_tables`       per-connection id rewriting and the in-flight tables.
- :mod:`hopline.acp.router`     the routing core: messages in, messages out, no I/O.
- :mod:`hopline.acp.handshake`  the proxy handshake and dialect detection (mixed into the router).
- :mod:`hopline.acp.mcp_wire`   MCP-over-ACP spellings D1..D5 as data; the session ``_meta`` key.
- :mod:`hopline.acp.mcp_servers` who declared which ACP-transport MCP server; declarations per receiver.
- :mod:`hopline.acp.mcp_routes` MCP-over-ACP routing: to the declarer and back, translated.
- :mod:`hopline.acp.sessions`   sessions a restarted component gets back (``--on-crash restart``);
                                closed sessions are forgotten.
- :mod:`hopline.acp.chain`      what a chain is made of (components, roles, dialects, crash policy).
- :mod:`hopline.acp.conductor`  the asyncio shell: spawns components lazily, pumps channels, restarts.
- :mod:`hopline.acp.launch`     how a component starts: a command as a process, a built-in in process.
- :mod:`hopline.acp.settings`   the command line and the ``acp:`` section of a config file, merged.
- :mod:`hopline.acp.message_trace`      ``--trace FILE``: one JSON line per routed message.
- :mod:`hopline.acp.cli`        ``hopline acp [--config FILE] [options] -- "proxy1 args" ... "agent --acp"``.
- :mod:`hopline.acp.proxy_core` what hopline's own proxy components share (handshake, forwarding).
- :mod:`hopline.acp.bridge`     ``python -m hopline.acp.bridge``: ACP-transport MCP servers as
                                loopback HTTP (or stdio) servers for agents that need those.
- :mod:`hopline.acp.gateway`    the built-in gateway component: hopline's MCP gateway (the config
                                file's ``backends``) added to every session as an MCP server over ACP.

MCP requests routed to a declarer carry the ACP session id in the inner
``params._meta["io.hopline/acp-session-id"]`` (:data:`hopline.acp.mcp_wire.SESSION_META_KEY`).
"""
