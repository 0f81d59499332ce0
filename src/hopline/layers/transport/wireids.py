"""Unguessable JSON-RPC ids for requests hopline sends to backends (issue 13).

Sequential ids let a misbehaving backend address an answer to a call it was not asked
(the next one, a neighbour's on a shared connection) and be believed. Ids from
:func:`fresh_id` are random integers in ``[1, 2**53)``: integers, because backends expect
the JSON type they have always seen from us, and below 2**53 so that JavaScript backends
read them exactly. The caller keeps them unique among its own requests in flight (a
redraw on the rare collision); an answer to an id not in flight is dropped and counted by
the caller (``RpcPeer.stray_answers``, ``Multiplexer.stray_answers``).

Cost: random bits are drawn from ``os.urandom`` 4 KiB at a time, so an id costs about
as much as two dict lookups (bench/wire_ids.py), not a system call. No I/O beyond that
draw; sans-io like the rest of ``layers/``.
"""

from __future__ import annotations

import os
from array import array

JS_SAFE = 1 << 53
_BATCH = 512  # ids per draw of random bits
_pool = iter(())


def fresh_id() -> int:
    """A random integer id in ``[1, 2**53)``, unpredictable from the ones before it."""
    global _pool
    for value in _pool:
        return value
    _pool = iter([(x >> 11) or 1 for x in array("Q", os.urandom(8 * _BATCH))])
    return next(_pool)
