"""``tools`` configuration: the mode, its settings, and ``build``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hopline.config.schema import GatewayConfig
from hopline.layers.capability.toolmodes import CodeMode, SearchMode, build

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
