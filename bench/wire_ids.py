"""Cost of an unguessable backend request id (issue 13) against the counter it replaced.

    python bench/wire_ids.py

Prints ns per id for ``itertools.count`` (the old ids), ``fresh_id()`` (the new ones, see
src/hopline/layers/transport/wireids.py), ``RpcPeer.next_id``'s shape (fresh id + in-flight
check) and ``secrets.randbits(53)`` (one system call per id), best of 7 runs, and the ratio
to the counter measured in the same run. Absolute figures depend on the machine and its load.
"""

from __future__ import annotations

import itertools
import secrets
import timeit

from hopline.layers.transport.wireids import fresh_id

N = 500_000


def per_id(stmt: str, env: dict) -> float:
    return min(timeit.repeat(stmt, globals=env, number=N, repeat=7)) / N * 1e9


def main() -> None:
    waiting: dict[int, object] = {i: None for i in range(64)}  # a peer with 64 requests in flight
    env = {"count": itertools.count(1), "fresh_id": fresh_id, "secrets": secrets, "waiting": waiting}
    base = per_id("next(count)", env)
    rows = [
        ("itertools.count (old)", base),
        ("fresh_id()", per_id("fresh_id()", env)),
        ("fresh_id() + in-flight check", per_id("i = fresh_id()\nwhile i in waiting: i = fresh_id()", env)),
        ("secrets.randbits(53)", per_id("secrets.randbits(53)", env)),
    ]
    for name, ns in rows:
        print(f"{name:32s} {ns:8.1f} ns/id  x{ns / base:5.1f}")


if __name__ == "__main__":
    main()
