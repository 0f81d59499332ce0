"""Layer 1, the transport layer's interface: what transports implement and layers use.

``channel`` holds the connection contracts (:class:`~hopline.layers.transport.channel.Channel`,
``Source``, ``Backends``, ``Exchange`` and :class:`~hopline.layers.transport.channel.ChannelClosed`);
``inbox`` the single-consumer queue a channel end waits on. The concrete transports
(stdio, Streamable HTTP, SSE, in-memory) live in :mod:`hopline.transports` and
implement these; every layer above sees a connection only through them. No I/O here:
no sockets, no processes (``inbox`` parks on asyncio futures and timers only).
"""
