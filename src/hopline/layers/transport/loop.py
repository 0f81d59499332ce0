"""The running event loop, without a system call per look.

On Python 3.11, ``asyncio.get_running_loop()`` makes a ``getpid()`` system call each time (it
checks for a fork), and so does everything that calls it without being given the loop:
``asyncio.current_task()``, ``asyncio.ensure_future()``, ``asyncio.sleep()``. ``strace -c`` on
``bench/profile_call.py --strace`` counted 13.8 of them per proxied ``tools/call``, about half of
all its system calls. :func:`running_loop` remembers the loop
running in each thread and asks asyncio again only when that one is not running any more (a
test's next loop, a new thread) or after a fork. Python 3.12 keeps the loop on the thread
state, so there it is ``asyncio.get_running_loop`` itself.

Measured: the system calls go (strace), but the CPU per call did not move beyond the
run-to-run spread (``bench/profile_call.py --sse --cpu --src`` against the previous sources,
three rounds each: 0.398-0.440 before, 0.405-0.472 after): a ``getpid()`` is cheap. Kept
because it is free and makes a system-call count of the hot path readable.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading

__all__ = ["running_loop", "current_task"]

if sys.version_info >= (3, 12):  # pragma: no cover - the check is gone there
    running_loop = asyncio.get_running_loop
else:
    _by_thread: dict[int, asyncio.AbstractEventLoop] = {}
    _ident = threading.get_ident

    def running_loop() -> asyncio.AbstractEventLoop:
        """``asyncio.get_running_loop()``, remembered per thread while that loop runs."""
        loop = _by_thread.get(_ident())
        if loop is None or not loop.is_running():
            loop = _by_thread[_ident()] = asyncio.get_running_loop()  # RuntimeError outside a loop, as asyncio
        return loop

    os.register_at_fork(after_in_child=_by_thread.clear)


def current_task() -> asyncio.Task | None:
    """``asyncio.current_task()``, given the loop (so it makes no system call)."""
    return asyncio.current_task(running_loop())
