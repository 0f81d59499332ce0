"""The conformance declaration (draft §4.2), from the CLI and from the HTTP endpoint."""

from __future__ import annotations

import subprocess

import httpx
import orjson
import pytest

from hopline.declaration import Deployment, declare, requirement_ids, tier_for
from tests.conftest import PY


@pytest.mark.req("TIER-DECLARE")
def test_cli_declares_tier_1_relay():
    out = subprocess.run([PY, "-m", "hopline", "declare"], capture_output=True, timeout=30, check=True)
    decl = orjson.loads(out.stdout)
    assert decl["tier"] == 1
    assert decl["modes"] == ["relay"]
    assert decl["layers"] == [1]
    assert decl["handshake"]["relay"].startswith("single-handshake passthrough")
    assert decl["intermediary"]["name"] == "hopline"
    assert {b["HOP-KEY"] for b in decl["bindings"]} == {"io.modelcontextprotocol/proxy-hops"}
    assert decl["requirements"] == requirement_ids()


@pytest.mark.req("TIER-DECLARE")
def test_http_endpoint_serves_the_same_declaration(hopline_relay):
    relay = hopline_relay()
    served = httpx.get(relay.base + "/.well-known/agent-tool-proxy", timeout=10).json()
    assert served["tier"] == 1 and served["modes"] == ["relay"]
    assert served["endpoints"]["mcp"] == relay.url


def test_tier_is_computed_from_layers():
    assert tier_for({1}) == 1
    assert tier_for({1, 2, 3}) == 2
    assert tier_for({1, 2}) == 1
    assert tier_for(set(range(1, 8))) == 3
    assert declare(Deployment(modes=["relay"]))["tier"] == 1


def test_credential_injection_is_declared_when_headers_are_configured():
    from hopline.commands.relay import _deployment
    from hopline.transports.targets import RemoteTarget

    assert _deployment(RemoteTarget("http://x/mcp", headers={"Authorization": "Bearer s"}), {}).token_propagation == "credential-injection"
    assert declare(Deployment())["token_propagation"] == "none"


def test_a_gateway_declares_the_layers_its_configuration_runs():
    """Layer 5 appears only when authentication or a policy is configured, and the tool
    mode in effect is declared: the declaration describes the running pipeline."""
    import yaml

    from hopline.config.load import parse_config
    from hopline.declaration import for_config

    base = {"backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}}}
    plain = declare(for_config(parse_config(yaml.safe_dump(base))))
    assert 5 not in plain["layers"] and plain["tool_mode"] == "standard" and plain["authentication"] == "none"
    governed = declare(for_config(parse_config(yaml.safe_dump({**base, "policy": {"rules": ["true"]}, "tools": {"mode": "search"}}))))
    assert governed["layers"] == [1, 2, 3, 4, 5, 6, 7] and governed["tier"] == 3 and governed["tool_mode"] == "search"


def test_the_capability_declaration_lists_all_seven_modes_with_the_tier_each_reaches():
    import subprocess
    import sys

    import orjson

    doc = orjson.loads(subprocess.run([sys.executable, "-m", "hopline", "declare", "--capabilities"], capture_output=True, check=True).stdout)
    assert doc["modes"] == ["conversion", "federation", "forward", "relay", "reverse", "sidecar", "transparent"]
    assert doc["tier"] == 3 and doc["layers"] == [1, 2, 3, 4, 5, 6, 7]
    tiers = {mode: entry["tier"] for mode, entry in doc["per_mode"].items()}
    assert tiers == {"relay": 1, "forward": 3, "reverse": 3, "sidecar": 3, "federation": 3, "conversion": 3, "transparent": 3}
    assert doc["per_mode"]["transparent"]["awareness_levels"]["1"] == {"tier": 1, "layers": [1, 5]}
