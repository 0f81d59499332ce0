"""Layer 4 in front of a real backend session (fault_server.py over stdio, BackendSession).

Each test asserts that every request got exactly one answer, promptly, and what the
backend saw (its --events file): cancellations that arrived, side effects executed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hopline import jsonrpc as j
from hopline.binding import Era
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.resilience.breaker import Breakers, BreakerSettings, CircuitOpen
from hopline.layers.resilience.outcome import Classifier
from hopline.layers.resilience.retry import Backoff, Retry, RetryBudget, RetryPolicy
from hopline.layers.resilience.timeouts import Timeouts
from hopline.pipeline import Call, Pipeline
from hopline.transports.stdio import StdioChild
from tests.conftest import PY, SERVERS

FAULT = str(SERVERS / "fault_server.py")
PROMPT = 3.0  # seconds: "promptly", generous for a loaded 2-core machine


class Fault:
    """fault_server.py children, reopened on demand (as the gateway reconnects)."""

    def __init__(self, events: Path) -> None:
        self.events = events
        self.session: BackendSession | None = None
        self.opened: list[BackendSession] = []

    async def open(self) -> BackendSession:
        child = await StdioChild.spawn([PY, FAULT, "--events", str(self.events)], name="f")
        self.session = await BackendSession.open("f", child, prefer=Era.HANDSHAKE, timeout=10)
        self.opened.append(self.session)
        return self.session

    async def last(self, call: Call) -> j.Message:
        """The gateway's last step: the current session, or refuse before sending."""
        if self.session is None or self.session.is_closed():
            raise j.UnavailableError("backend f is unavailable", backend="f", reason="backend_unavailable")
        return await self.session.call(call.method, call.params, timeout=call.timeout)

    async def reopening_last(self, call: Call) -> j.Message:
        if self.session is None or self.session.is_closed():
            await self.open()
        return await self.last(call)

    def lines(self) -> list[str]:
        return self.events.read_text().splitlines() if self.events.exists() else []

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self.opened), return_exceptions=True)


@pytest.fixture
async def fault(tmp_path):
    f = Fault(tmp_path / "events")
    await f.open()
    yield f
    await f.aclose()


def tool(name: str, annotations: dict | None = None, timeout: float | None = 10.0) -> Call:
    definition = {"name": name, "annotations": annotations} if annotations else {"name": name}
    return Call(method="tools/call", backend="f", params={"name": name, "arguments": {}}, target=name, definition=definition, timeout=timeout)


async def answer_of(pipe: Pipeline, call: Call, last) -> j.Message | j.HoplineError:
    try:
        return await asyncio.wait_for(pipe.run(call, last), PROMPT)
    except j.HoplineError as exc:
        return exc


async def test_a_hung_call_times_out_promptly_and_the_backend_is_told_to_cancel(fault):
    pipe = Pipeline(calls=[Timeouts(methods={"tools/call": 0.3})])
    loop = asyncio.get_running_loop()
    started = loop.time()
    got = await answer_of(pipe, tool("stall"), fault.last)
    elapsed = loop.time() - started
    assert isinstance(got, j.BackendTimeout) and got.code == -31002 and got.data == {"backend": "f", "reason": "timeout"}
    assert 0.3 <= elapsed < 0.3 + 1.0  # the deadline, not the backstop
    # The backend reads in order: once a later call is answered, the cancellation has arrived.
    echo = await answer_of(pipe, Call(method="tools/call", backend="f", params={"name": "echo", "arguments": {"text": "x"}}, target="echo"), fault.last)
    assert isinstance(echo, j.Message) and echo.body["result"]["content"][0]["text"] == "x"
    assert [line.split()[:2] for line in fault.lines() if line.startswith("cancelled")] == [["cancelled", "stall"]]


