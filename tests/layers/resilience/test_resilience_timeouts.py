"""Deadlines (tightest wins, backstop), partial failure of fan-out lists, and the config section."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from hopline import jsonrpc as j
from hopline.compose.resilience import build
from hopline.config.resilience import ResilienceConfig
from hopline.config.schema import GatewayConfig
from hopline.layers.resilience.outcome import Outcome
from hopline.layers.resilience.partial import FailMode, FanOut
from hopline.layers.resilience.timeouts import Timeouts
from hopline.pipeline import Call, Pipeline


def call(method: str = "tools/call", backend: str = "b", target: str | None = "t", timeout: float | None = 300.0) -> Call:
    return Call(method=method, backend=backend, params={}, target=target, timeout=timeout)


@pytest.mark.parametrize(
    "incoming,backend,method,tool,expected",
    [
        (300.0, None, None, None, 300.0),
        (300.0, 20.0, None, None, 20.0),
        (300.0, 20.0, 10.0, None, 10.0),
        (300.0, 20.0, 10.0, 2.0, 2.0),
        (1.0, 20.0, 10.0, 2.0, 1.0),  # the gateway's own default may be the tightest
        (None, None, 10.0, None, 10.0),
        (None, None, None, None, None),
    ],
)
def test_the_tightest_deadline_wins(incoming, backend, method, tool, expected):
    layer = Timeouts(
        backends={"b": backend} if backend else {},
        methods={"tools/call": method} if method else {},
        tools={"b": {"t": tool}} if tool else {},
    )
    assert layer.deadline_for(call(timeout=incoming)) == expected


def test_the_gateways_request_timeout_caps_everything():
    assert Timeouts(default=30, methods={"tools/call": 60}).deadline_for(call(timeout=None)) == 30


def test_tool_deadlines_are_per_backend_and_tools_call_only():
    layer = Timeouts(tools={"b": {"t": 2.0}})
    assert layer.deadline_for(call(backend="other")) == 300.0
    assert layer.deadline_for(call(method="prompts/get")) == 300.0


async def test_the_layer_sets_call_timeout_for_the_transport():
    seen = []

    async def last(c: Call) -> j.Message:
        seen.append(c.timeout)
        return j.result(1, {})

    await Pipeline(calls=[Timeouts(methods={"tools/call": 4.0})]).run(call(), last)
    assert seen == [4.0]


async def test_a_step_that_outlives_the_deadline_gets_a_backend_timeout_from_the_backstop():
    """If nothing below enforced the deadline, the client still gets one clear answer."""

    async def deaf(c: Call) -> j.Message:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    c = call(timeout=0.05)
    started = asyncio.get_running_loop().time()
    with pytest.raises(j.BackendTimeout) as err:
        await asyncio.wait_for(Pipeline(calls=[Timeouts(backstop=0.05)]).run(c, deaf), 5)
    assert asyncio.get_running_loop().time() - started < 2
    assert err.value.code == -31002 and err.value.data == {"backend": "b", "reason": "timeout"}
    assert ("timeout.backstop", {"backend": "b", "seconds": 0.05}) in c.events


async def test_an_inner_timeout_error_is_not_mistaken_for_ours():
    async def inner(c: Call) -> j.Message:
        raise TimeoutError("someone else's")

    with pytest.raises(TimeoutError, match="someone else's"):
        await Pipeline(calls=[Timeouts()]).run(call(), inner)


def test_fail_open_never_refuses_a_partial_list():
    FanOut(FailMode.OPEN).check("tools/list", ["a", "b"])


def test_fail_closed_refuses_a_list_with_a_missing_backend_but_not_a_withdrawn_one():
    fan = FanOut(FailMode.CLOSED)
    assert fan.fail_closed
    fan.check("tools/list", ["a"], withdrawn=["a"])  # its circuit is open: not part of the surface
    with pytest.raises(j.UnavailableError) as err:
        fan.check("tools/list", ["b", "a"], withdrawn=["a"])
    assert err.value.code == -31001 and err.value.data == {"backend": "b", "reason": "partial_failure"}
    assert "fail-closed" in err.value.message


# -- configuration ----------------------------------------------------------------------------------
BACKENDS = {"a": {"command": "x"}, "h": {"url": "http://h.example/mcp", "timeout": 7}}


def test_defaults_breakers_on_retries_for_safe_calls_fail_open():
    res = build(GatewayConfig.model_validate({"backends": BACKENDS}))
    gates, calls = res
    assert gates == [res.breakers] and [type(c).__name__ for c in calls] == ["Retry", "Breakers", "Timeouts"]
    assert not res.fan_out.fail_closed
    assert res.retry is not None and res.retry.policy.max_attempts == 3 and not res.retry.policy.on_timeout
    assert res.timeouts.backends == {"h": 7} and res.timeouts.default == 300  # listen.request_timeout
    assert res.timeouts.deadline_for(Call(method="tools/call", backend="a", params={})) == 300
    # the HTTP backend's URL is one of its names, so its transport's errors count against it
    assert res.classifier.answer("h", j.UnavailableError("x", backend="http://h.example/mcp").to_response(1)) is Outcome.FAILED


def test_everything_off_leaves_only_the_deadlines():
    conf = {"backends": BACKENDS, "resilience": {"breaker": {"enabled": False}, "retry": {"enabled": False}, "partial_failure": "fail-closed"}}
    res = build(GatewayConfig.model_validate(conf))
    gates, calls = res
    assert gates == [] and [type(c).__name__ for c in calls] == ["Timeouts"] and res.fan_out.fail_closed


def test_settings_reach_the_layers():
    conf = {
        "backends": BACKENDS,
        "resilience": {
            "breaker": {"failures": 2, "cool_down": 1.5, "max_cool_down": 3, "probe_timeout": 0.5},
            "retry": {"max_attempts": 4, "tools": {"a": ["write"]}, "trust_annotations": False},
            "timeouts": {"methods": {"tools/call": 9}, "tools": {"a": {"write": 1}}},
        },
    }
    res = build(GatewayConfig.model_validate(conf))
    assert res.breakers is not None and res.breakers.settings.failures == 2 and res.breakers.probe_timeout == 0.5
    assert res.retry is not None and res.retry.policy.tools == {"a": frozenset({"write"})} and not res.retry.policy.trust_annotations
    assert res.timeouts.deadline_for(Call(method="tools/call", backend="a", params={}, target="write", timeout=300)) == 1


@pytest.mark.parametrize(
    "section,where",
    [
        ({"breaker": {"failures": 0}}, "failures"),
        ({"breaker": {"cool_down": 10, "max_cool_down": 5}}, "max_cool_down"),
        ({"retry": {"budget": 1.5}}, "budget"),
        ({"timeouts": {"methods": {"tools/call": 0}}}, "tools/call"),
        ({"partial_failure": "sometimes"}, "partial_failure"),
        ({"breakers": {}}, "breakers"),  # unknown keys are errors
    ],
)
def test_bad_settings_are_refused_with_their_location(section, where):
    with pytest.raises(ValidationError) as err:
        GatewayConfig.model_validate({"backends": BACKENDS, "resilience": section})
    assert where in str(err.value)


def test_backend_ids_named_in_the_section_are_checked_against_the_backends():
    section = ResilienceConfig.model_validate({"retry": {"tools": {"ghost": ["x"]}}, "timeouts": {"tools": {"a": {"t": 1}}}})
    assert section.backend_problems(["a", "h"]) == [(("resilience", "retry", "tools", "ghost"), "no backend has this id (backends: a, h)")]
    assert ResilienceConfig().backend_problems([]) == []
