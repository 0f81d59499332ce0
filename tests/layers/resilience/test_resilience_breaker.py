"""The breaker's transition table, with a fake clock: every transition, permits, trials, the gate."""

from __future__ import annotations

import asyncio
import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hopline import jsonrpc as j
from hopline.layers.resilience.breaker import TRANSITIONS, Breaker, Breakers, BreakerSettings, CircuitOpen, Event, IllegalTransition, State
from hopline.layers.resilience.outcome import Classifier, Outcome
from hopline.pipeline import Call, Pipeline


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


S = BreakerSettings(failures=3, failure_rate=0.5, min_calls=10, window=10.0, cool_down=5.0, max_cool_down=20.0)


def breaker(settings: BreakerSettings = S) -> tuple[Breaker, Clock, list[tuple[State, State]]]:
    clock = Clock()
    b = Breaker("b", settings, clock)
    moves: list[tuple[State, State]] = []
    b.on_transition = lambda name, old, new: moves.append((old, new))
    return b, clock, moves


def fail(b: Breaker, n: int = 1) -> None:
    for _ in range(n):
        b.record(b.acquire(), Outcome.FAILED)


def succeed(b: Breaker, n: int = 1) -> None:
    for _ in range(n):
        b.record(b.acquire(), Outcome.OK)


def test_the_table_is_the_drafts_three_states():
    assert TRANSITIONS == {
        (State.CLOSED, Event.SUCCESS): State.CLOSED,
        (State.CLOSED, Event.FAILURE): State.CLOSED,
        (State.CLOSED, Event.TRIP): State.OPEN,
        (State.OPEN, Event.COOLED): State.HALF_OPEN,
        (State.HALF_OPEN, Event.SUCCESS): State.CLOSED,
        (State.HALF_OPEN, Event.FAILURE): State.OPEN,
    }


@pytest.mark.parametrize("state,event", [(s, e) for s in State for e in Event if (s, e) not in TRANSITIONS])
def test_every_pair_outside_the_table_is_one_clear_error(state, event):
    b, _, _ = breaker()
    b.state = state
    with pytest.raises(IllegalTransition, match=f"{event.value} is not allowed in state {state.value}"):
        b._apply(event)


def test_closed_opens_after_n_consecutive_failures():
    b, _, moves = breaker()
    fail(b, 2)
    assert b.state is State.CLOSED and moves == []
    fail(b)
    assert b.state is State.OPEN and moves == [(State.CLOSED, State.OPEN)]


def test_a_success_resets_the_consecutive_count():
    b, _, _ = breaker()
    fail(b, 2)
    succeed(b)
    fail(b, 2)
    assert b.state is State.CLOSED


def test_closed_opens_on_the_failure_rate_once_the_window_has_enough_calls():
    b, _, _ = breaker()
    for _ in range(4):  # alternate: never 3 in a row; 4 failures of 8 calls, below min_calls
        fail(b)
        succeed(b)
    assert b.state is State.CLOSED
    fail(b)
    succeed(b)  # 10 calls, 5 failures: 50 %
    assert b.state is State.CLOSED  # the rate is checked when a failure is recorded
    fail(b)  # 11 calls, 6 failures
    assert b.state is State.OPEN


def test_old_calls_leave_the_rate_window():
    b, clock, _ = breaker()
    for _ in range(5):
        fail(b)
        succeed(b)
    clock.now += 11  # the whole window has passed
    for _ in range(4):
        succeed(b)
    fail(b)
    assert b.state is State.CLOSED


def test_open_rejects_fast_with_retry_after_and_a_clear_error():
    b, clock, _ = breaker()
    fail(b, 3)
    clock.now += 2
    with pytest.raises(CircuitOpen) as err:
        b.acquire()
    assert err.value.code == -31001
    assert err.value.data == {"backend": "b", "reason": "circuit_open", "retry_after_ms": 3000}
    assert "unavailable" in err.value.message and "circuit open" in err.value.message


def test_open_becomes_half_open_after_the_cool_down_and_lets_exactly_one_trial_through():
    b, clock, moves = breaker()
    fail(b, 3)
    clock.now += 5
    trial = b.acquire()
    assert b.state is State.HALF_OPEN and moves[-1] == (State.OPEN, State.HALF_OPEN)
    for _ in range(3):
        with pytest.raises(CircuitOpen):
            b.acquire()
    b.record(trial, Outcome.OK)
    assert b.state is State.CLOSED and moves[-1] == (State.HALF_OPEN, State.CLOSED)


