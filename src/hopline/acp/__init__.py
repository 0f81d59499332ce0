"""hopline's ACP conductor: proxy chains in front of an ACP agent (issue 7, seed 003).

Layout (sans-io core, thin asyncio shell; DESIGN §2):

- :mod:`hopline.acp.dialects`   the five proxy-chain dialects (D1..D5) as data: handshake,
                                successor envelopes, recognition of what a peer sent.
- :mod:`hopline.acp.lifecycle`  the per-position handshake state machine, as a table.
- :mod:`hopline.acp.hops`       per-connection id rewriting and the in-flight tables.
- :mod:`hopline.acp.router`     the routing core: messages in, messages out, no I/O.
- :mod:`hopline.acp.chain`      what a chain is made of (component commands, roles, dialects).
- :mod:`hopline.acp.conductor`  the asyncio shell: spawns components lazily, pumps channels.
- :mod:`hopline.acp.trace`      ``--trace FILE``: one JSON line per routed message.
- :mod:`hopline.acp.cli`        ``hopline acp [options] -- "proxy1 args" ... "agent --acp"``.
"""