async def test_a_crash_mid_call_gives_every_caller_one_error_and_opens_the_circuit(fault):
    # One crash is one failure however many calls it fails (RpcPeer answers them with one
    # error), so a breaker that trips at one failure opens; three would need three crashes.
    breakers = Breakers(BreakerSettings(failures=1, cool_down=60), Classifier())
    changed: list[str] = []
    breakers.bind(changed.append)
    pipe = Pipeline(calls=[breakers, Timeouts()], gates=[breakers])
    in_flight = [asyncio.ensure_future(answer_of(pipe, tool("stall"), fault.last)) for _ in range(2)]
    # Both calls must be at the backend before it crashes (else one would not be in flight).
    deadline = asyncio.get_running_loop().time() + 10
    while sum(line.startswith("call stall") for line in fault.lines()) < 2:
        assert asyncio.get_running_loop().time() < deadline, fault.lines()
        await asyncio.sleep(0.01)
    crash = await answer_of(pipe, tool("crash"), fault.last)
    answers = [crash, *await asyncio.gather(*in_flight)]
    assert len(answers) == 3
    for a in answers:  # an error naming the backend, never a result (F4) and never a hang (F5)
        assert isinstance(a, j.Message) and a.body["error"]["code"] == -31001 and a.body["error"]["data"]["backend"] == "f"
    assert changed == ["f"] and not pipe.available("f")
    fast = await answer_of(pipe, tool("echo"), fault.reopening_last)
    assert isinstance(fast, CircuitOpen) and fast.data["retry_after_ms"] > 0
    assert len(fault.opened) == 1  # failing fast: no reconnect was even attempted


async def test_garbage_from_the_backend_does_not_count_against_it(fault):
    breakers = Breakers(BreakerSettings(failures=1), Classifier())
    pipe = Pipeline(calls=[breakers, Timeouts()], gates=[breakers])
    got = await answer_of(pipe, tool("garbage"), fault.last)
    assert isinstance(got, j.Message) and "real answer" in got.body["result"]["content"][0]["text"]
    assert pipe.available("f")


def retrying(slept: list[float]) -> Retry:
    async def sleep(delay: float) -> None:
        slept.append(delay)

    return Retry(RetryPolicy(max_attempts=3), Classifier(), backoff=Backoff(0.01, 0.05), budget=lambda: RetryBudget(1.0, 10, 10), sleep=sleep)


async def test_a_lost_response_of_a_side_effecting_tool_is_not_repeated(fault):
    """FAULT-16: the backend executed, then died before answering."""
    slept: list[float] = []
    pipe = Pipeline(calls=[retrying(slept), Timeouts()])
    got = await answer_of(pipe, tool("effect"), fault.reopening_last)
    assert isinstance(got, j.Message) and got.body["error"]["code"] == -31001
    assert [line for line in fault.lines() if line.startswith("effect")] == ["effect effect"]
    assert slept == []


async def test_an_idempotent_tool_is_repeated_within_the_attempt_limit(fault):
    slept: list[float] = []
    pipe = Pipeline(calls=[retrying(slept), Timeouts()])
    got = await answer_of(pipe, tool("effect_idempotent", {"idempotentHint": True}), fault.reopening_last)
    assert isinstance(got, j.Message) and got.body["error"]["code"] == -31001  # every attempt died the same way
    assert [line for line in fault.lines() if line.startswith("effect")] == ["effect effect_idempotent"] * 3
    assert len(slept) == 2 and len(fault.opened) == 3


async def test_a_call_that_never_left_is_retried_once_the_backend_is_back(fault):
    await fault.session.aclose()  # the session is gone before the call: nothing can be sent
    slept: list[float] = []
    reopened = False

    async def last(call: Call) -> j.Message:
        nonlocal reopened
        if not reopened and slept:  # the gateway reconnected while the retry waited
            reopened = True
            await fault.open()
        return await fault.last(call)

    pipe = Pipeline(calls=[retrying(slept), Timeouts()])
    got = await answer_of(pipe, Call(method="tools/call", backend="f", params={"name": "echo", "arguments": {"text": "late"}}, target="echo"), last)
    assert isinstance(got, j.Message) and got.body["result"]["content"][0]["text"] == "late"
    assert len(slept) == 1 and fault.lines() == ["call echo"]  # executed exactly once
