"""Retries: only where safe, full-jitter exponential backoff, a budget per backend."""

from __future__ import annotations

import random

import pytest

from hopline import jsonrpc as j
from hopline.layers.resilience.breaker import Breakers, BreakerSettings, CircuitOpen
from hopline.layers.resilience.outcome import Outcome
from hopline.layers.resilience.retry import Backoff, Retry, RetryBudget, RetryPolicy
from hopline.pipeline import Call, Pipeline


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def tool_call(target: str = "t", annotations: dict | None = None, backend: str = "b") -> Call:
    definition = {"name": f"{backend}__{target}", "inputSchema": {"type": "object"}}
    if annotations is not None:
        definition["annotations"] = annotations
    return Call(method="tools/call", backend=backend, params={"name": target}, target=target, definition=definition)


LOST = j.UnavailableError("backend b unavailable: exited", backend="b", reason="backend_closed").to_response(1)  # crash mid-call
NEVER = j.UnavailableError("backend b is unavailable", backend="b", reason="backend_unavailable")  # raised before sending
OK = j.result(1, {"content": [{"type": "text", "text": "ok"}]})


class Backend:
    """The last step: answers from a script, counts attempts."""

    def __init__(self, *script) -> None:
        self.script = list(script)
        self.attempts = 0

    async def __call__(self, call: Call) -> j.Message:
        self.attempts += 1
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, BaseException):
            raise item
        return item


def retry_layer(policy: RetryPolicy = RetryPolicy(), budget=lambda: RetryBudget(1.0, 10, 100), seed: int = 7) -> tuple[Retry, list[float]]:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    return Retry(policy, backoff=Backoff(0.1, 1.0), budget=budget, rng=random.Random(seed), sleep=sleep), slept


async def run(layer, call: Call, backend: Backend):
    try:
        return await Pipeline(calls=[layer]).run(call, backend)
    except j.HoplineError as exc:
        return exc