def test_a_failed_trial_reopens_with_a_doubled_capped_cool_down():
    b, clock, _ = breaker()
    fail(b, 3)
    waits = []
    for _ in range(4):
        clock.now += b.retry_after()
        trial = b.acquire()
        b.record(trial, Outcome.TIMEOUT)
        assert b.state is State.OPEN
        waits.append(b.retry_after())
    assert waits == [10.0, 20.0, 20.0, 20.0]
    clock.now += 20
    b.record(b.acquire(), Outcome.OK)
    fail(b, 3)
    assert b.retry_after() == 5.0  # closing resets the cool-down


def test_a_deliberate_error_from_the_backend_is_a_success():
    b, clock, _ = breaker()
    fail(b, 3)
    clock.now += 5
    b.record(b.acquire(), Outcome.ANSWERED)
    assert b.state is State.CLOSED


def test_a_neutral_or_cancelled_trial_frees_the_slot_without_a_transition():
    b, clock, _ = breaker()
    fail(b, 3)
    clock.now += 5
    trial = b.acquire()
    b.record(trial, Outcome.REJECTED)
    assert b.state is State.HALF_OPEN
    trial = b.acquire()  # a second trial may run now
    b.release(trial)
    b.record(b.acquire(), Outcome.OK)
    assert b.state is State.CLOSED


def test_stragglers_from_an_earlier_state_change_nothing():
    b, clock, _ = breaker()
    early = [b.acquire() for _ in range(5)]  # in flight while CLOSED
    fail(b, 3)
    assert b.state is State.OPEN
    b.record(early[0], Outcome.OK)  # cannot close an OPEN circuit
    assert b.state is State.OPEN
    clock.now += 5
    trial = b.acquire()
    b.record(early[1], Outcome.FAILED)  # cannot fail the trial for it
    assert b.state is State.HALF_OPEN
    b.record(trial, Outcome.OK)
    b.record(early[2], Outcome.FAILED)
    b.record(early[3], Outcome.FAILED)
    b.record(early[4], Outcome.FAILED)
    assert b.state is State.CLOSED


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["ok", "failed", "answered", "rejected", "acquire", "tick"]), st.floats(0, 8)), max_size=60))
def test_invariants_under_any_sequence(ops):
    """At most one trial in HALF_OPEN; the gate flips exactly with CLOSED; every move is in the table."""
    clock = Clock()
    gate = Breakers(S, clock=clock)
    flips: list[str] = []
    gate.bind(flips.append)
    moves: list[tuple[State, State]] = []
    gate.subscribe(lambda name, old, new: moves.append((old, new)))
    b = gate.breaker("b")
    held: list[int] = []
    for op, dt in ops:
        if op == "tick":
            clock.now += dt
            continue
        try:
            permit = b.acquire()
        except CircuitOpen:
            assert b.state is not State.CLOSED
            continue
        if op == "acquire":
            held.append(permit)
            continue
        b.record(permit, {"ok": Outcome.OK, "failed": Outcome.FAILED, "answered": Outcome.ANSWERED, "rejected": Outcome.REJECTED}[op])
        if b.state is State.HALF_OPEN:  # at most one trial: the held one, or the next one taken
            if b.epoch not in held:
                trial = b.acquire()
                with pytest.raises(CircuitOpen):
                    b.acquire()
                b.release(trial)
            else:
                with pytest.raises(CircuitOpen):
                    b.acquire()
        assert gate.available("b") == (b.state is State.CLOSED)
    assert all(any(TRANSITIONS.get((old, e)) is new for e in Event) for old, new in moves)
    assert len(flips) == sum(1 for old, new in moves if (old is State.CLOSED) != (new is State.CLOSED))


# -- Breakers: the gate, the call layer, trials ------------------------------------------------
def call(backend: str = "b", method: str = "tools/call") -> Call:
    return Call(method=method, backend=backend, params={"name": "t"}, target="t")


def answering(*answers):
    """A last step that answers (or raises) each of ``answers`` in turn."""
    queue = list(answers)

    async def last(c: Call) -> j.Message:
        item = queue.pop(0)
        if isinstance(item, BaseException):
            raise item
        # Each call gets its own answer object: answers sharing one error object are one
        # lost connection to the breaker (test_one_lost_connection_is_one_failure…).
        return j.Message(copy.deepcopy(item.body))

    return last


