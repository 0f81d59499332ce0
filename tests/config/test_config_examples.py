"""Every file in examples/ loads, with the environment variables it needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hopline.config.load import ConfigError, load_config, parse_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
ENV = {"REMOTE_MCP_TOKEN": "test-token", "HOPLINE_INPUT_REMOTE_TOKEN": "input-token",  # the only ones without a default
       "REDIS_URL": "redis://127.0.0.1:6379/0", "HOPLINE_SESSION_KEY": "A" * 43,  # replicas.yaml's
       "HOPLINE_CI_KEY": "ci-key-0123456789abcdef"}  # auth.yaml's


def test_the_expected_examples_exist():
    assert {"gateway.yaml", "reverse.yaml", "claude_desktop_config.json", "auth.yaml"} <= {p.name for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_example_loads(path):
    config = load_config(path, env=ENV)
    assert config.backends or config.transparent is not None and config.transparent.destinations  # transparent mode has destinations instead
    for backend in config.backends.values():
        if backend.kind() == "stdio":
            assert backend.command == "python" and backend.args[:2] == ["-m", "hopline.demo"]


def test_gateway_example_shows_each_feature():
    cfg = load_config(EXAMPLES / "gateway.yaml", env={})
    assert cfg.mode == "forward" and [b.kind() for b in cfg.backends.values()] == ["stdio", "stdio", "http"]
    assert cfg.listen.port == 8000 and cfg.backends["remote"].headers["Authorization"] == "Bearer"
    assert load_config(EXAMPLES / "gateway.yaml", env={"HOPLINE_PORT": "9100"}).listen.port == 9100


def test_auth_example_trusts_an_issuer_and_takes_its_api_key_from_the_environment():
    cfg = load_config(EXAMPLES / "auth.yaml", env=ENV)
    auth = cfg.auth
    assert auth is not None and auth.resource == "http://127.0.0.1:8000/mcp" and auth.required_scopes == ["mcp:tools"]
    assert [i.issuer for i in auth.issuers] == ["https://login.example.com/realms/tools"] and auth.issuers[0].jwks_url.startswith("https://")
    assert [(k.name, k.key) for k in auth.api_keys] == [("ci", ENV["HOPLINE_CI_KEY"])]
    assert cfg.as_written("auth", "api_keys", 0, "key") == "${HOPLINE_CI_KEY}"  # never written in the file
    with pytest.raises(ConfigError, match="HOPLINE_CI_KEY is not set"):
        load_config(EXAMPLES / "auth.yaml", env={})


def test_reverse_example_has_one_backend():
    cfg = load_config(EXAMPLES / "reverse.yaml", env={})
    assert cfg.mode == "reverse" and len(cfg.backends) == 1


def test_desktop_example_needs_its_token():
    cfg = load_config(EXAMPLES / "claude_desktop_config.json", env=ENV)
    assert list(cfg.backends) == ["demo", "demo-copy", "remote-server"]
    assert cfg.backends["remote-server"].headers["Authorization"] == "Bearer test-token"
    off = load_config(EXAMPLES / "claude_desktop_config.json", env={})  # its server is disabled: a note, not an error
    assert off.backends["remote-server"].enabled is False
    assert any("REMOTE_MCP_TOKEN is not set" in note and "disabled" in note for note in off.import_notes)


def test_vscode_example_reads_its_input_from_the_environment():
    cfg = load_config(EXAMPLES / "vscode-mcp.json", env=ENV)
    assert list(cfg.backends) == ["demo", "remote"] and cfg.routing.startup_timeout == 60
    assert cfg.backends["remote"].headers["Authorization"] == "Bearer input-token"
    assert cfg.backends["remote"].transport == "streamable-http" and cfg.backends["demo"].env == {"DEMO_GREETING": "hello"}
    with pytest.raises(ConfigError, match="input 'remote-token' is not given .*HOPLINE_INPUT_REMOTE_TOKEN"):
        load_config(EXAMPLES / "vscode-mcp.json", env={})
