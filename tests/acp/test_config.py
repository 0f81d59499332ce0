"""The ``acp:`` section (src/hopline/config/acp.py) and how ``hopline acp`` merges it with its
command line (src/hopline/acp/settings.py). The chains built here are run by
test_gateway_component.py and test_restart.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
import yaml

from hopline.acp import chain
from hopline.acp.cli import add_arguments
from hopline.acp.settings import describe, explain, plan
from hopline.config.load import ConfigError, load_config, parse_config
from hopline.config.schema import GatewayConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "acp-chain.yaml"
AGENT = {"command": "my-agent", "args": ["--acp"]}


def problems(conf: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        parse_config(yaml.safe_dump(conf))
    return dict(info.value.problems)


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_chain_alone_needs_no_backends_but_the_gateway_does():
    config = parse_config(yaml.safe_dump({"backends": {}, "acp": {"components": [AGENT]}}))
    assert config.acp is not None and not config.acp.uses_gateway()
    assert "at least one backend is required" in problems({"backends": {}, "acp": {"components": [{"builtin": "gateway"}, AGENT]}})["backends"]
    assert "at least one backend is required" in problems({"backends": {}})["backends"]  # unchanged without acp


@pytest.mark.parametrize(
    ("acp", "where", "message"),
    [
        ({"components": []}, "acp.components", "list at least the terminal agent"),
        ({"components": [{"command": "x", "builtin": "gateway"}]}, "acp.components[0]", "set exactly one of `command`"),
        ({"components": [{}]}, "acp.components[0]", "neither is set"),
        ({"components": [{"builtin": "gateway", "args": ["x"]}, AGENT]}, "acp.components[0].args", "applies to `command` components only"),
        ({"components": [AGENT, {"builtin": "gateway"}]}, "acp.components[1]", "cannot be it"),
        ({"mode": "proxy", "components": [AGENT], "mcp_bridge": "http"}, "acp.mcp_bridge", "in proxy mode there is none"),
        ({"components": [AGENT], "on_crash": "reboot"}, "acp.on_crash", "'fail', 'bypass' or 'restart'"),
        ({"components": [{**AGENT, "dialect": "d9"}]}, "acp.components[0].dialect", "'d5'"),
        ({"components": [AGENT], "restart": {"max": 0}}, "acp.restart.max", "greater than or equal to 1"),
        ({"components": [AGENT], "tracing": "x"}, "acp.tracing", "unknown key"),
    ],
)
def test_each_mistake_is_reported_at_its_key(acp, where, message):
    found = problems({"backends": {"demo": {"command": "python", "args": ["-m", "hopline.demo"]}}, "acp": acp})
    assert where in found and message in found[where], found


def test_the_example_runs_the_gateway_the_bridge_and_the_agent_with_restarts():
    chosen = plan(args("--config", str(EXAMPLE)))
    c = chosen.chain
    assert [(x.name, x.proxy, x.builtin) for x in c.components] == [("hopline-gateway", True, "gateway"), ("hopline.acp.bridge", True, None), ("claude-agent-acp", False, None)]
    assert c.components[0].dialect == "d4" and c.components[1].argv[-2:] == ("--transport", "http")
    assert (c.on_crash, c.restart_attempts, c.restart_backoff) == ("restart", 3, 0.5)
    assert [c.policy(p) for p in (0, 1, 2, 3)] == ["fail", "restart", "restart", "restart"]
    assert [c.backoff(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert chosen.config is not None and list(chosen.config.backends) == ["demo"] and chosen.trace is None


def test_the_command_line_wins_over_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"backends": {"d": {"command": "python", "args": ["-m", "hopline.demo"]}}, "acp": {"components": [{"command": "proxy", "on_crash": "fail", "env": {"K": "V"}, "cwd": "/tmp"}, AGENT], "on_crash": "bypass", "trace": "file.jsonl", "restart": {"max": 5, "backoff": 1, "max_backoff": 3}}}))
    c = plan(args("--config", str(path))).chain
    assert [c.policy(p) for p in (1, 2)] == ["fail", "fail"]  # its own policy; the agent cannot be bypassed
    assert (c.components[0].env, c.components[0].cwd) == ({"K": "V"}, "/tmp")
    assert [c.backoff(n) for n in (1, 2, 3)] == [1, 2, 3]  # capped by max_backoff
    chosen = plan(args("--config", str(path), "--on-crash", "restart", "--restart-max", "2", "--restart-backoff", "0", "--trace", "t.jsonl", "--gateway", "--", "other-agent"))
    c = chosen.chain
    assert chosen.trace == "t.jsonl" and (c.on_crash, c.restart_attempts, c.restart_backoff) == ("restart", 2, 0)
    assert [(x.name, x.proxy) for x in c.components] == [("hopline-gateway", True), ("other-agent", False)]


def test_dialects_from_the_file_and_the_command_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"backends": {}, "acp": {"client_dialect": "d1", "components": [{"command": "p1", "dialect": "d1"}, {"command": "p2"}, {**AGENT, "dialect": "d4"}]}}))
    c = plan(args("--config", str(path))).chain
    assert [x.dialect for x in c.components] == ["d1", None, "d4"] and c.client_dialect == "d1"
    c = plan(args("--config", str(path), "--dialect", "d5", "--dialect", "1=d4", "--dialect", "0=d5")).chain
    assert [x.dialect for x in c.components] == ["d4", "d5", "d4"] and c.client_dialect == "d5"


def test_proxy_mode_from_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"backends": {"d": {"command": "python", "args": ["-m", "hopline.demo"]}}, "acp": {"mode": "proxy", "components": [{"builtin": "gateway"}, {"command": "p"}]}}))
    c = plan(args("--config", str(path))).chain
    assert c.mode == chain.PROXY_MODE and all(x.proxy for x in c.components)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--gateway", "--", "agent"), "give one with --config FILE"),
        ((), "agent mode needs at least the agent's command"),
    ],
)
def test_plans_that_cannot_run(argv, message):
    with pytest.raises(ValueError, match=message):
        plan(args(*argv))


def test_gateway_flag_with_a_file_without_backends(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"backends": {}, "acp": {"components": [AGENT]}}))
    with pytest.raises(ValueError, match="needs `backends` to serve"):
        plan(args("--config", str(path), "--gateway"))


def test_a_file_without_acp_and_no_commands(tmp_path):
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump({"backends": {"d": {"command": "python", "args": ["-m", "hopline.demo"]}}}))
    with pytest.raises(ValueError, match="no `acp` section"):
        plan(args("--config", str(path)))
    assert [x.builtin for x in plan(args("--config", str(path), "--gateway", "--", "agent")).chain.components] == ["gateway", None]


def test_the_section_is_in_the_published_schema_and_described_by_check():
    schema = GatewayConfig.model_json_schema()
    assert "acp" in schema["properties"] and "AcpConfig" in schema["$defs"]
    lines = describe(plan(args("--config", str(EXAMPLE))).chain)
    assert explain(load_config(EXAMPLE)) == lines and explain(parse_config("backends: {a: {command: x}}")) == []
    assert lines[0] == "acp chain (agent mode, on_crash restart: at most 3 restarts in a row, backoff 0.5 s doubling):"
    assert lines[1:] == ["  1. hopline-gateway (built-in gateway, proxy, dialect d4)", f"  2. hopline.acp.bridge (proxy, dialect auto): {sys.executable} -m hopline.acp.bridge --transport http", "  3. claude-agent-acp (agent): npx -y @zed-industries/claude-agent-acp"]


def test_check_shows_interpolated_arguments_as_written():
    text = yaml.safe_dump({"backends": {}, "acp": {"components": [{"command": "agent", "args": ["--token", "${AGENT_TOKEN}"]}]}})
    config = parse_config(text, env={"AGENT_TOKEN": "s3cret"})
    assert config.acp.components[0].args == ["--token", "s3cret"]
    (_, line) = explain(config)
    assert line == "  1. agent (agent): agent --token '${AGENT_TOKEN}'" and "s3cret" not in line