def error_answer(code: int, backend: str | None = "b", reason: str = "backend_closed") -> j.Message:
    err = {"code": code, "message": "x"}
    if backend is not None:
        err["data"] = {"backend": backend, "reason": reason}
    return j.Message({"jsonrpc": "2.0", "id": 1, "error": err})


OK = j.result(1, {"content": []})
TOOL_ERROR = j.result(1, {"content": [], "isError": True})


async def run_all(gate: Breakers, *answers) -> list:
    pipe = Pipeline(calls=[gate], gates=[gate])
    last = answering(*answers)
    seen = []
    for _ in answers:
        try:
            seen.append(await pipe.run(call(), last))
        except j.HoplineError as exc:
            seen.append(exc)
    return seen


@pytest.mark.parametrize(
    "answer,opens",
    [
        (OK, False),
        (TOOL_ERROR, False),  # the tool said no: not the backend's failure
        (error_answer(-32602, None), False),  # a JSON-RPC error answered on purpose
        (error_answer(-31001, "other-backend"), False),  # a downstream intermediary about its own backend
        (error_answer(-31001, "b"), True),  # RpcPeer: the child exited mid-call
        (error_answer(-31001, "http://b.example/mcp", "unreachable"), True),  # the HTTP upstream names its URL
        (error_answer(-31001, "b/handshake"), True),  # the multiplexer names id/era
        (error_answer(-31003, None), True),  # PeerError: garbage
        (error_answer(-31002, "b", "timeout"), True),
        (j.BackendTimeout("t", backend="b"), True),
        (j.UnavailableError("gone", backend="b", reason="backend_closed"), True),
        (j.PeerError("garbage"), True),
        (j.InvalidParams("bad"), False),  # the request was wrong
        (error_answer(-31001, "b", "at_capacity"), False),  # hopline's own child cap: back-pressure, not the backend
        (j.UnavailableError("cap", backend="b", reason="at_capacity"), False),
        (j.UnavailableError("shed", backend="b", reason="overloaded"), False),
    ],
)
async def test_what_counts_as_a_failure(answer, opens):
    gate = Breakers(BreakerSettings(failures=2), Classifier({"b": ["http://b.example/mcp"]}), clock=Clock())
    await run_all(gate, answer, answer)
    assert gate.available("b") is (not opens)


async def test_the_gate_withdraws_on_open_and_restores_on_close_with_change_calls():
    clock = Clock()
    gate = Breakers(BreakerSettings(failures=2, cool_down=5), clock=clock)
    changed: list[str] = []
    gate.bind(changed.append)
    assert gate.available("b") and gate.available("never-called")
    seen = await run_all(gate, j.BackendTimeout("t", backend="b"), j.BackendTimeout("t", backend="b"), OK)
    assert isinstance(seen[-1], CircuitOpen)  # the third call failed fast, never reached the backend
    assert changed == ["b"] and not gate.available("b")
    clock.now += 5
    probed: list[str] = []

    async def probe(backend: str) -> j.Message:
        probed.append(backend)
        assert gate.states()["b"] is State.HALF_OPEN and not gate.available("b")  # still withdrawn during the trial
        return j.result(1, {})

    assert gate.due() == ["b"]
    assert await gate.trial("b", probe) is State.CLOSED
    assert probed == ["b"] and changed == ["b", "b"] and gate.available("b")


async def test_a_trial_before_the_cool_down_does_nothing():
    gate = Breakers(BreakerSettings(failures=1), clock=Clock())
    await run_all(gate, j.PeerError("x"))

    async def probe(backend: str) -> j.Message:
        raise AssertionError("no trial before the cool-down")

    assert gate.due() == [] and await gate.trial("b", probe) is State.OPEN


