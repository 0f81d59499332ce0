"""What a worker pool raises when a run gets no worker (the L1 side of Code mode's
sandbox: :mod:`hopline.transports.sandbox_pool` implements the pool, the sandbox tool
mode catches this)."""

from __future__ import annotations


class PoolError(Exception):
    """A run got no worker: ``busy`` if a bound was reached (try again shortly), else
    the pool is shutting down or a worker could not start."""

    def __init__(self, message: str, *, busy: bool = False) -> None:
        super().__init__(message)
        self.busy = busy
