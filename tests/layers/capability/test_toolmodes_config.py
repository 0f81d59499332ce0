"""``tools`` configuration: the mode, its settings, and ``build``."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from hopline.compose.toolmodes import build
from hopline.config.schema import GatewayConfig
from hopline.layers.capability.toolmodes import CodeMode, SearchMode

BACKENDS = {"backends": {"a": {"command": "a"}}}


def config(**tools) -> GatewayConfig:
    return GatewayConfig.model_validate({**BACKENDS, "tools": tools})


def test_standard_is_the_default_and_builds_no_mode():
    assert GatewayConfig.model_validate(BACKENDS).tools.mode == "standard"
    assert build(GatewayConfig.model_validate(BACKENDS)) is None


def test_search_mode_with_its_settings():
    mode = build(config(mode="search", search={"top_k": 3, "max_top_k": 7}))
    assert isinstance(mode, SearchMode) and (mode.top_k, mode.max_top_k) == (3, 7)


def test_code_mode_defaults_follow_the_seed_and_can_be_changed():
    mode = build(config(mode="code"))
    assert isinstance(mode, CodeMode) and mode.limits.timeout == 7.0
    tuned = build(config(mode="code", code={"timeout": 2.5, "memory": 8 * 1024 * 1024, "output": 2048, "max_calls": 3}))
    assert (tuned.limits.timeout, tuned.limits.memory, tuned.limits.output, tuned.limits.max_calls) == (2.5, 8 * 1024 * 1024, 2048, 3)


def test_the_routing_delimiter_reaches_the_index():
    conf = GatewayConfig.model_validate({**BACKENDS, "routing": {"delimiter": "-"}, "tools": {"mode": "search"}})
    assert build(conf).cache.delimiter == "-"


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ({"mode": "fast"}, "mode"),
        ({"mode": "search", "search": {"top_k": 0}}, "top_k"),
        ({"mode": "search", "search": {"top_k": 9, "max_top_k": 3}}, "max_top_k"),
        ({"mode": "search", "code": {"timeout": 3}}, "applies to mode `code` only"),
        ({"search": {"top_k": 3}}, "applies to modes `search` and `code` only"),
        ({"mode": "code", "code": {"timeout": 0}}, "timeout"),
        ({"mode": "code", "code": {"timeot": 3}}, "timeot"),
        ({"mode": "code", "sandbox": "docker"}, "sandbox"),
    ],
)
def test_bad_settings_are_errors(tools, message):
    with pytest.raises(ValidationError) as error:
        config(**tools)
    assert message in str(error.value)


def test_groups_and_endpoints_build_one_plan_per_endpoint_sharing_the_modes():
    from hopline.compose.toolmodes import plans

    conf = GatewayConfig.model_validate(
        {
            "backends": {b: {"command": b} for b in ("a", "b", "c")},
            "tools": {"mode": "search", "groups": {"daily": {"backends": ["a"], "mode": "standard"}, "sql": {"backends": ["c"], "mode": "code"}}, "endpoints": {"/mcp/all/": "code"}},
        }
    )
    main, endpoints = plans(conf)
    assert [main.mode_of(b) for b in "abc"] == ["standard", "search", "code"]
    assert [name for name, _ in main.active] == ["code", "search"]
    assert list(endpoints) == ["/mcp/all"] and endpoints["/mcp/all"].uniform("code")
    assert endpoints["/mcp/all"].modes["code"] is main.modes["code"]  # one Code mode (and index cache) per gateway
    assert main.modes["search"].cache is main.modes["code"].cache


def test_code_settings_are_allowed_when_only_an_endpoint_uses_code():
    conf = config(endpoints={"/mcp/code": "code"}, code={"timeout": 3})
    assert conf.tools.code.timeout == 3 and build(conf) is None


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ({"groups": {"g": {"backends": ["zz"], "mode": "search"}}}, "tools.groups.g.backends.0: no backend has the id 'zz'"),
        ({"groups": {"g": {"backends": ["a"], "mode": "search"}, "h": {"backends": ["a"], "mode": "code"}}}, "backend 'a' is already in group 'g'"),
        ({"groups": {"g": {"backends": [], "mode": "search"}}}, "at least 1 item"),
        ({"groups": {"g": {"backends": ["a"]}}}, "mode"),
        ({"endpoints": {"/mcp": "search"}}, "is the main endpoint"),
        ({"endpoints": {"/mcp/": "search"}}, "is the main endpoint"),
        ({"endpoints": {"/sse": "search"}}, "keeps /sse"),
        ({"endpoints": {"/.well-known/x": "search"}}, "keeps /sse"),
        ({"endpoints": {"search": "search"}}, "starts with '/'"),
        ({"endpoints": {"/a?b": "search"}}, "plain"),
        ({"endpoints": {"/mcp/s": "fast"}}, "mode"),
        ({"endpoints": {"/mcp/s": {"mode": "search", "groups": {"g": {"backends": ["zz"], "mode": "code"}}}}}, "tools.endpoints./mcp/s.groups.g.backends.0"),
        ({"endpoints": {"/mcp/s": "search"}, "code": {"timeout": 3}}, "applies to mode `code` only"),
    ],
)
def test_bad_groups_and_endpoints_are_errors(tools, message):
    with pytest.raises(ValidationError) as error:
        config(**tools)
    assert message in str(error.value)


def test_code_mode_sandbox_pool_defaults_and_settings_reach_the_pool():
    pool = build(config(mode="code")).workers
    assert (pool.max_workers, pool.spares, pool.queue, pool.queue_wait, pool.idle_timeout) == (max(1, min(4, os.cpu_count() or 1)), 1, 32, 10.0, 60.0)
    assert pool.request_timeout == 8.0 and pool.checkout["limits"]["max_memory"] == 64 * 1024 * 1024
    code = {"max_workers": 3, "spares": 0, "queue": 5, "queue_wait": 1.5, "idle_timeout": 2, "timeout": 2}
    tuned = build(config(mode="code", code=code)).workers
    assert (tuned.max_workers, tuned.spares, tuned.queue, tuned.queue_wait, tuned.idle_timeout, tuned.request_timeout) == (3, 0, 5, 1.5, 2.0, 3.0)
    assert tuned.live == 0  # nothing is spawned before a run needs it


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ({"max_workers": 2, "spares": 3}, "spares: is more than max_workers (2)"),
        ({"max_workers": 0}, "max_workers"),
        ({"queue": -1}, "queue"),
        ({"idle_timeout": 0}, "idle_timeout"),
    ],
)
def test_bad_sandbox_pool_settings_are_errors(code, message):
    with pytest.raises(ValidationError) as error:
        config(mode="code", code=code)
    assert message in str(error.value)


def test_hopline_check_shows_the_sandbox_pool():
    from hopline.commands.check import explain

    lines = explain(config(mode="code", code={"max_workers": 2, "queue": 5, "idle_timeout": 30}))
    assert "  code sandbox: up to 2 workers, 1 spare, unused ones reaped after 30s; queue 5 runs, each waiting up to 10s; a run: 7s, 64 MiB, 100 tool calls" in lines
    assert not any("code sandbox" in line for line in explain(config(mode="search")))