@pytest.mark.parametrize("outcome", ["raises", "unavailable", "hangs", "peer_error_answer"])
async def test_a_failed_trial_reopens(outcome):
    clock = Clock()
    gate = Breakers(BreakerSettings(failures=1, cool_down=1), clock=clock, probe_timeout=0.05)
    await run_all(gate, j.PeerError("x"))
    clock.now += 1

    async def probe(backend: str) -> j.Message:
        if outcome == "raises":
            raise RuntimeError("cannot even build the probe")
        if outcome == "unavailable":
            raise j.UnavailableError("no", backend="b", reason="backend_unavailable")
        if outcome == "hangs":
            await asyncio.Event().wait()
        return error_answer(-31003, None)

    assert await asyncio.wait_for(gate.trial("b", probe), 5) is State.OPEN
    assert gate.breaker("b").retry_after() == 2.0


async def test_the_supervisor_runs_one_trial_per_cool_down_and_wakes_on_a_new_open():
    clock = Clock()
    gate = Breakers(BreakerSettings(failures=1, cool_down=5), clock=clock)
    trials: list[tuple[str, float]] = []
    slept: list[float] = []
    healthy = asyncio.Event()

    async def sleep(delay: float) -> None:  # virtual time: advance the fake clock, don't wait
        slept.append(delay)
        clock.now += delay

    async def probe(backend: str) -> j.Message:
        trials.append((backend, clock.now))
        if len(trials) < 2:
            return error_answer(-31001, backend)
        healthy.set()
        return j.result(1, {})

    task = asyncio.create_task(gate.supervise(probe, sleep=sleep))
    await asyncio.sleep(0)  # the supervisor is idle: nothing is open
    assert slept == [] and trials == []
    await run_all(gate, j.PeerError("x"))  # opens: wakes the supervisor
    await asyncio.wait_for(healthy.wait(), 5)
    task.cancel()
    assert [t[0] for t in trials] == ["b", "b"]
    assert trials[1][1] - trials[0][1] == 10.0  # the second cool-down doubled
    assert slept == [5.0, 10.0] and gate.available("b")


async def test_one_lost_connection_is_one_failure_however_many_calls_it_fails():
    """A shared child dying under many calls: RpcPeer answers them all with one error (one
    ``data`` object), which the breaker counts once; two separate losses are two failures."""
    from hopline.layers.transport.rpc import RpcPeer
    from hopline.transports.memory import memory_pair as pair

    gate = Breakers(BreakerSettings(failures=2), Classifier(), clock=Clock())
    pipe = Pipeline(calls=[gate], gates=[gate])

    async def lose_a_connection_under(n: int) -> list:
        near, far = pair()
        peer = RpcPeer(near, name="b")

        async def send(c: Call) -> j.Message:
            return await peer.call("tools/call", {"name": "x"}, timeout=10)

        calls = [asyncio.ensure_future(pipe.run(call(), send)) for _ in range(n)]
        for _ in range(n):  # every request reached the backend, which then goes away
            await asyncio.wait_for(far.receive(), 5)
        await far.aclose()
        return await asyncio.wait_for(asyncio.gather(*calls), 5)

    answers = await lose_a_connection_under(10)
    assert all(a.body["error"]["data"]["reason"] == "backend_closed" for a in answers)
    assert gate.available("b")  # ten calls, one loss: one failure of the two that trip it
    await lose_a_connection_under(3)
    assert not gate.available("b")  # a second loss is a second failure


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["ok", "tool_error", "lost", "answered", "tick"]), max_size=40))
async def test_the_call_layer_counts_exactly_as_record_does(ops):
    """The call layer's shortcut for a result on a closed circuit (no walk through the table)
    leaves the breaker exactly as ``record(permit, classifier.answer(...))`` would."""
    clock = Clock()
    settings_ = BreakerSettings(failures=3, failure_rate=0.5, min_calls=4, window=10, cool_down=5)
    gate, twin = Breakers(settings_, clock=clock), Breaker("b", settings_, clock)
    pipe = Pipeline(calls=[gate], gates=[gate])
    answers = {"ok": OK, "tool_error": TOOL_ERROR, "lost": error_answer(-31001, "b"), "answered": error_answer(-32602, None)}
    for op in ops:
        if op == "tick":
            clock.now += 2.5
            continue
        try:
            await pipe.run(call(), answering(answers[op]))
        except j.HoplineError:
            pass
        try:
            permit = twin.acquire()
        except CircuitOpen:
            pass
        else:
            twin.record(permit, gate.classifier.answer("b", answers[op]))
        b = gate.breaker("b")
        assert (b.state, b.epoch, b._consecutive, b._window.totals()) == (twin.state, twin.epoch, twin._consecutive, twin._window.totals())