# -- backoff and budget ---------------------------------------------------------------------------
def test_backoff_is_exponential_full_jitter_and_capped():
    rng = random.Random(1)
    b = Backoff(0.1, 1.0)
    for retry, ceiling in enumerate([0.1, 0.2, 0.4, 0.8, 1.0, 1.0]):
        delays = [b.delay(retry, rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > 0.8 * ceiling and min(delays) < 0.2 * ceiling  # spread over the whole range


def test_two_gateways_do_not_retry_in_step():
    a, b = random.Random(1), random.Random(2)
    assert [Backoff().delay(2, a) for _ in range(5)] != [Backoff().delay(2, b) for _ in range(5)]


def test_the_budget_allows_a_floor_then_a_share_of_requests():
    clock = Clock()
    budget = RetryBudget(ratio=0.2, window=10, floor=2, clock=clock)
    assert budget.spend() and budget.spend() and not budget.spend()  # the floor, with no requests at all
    for _ in range(20):
        budget.request()
    assert budget.spend() and budget.spend()  # 20 % of 20 = 4 retries in the window
    assert not budget.spend()
    clock.now += 10.5  # the window slides past everything
    assert budget.spend() and budget.spend() and not budget.spend()


# -- what is retried --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "annotations,operator,safe",
    [
        (None, {}, False),
        ({"readOnlyHint": True}, {}, True),
        ({"idempotentHint": True}, {}, True),
        ({"readOnlyHint": False, "idempotentHint": False, "destructiveHint": True}, {}, False),
        ({"readOnlyHint": "yes"}, {}, False),  # only a real true counts
        (None, {"b": frozenset({"t"})}, True),
        (None, {"other": frozenset({"t"})}, False),
    ],
)
def test_a_tool_is_safe_to_repeat_only_when_annotated_or_listed(annotations, operator, safe):
    assert RetryPolicy(tools=operator).is_safe(tool_call(annotations=annotations)) is safe


def test_annotations_can_be_distrusted():
    assert not RetryPolicy(trust_annotations=False).is_safe(tool_call(annotations={"readOnlyHint": True}))


@pytest.mark.parametrize("method,safe", [("resources/read", True), ("prompts/get", True), ("completion/complete", True), ("tasks/get", True), ("tasks/cancel", False), ("resources/subscribe", False)])
def test_reads_are_safe_to_repeat(method, safe):
    assert RetryPolicy().is_safe(Call(method=method, backend="b", params={})) is safe


async def test_a_request_that_never_left_is_retried_for_any_tool():
    layer, slept = retry_layer()
    backend = Backend(NEVER, OK)
    call = tool_call()
    assert await run(layer, call, backend) is OK
    assert backend.attempts == 2 and len(slept) == 1 and 0 <= slept[0] <= 0.1
    assert [name for name, _ in call.events] == ["retry"]


async def test_a_side_effecting_tool_that_failed_after_sending_is_not_repeated():
    layer, slept = retry_layer()
    backend = Backend(LOST, OK)
    answer = await run(layer, tool_call(), backend)
    assert answer is LOST and backend.attempts == 1 and slept == []


@pytest.mark.parametrize("annotations", [{"readOnlyHint": True}, {"idempotentHint": True}])
async def test_an_idempotent_tool_that_failed_after_sending_is_repeated(annotations):
    layer, slept = retry_layer()
    backend = Backend(LOST, j.PeerError("garbage"), OK)
    assert await run(layer, tool_call(annotations=annotations), backend) is OK
    assert backend.attempts == 3 and len(slept) == 2 and slept[1] <= 0.2


async def test_attempts_are_bounded_and_the_last_failure_is_the_answer():
    layer, slept = retry_layer(RetryPolicy(max_attempts=3))
    backend = Backend(LOST)
    answer = await run(layer, tool_call(annotations={"readOnlyHint": True}), backend)
    assert answer is LOST and backend.attempts == 3 and len(slept) == 2


@pytest.mark.parametrize(
    "answer",
    [
        OK,
        j.result(1, {"content": [], "isError": True}),  # the tool failed: its business
        j.InvalidParams("bad").to_response(1),  # answered on purpose
        j.UnavailableError("downstream's backend", backend="elsewhere").to_response(1),
    ],
)
async def test_answers_are_never_retried(answer):
    layer, _ = retry_layer()
    backend = Backend(answer, OK)
    assert await run(layer, tool_call(annotations={"readOnlyHint": True}), backend) is answer
    assert backend.attempts == 1


async def test_timeouts_are_retried_only_when_configured():
    timeout = j.BackendTimeout("slow", backend="b")
    for on_timeout, attempts in ((False, 1), (True, 2)):
        layer, _ = retry_layer(RetryPolicy(on_timeout=on_timeout))
        backend = Backend(timeout, OK)
        await run(layer, tool_call(annotations={"readOnlyHint": True}), backend)
        assert backend.attempts == attempts


async def test_the_budget_stops_retries_and_says_so():
    clock = Clock()
    layer, slept = retry_layer(budget=lambda: RetryBudget(ratio=0.2, window=10, floor=0, clock=clock))
    backend = Backend(NEVER)
    calls = [tool_call() for _ in range(10)]
    for c in calls:
        await run(layer, c, backend)
    # 10 requests, 20 %: 2 retries in all (by the 5th and the 10th request), not 20
    assert backend.attempts == 12 and len(slept) == 2
    assert [i for i, c in enumerate(calls) if any(name == "retry" for name, _ in c.events)] == [4, 9]
    assert all(any(name == "retry.budget_exhausted" for name, _ in c.events) for c in calls)


async def test_budgets_are_per_backend():
    layer, _ = retry_layer(budget=lambda: RetryBudget(ratio=0.0, window=10, floor=1))
    assert isinstance(await run(layer, tool_call(backend="a"), Backend(NEVER)), j.UnavailableError)
    assert await run(layer, tool_call(backend="b"), Backend(NEVER, OK)) is OK


async def test_an_open_circuit_stops_the_retries():
    breakers = Breakers(BreakerSettings(failures=1, cool_down=60))
    layer, slept = retry_layer()
    backend = Backend(LOST, OK)
    try:
        answer = await Pipeline(calls=[layer, breakers]).run(tool_call(annotations={"readOnlyHint": True}), backend)
    except CircuitOpen as exc:
        answer = exc
    assert isinstance(answer, CircuitOpen) and backend.attempts == 1 and len(slept) == 1


async def test_server_to_client_requests_pass_through():
    layer, _ = retry_layer()
    backend = Backend(j.UnavailableError("client gone", reason="client_closed"), OK)
    answer = await run(layer, Call(method="sampling/createMessage", backend="b", params={}, direction="to_client"), backend)
    assert isinstance(answer, j.UnavailableError) and backend.attempts == 1


def test_outcomes_that_may_be_retried():
    policy = RetryPolicy()
    unsafe = tool_call()
    assert [o for o in Outcome if policy.may_retry(unsafe, o)] == [Outcome.NEVER_SENT]
    safe = tool_call(annotations={"readOnlyHint": True})
    assert {o for o in Outcome if policy.may_retry(safe, o)} == {Outcome.NEVER_SENT, Outcome.FAILED}
