"""The sandbox Code mode runs model-written code in: Monty, in a worker process.

In: a Python snippet, the host functions it may call (by name, each an ``async``
callable), :class:`Limits`, and the :class:`Workers` to run it in. Out: an
:class:`Outcome` — the value of the snippet's last expression (JSON-able), what it
printed, or the error that stopped it.

Why this is a sandbox and not ``exec``:

- The code is never run by CPython. ``pydantic-monty`` is a Python interpreter written
  in Rust, and it runs in a separate ``monty`` worker process, a fresh one per run:
  nothing of one caller's run survives into another's. The processes belong to a
  bounded pool (:class:`hopline.transports.sandbox_pool.SandboxPool`, built by the
  composition root: this module spawns nothing) that keeps a spare started, so a
  run rarely waits for a process start.
- The interpreter has no file system, network, subprocess or environment of its own:
  ``socket``/``subprocess`` do not exist, and every file or OS call (``open``,
  ``os.listdir``, ``pathlib``…) suspends the worker and asks this host, which
  refuses all of them. No directory is mounted.
- The only way out is a call to one of ``functions``: each is awaited here, in the
  gateway, and for Code mode each is one trip through the normal pipeline.
- Limits: wall-clock ``timeout`` over the whole run (host calls included; the wait for
  a worker is the pool's ``queue_wait``, not part of it) enforced here, execution time
  and heap (``max_memory``) enforced inside the worker, a parent-side watchdog that
  kills a worker which stops answering, a cap on printed output and on the size of
  the result, a cap on host calls, and on code size. The worker is reaped when the
  run ends, whatever ended it.

Host functions answer synchronously in the sandbox (``x = call_tool(...)``);
``await call_tool(...)`` works as well. A host function signals an exception to the
sandboxed code by raising :class:`SandboxError`.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from hopline.layers.transport.pool import PoolError

HostFunction = Callable[..., Awaitable[Any]]
MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    timeout: float = 7.0  # seconds of wall clock for the whole run (seed 001: codeMode.timeout 7s)
    memory: int = 64 * MiB  # interpreter heap
    output: int = 64 * 1024  # bytes of printed output, and of the JSON result
    max_calls: int = 100  # host function calls per run
    max_code: int = 64 * 1024  # bytes of source


@dataclass(slots=True)
class Outcome:
    ok: bool
    value: Any = None
    output: str = ""
    error: str | None = None
    calls: int = 0
    elapsed: float = 0.0

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"result": self.value, "output": self.output}
        if self.error is not None:
            data = {"error": self.error, "output": self.output}
        return data


class Workers(Protocol):
    """Where runs get a worker: :class:`~hopline.transports.sandbox_pool.SandboxPool`."""

    closed: bool  # after aclose: no run gets a worker any more

    def session(self) -> AbstractAsyncContextManager[Any]:
        """A Monty session checked out with :func:`checkout_options`, in a worker of its own
        for one run; raises :class:`PoolError` when none can be had within the bounds."""

    async def aclose(self, grace: float | None = None) -> None:
        """Reap every worker; runs in flight get ``grace`` seconds (``None``: the pool's default)."""


def checkout_options(limits: Limits) -> dict[str, Any]:
    """How a worker's session is checked out for runs under ``limits``."""
    return {
        "script_name": "run_code.py",
        "limits": {
            "max_feed_duration_secs": limits.timeout,
            "max_memory": limits.memory,
            "max_suspensions": max(1000, 2 * limits.max_calls + 100),
            "max_total_sleep_secs": limits.timeout,
        },
        "os_policy": {"sleep": "system", "sleep_system_max": limits.timeout},
    }


def pool(limits: Limits, factory: Callable[..., Workers], **bounds: Any) -> Workers:
    """A worker pool for runs under ``limits``, made by ``factory`` (the composition root
    passes :class:`hopline.transports.sandbox_pool.SandboxPool`: this layer imports no
    transport); ``bounds`` are the pool's (``max_workers``, ``spares``, ``queue``,
    ``queue_wait``, ``idle_timeout``). It spawns nothing until a run needs a worker."""
    return factory(request_timeout=limits.timeout + 1.0, checkout=checkout_options(limits), **bounds)


class SandboxError(Exception):
    """Raised by a host function: becomes ``exc_type(message)`` inside the sandbox."""

    def __init__(self, exc_type: str, message: str) -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.message = message


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    return repr(value)


def to_json(value: Any) -> bytes:
    return orjson.dumps(value, default=_jsonable, option=orjson.OPT_NON_STR_KEYS)


async def run(code: str, functions: Mapping[str, HostFunction], limits: Limits, workers: Workers) -> Outcome:
    """Run ``code`` in a fresh Monty worker from ``workers`` (checked out with
    :func:`checkout_options` of the same ``limits``); never raises for anything the code
    does, nor when no worker is free (that is an error :class:`Outcome` at once)."""
    started = time.monotonic()
    if len(code.encode()) > limits.max_code:
        return Outcome(False, error=f"ValueError: code is {len(code.encode())} bytes; the limit is {limits.max_code}")
    import pydantic_monty as monty  # only paid for when Code mode is configured

    printed = monty.CollectString(max_bytes=limits.output)
    state = _Run(functions, limits)
    try:
        async with workers.session() as session:
            async with asyncio.timeout(limits.timeout):
                value = await state.drive(monty, session, code, printed)
    except PoolError as exc:
        what = "sandbox busy" if exc.busy else "sandbox unavailable"
        return state.outcome(
            False, printed, started, error=f"RuntimeError: {what}: {exc}" + ("; try again shortly" if exc.busy else "")
        )
    except TimeoutError:
        return state.outcome(
            False, printed, started, error=f"TimeoutError: run_code exceeded its {limits.timeout:g} s wall-clock limit"
        )
    except monty.MontyCrashedError as exc:
        reason = (
            "stopped by the watchdog"
            if exc.timed_out
            else "stopped: the sandbox is shutting down"
            if workers.closed
            else f"crashed: {exc}"
        )
        return state.outcome(False, printed, started, error=f"RuntimeError: sandbox worker {reason}")
    except (monty.MontyRuntimeError, monty.MontySyntaxError) as exc:
        return state.outcome(False, printed, started, error=exc.display("traceback").strip())
    except monty.MontyError as exc:
        return state.outcome(False, printed, started, error=f"{type(exc).__name__}: {exc}")
    encoded = to_json(value)
    if len(encoded) > limits.output:
        return state.outcome(
            False,
            printed,
            started,
            error=f"ValueError: the result is {len(encoded)} bytes as JSON; the limit is {limits.output}",
        )
    return state.outcome(True, printed, started, value=orjson.loads(encoded))


class _Run:
    """One run's bookkeeping: the host-call loop over Monty's snapshots."""

    def __init__(self, functions: Mapping[str, HostFunction], limits: Limits) -> None:
        self.functions = functions
        self.limits = limits
        self.calls = 0

    async def drive(self, monty: Any, session: Any, code: str, printed: Any) -> Any:
        snapshot = await session.feed_start(code, print_callback=printed)
        settled: dict[int, dict[str, Any]] = {}
        while not isinstance(snapshot, monty.MontyComplete):
            if isinstance(snapshot, monty.AsyncFunctionSnapshot):
                if snapshot.is_os_function:
                    snapshot = await snapshot.resume_not_handled()  # no file system, no environment
                    continue
                result = await self.host_call(str(snapshot.function_name), snapshot.args, snapshot.kwargs)
                if snapshot.allow_eager_await:  # `await f(...)`: hand over a future, settle it at once
                    settled[snapshot.call_id] = result
                    snapshot = await snapshot.resume({"future": ...})
                else:
                    snapshot = await snapshot.resume(result)
            elif isinstance(snapshot, monty.AsyncFutureSnapshot):
                unknown = {"exc_type": "RuntimeError", "message": "unknown call"}
                snapshot = await snapshot.resume({i: settled.pop(i, unknown) for i in snapshot.pending_call_ids})
            else:  # a name the code never defined
                snapshot = await snapshot.resume()
        return snapshot.output

    async def host_call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        function = self.functions.get(name)
        if function is None:
            return {"exc_type": "NameError", "message": f"name {name!r} is not defined"}
        self.calls += 1
        if self.calls > self.limits.max_calls:
            return {"exc_type": "RuntimeError", "message": f"more than {self.limits.max_calls} tool calls in one run"}
        try:
            inspect.signature(function).bind(*args, **kwargs)
        except TypeError as exc:  # wrong arguments for the host function's signature
            return {"exc_type": "TypeError", "message": f"{name}(): {exc}"}
        try:
            return {"return_value": await function(*args, **kwargs)}
        except SandboxError as exc:
            return {"exc_type": exc.exc_type, "message": exc.message}

    def outcome(
        self, ok: bool, printed: Any, started: float, *, value: Any = None, error: str | None = None
    ) -> Outcome:
        output = printed.output
        if len(output.encode()) > self.limits.output:
            output = output.encode()[: self.limits.output].decode(errors="ignore") + "\n[output truncated]"
        return Outcome(
            ok, value=value, output=output, error=error, calls=self.calls, elapsed=time.monotonic() - started
        )
