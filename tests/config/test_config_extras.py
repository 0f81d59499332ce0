"""A configuration that needs an optional extra which is not installed is refused when it
loads, at the key that asks for it, with the extra's pip command: exit 1, never a
traceback. "Not installed" is simulated in-process the way Python sees it: a module
set to None in ``sys.modules`` makes ``import`` raise ImportError. The same files
pass with the extras present (this environment installs ``hopline[test]``, which
holds ``all``), so each refusal is the missing module's doing."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from hopline.cli import main
from hopline.config.extras import EXTRAS, needed
from hopline.config.load import ConfigError, load_config, parse_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def check(path: Path, capsys: pytest.CaptureFixture[str], *extra_args: str, command: str = "check") -> tuple[int, str]:
    rc = main([command, str(path), *extra_args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err


def test_code_mode_without_pydantic_monty_names_the_code_extra(monkeypatch, capsys):
    assert check(EXAMPLES / "toolmodes.yaml", capsys)[0] == 0  # with the extra: valid
    block(monkeypatch, "pydantic_monty")
    rc, err = check(EXAMPLES / "toolmodes.yaml", capsys)
    assert rc == 1
    assert err.splitlines() == [
        f"{EXAMPLES / 'toolmodes.yaml'}: cannot use this configuration (1 problem)",
        """  tools.endpoints["/mcp/code"].mode: code needs the code extra (pydantic_monty cannot be imported): pip install 'hopline[code]'""",
    ]


def test_serve_refuses_the_same_file_before_listening(monkeypatch, capsys):
    block(monkeypatch, "pydantic_monty")
    rc, err = check(EXAMPLES / "toolmodes.yaml", capsys, "--port", "0", command="serve")
    assert rc == 1
    assert err.startswith(f"hopline serve: {EXAMPLES / 'toolmodes.yaml'}: cannot use this configuration (1 problem)\n")
    assert "code needs the code extra" in err and "pip install 'hopline[code]'" in err


def test_search_mode_without_numpy_names_the_search_extra_at_each_key(monkeypatch, capsys):
    block(monkeypatch, "numpy")  # Code mode ranks search_tools with the same BM25F: it needs numpy too
    rc, err = check(EXAMPLES / "toolmodes.yaml", capsys)
    assert rc == 1
    assert "  tools.mode: search needs the search extra (numpy cannot be imported): pip install 'hopline[search]'" in err.splitlines()
    assert """  tools.endpoints["/mcp/code"].mode: code needs the code extra (numpy cannot be imported): pip install 'hopline[code]'""" in err.splitlines()


@pytest.mark.parametrize("example, key", [("policy.yaml", "policy.rules"), ("federation.yaml", "policy.rules"),
                                          ("sidecar.yaml", "policy.rules"), ("transparent.yaml", "transparent.rules")])
def test_cel_rules_without_the_cel_library_name_the_cel_extra(monkeypatch, capsys, example, key):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # policy.yaml's interceptor module (check imports it, as serve does)
    assert check(EXAMPLES / example, capsys)[0] == 0
    block(monkeypatch, "cel")
    # As in an install without it: the rule compiler's module cannot be imported either.
    monkeypatch.delitem(sys.modules, "hopline.layers.policy.cel", raising=False)
    rc, err = check(EXAMPLES / example, capsys)
    assert rc == 1
    assert err.splitlines()[1:] == [f"  {key}: CEL rules need the cel extra (cel cannot be imported): pip install 'hopline[cel]'"]


SERVICES = textwrap.dedent("""
    mode: forward
    backends:
      demo: {command: python, args: ["-m", "hopline.demo"]}
    auth:
      resource: http://127.0.0.1:8000/mcp
      issuers:
        - {issuer: "https://login.example.com", jwks_url: "https://login.example.com/jwks.json"}
      api_keys:
        - {name: ci, key: "0123456789abcdef0123"}
    policy:
      rate_limits: {store: redis, limits: [{requests: 10, per: [principal]}]}
    observability:
      otel: {endpoint: "http://127.0.0.1:4318/v1/traces"}
""")


def test_redis_otel_and_jwt_issuers_name_their_extras(monkeypatch, tmp_path, capsys):
    path = tmp_path / "services.yaml"
    path.write_text(SERVICES)
    assert check(path, capsys)[0] == 0
    block(monkeypatch, "redis", "opentelemetry", "jwt")
    rc, err = check(path, capsys)
    assert rc == 1
    assert err.splitlines()[1:] == [
        "  policy.rate_limits.store: store redis needs the redis extra (redis.asyncio cannot be imported): pip install 'hopline[redis]'",
        "  observability.otel.endpoint: exporting spans needs the otel extra (opentelemetry.sdk.trace cannot be imported): pip install 'hopline[otel]'",
        "  auth.issuers: JWT validation needs the auth extra (jwt cannot be imported): pip install 'hopline[auth]'",
    ]


def test_jwt_issuers_need_cryptography_too(monkeypatch):
    block(monkeypatch, "cryptography")  # PyJWT alone verifies no RSA, EC or EdDSA key
    with pytest.raises(ConfigError) as info:
        parse_config(SERVICES)
    assert ("auth.issuers", "JWT validation needs the auth extra (cryptography cannot be imported): pip install 'hopline[auth]'") in info.value.problems


def test_api_keys_and_a_memory_store_need_no_extra(monkeypatch):
    block(monkeypatch, *{m for _dists, modules in EXTRAS.values() for m in modules})
    config = parse_config(textwrap.dedent("""
        backends:
          demo: {command: python, args: ["-m", "hopline.demo"]}
        auth:
          resource: http://127.0.0.1:8000/mcp
          api_keys: [{name: ci, key: "0123456789abcdef0123"}]
        policy:
          rate_limits: {limits: [{requests: 10, per: [principal]}]}
          dlp: {patterns: {key: "sk-[a-z]+"}}
        tools:
          mode: standard
    """))
    assert needed(config) == []


def test_a_group_mode_is_reported_at_the_group():
    config = parse_config(textwrap.dedent("""
        backends:
          a: {command: python, args: ["-m", "hopline.demo"]}
          b: {command: python, args: ["-m", "hopline.demo"]}
        tools:
          groups:
            heavy: {backends: [b], mode: code}
          endpoints:
            /mcp/find: {mode: search, groups: {few: {backends: [a], mode: standard}}}
    """))
    assert needed(config) == [(("tools", "groups", "heavy", "mode"), "code needs", "code"),
                              (("tools", "endpoints", "/mcp/find", "mode"), "search needs", "search")]


@pytest.mark.parametrize("example", ["gateway.yaml", "reverse.yaml", "openapi.yaml", "stdio-pool.yaml", "acp-chain.yaml"])
def test_the_core_examples_need_no_extra(example):
    assert needed(load_config(EXAMPLES / example)) == []


UNSET_AND_EXTRAS = textwrap.dedent("""
    backends:
      demo: {command: python, args: ["-m", "hopline.demo"]}
      remote: {url: "${HOPLINE_TEST_UNSET_URL}"}
    state:
      session_key: ${HOPLINE_TEST_UNSET_KEY}
    tools:
      mode: search
      endpoints:
        /mcp/code: code
    policy:
      rules: ["true"]
""")


def test_unset_variables_and_missing_extras_are_reported_in_one_pass(monkeypatch):
    """The file does not validate (empty values where variables are unset); what needs an
    extra is still read from it, so a second run does not bring new problems."""
    block(monkeypatch, "numpy", "redis", "cel")
    monkeypatch.delitem(sys.modules, "hopline.layers.policy.cel", raising=False)
    with pytest.raises(ConfigError) as info:
        parse_config(UNSET_AND_EXTRAS, env={})
    assert sorted(info.value.problems) == sorted([
        ("backends.remote.url", "environment variable HOPLINE_TEST_UNSET_URL is not set (give a default with ${NAME:-default})"),
        ("state.session_key", "environment variable HOPLINE_TEST_UNSET_KEY is not set (give a default with ${NAME:-default})"),
        ("tools.mode", "search needs the search extra (numpy cannot be imported): pip install 'hopline[search]'"),
        ('tools.endpoints["/mcp/code"]', "code needs the code extra (numpy cannot be imported): pip install 'hopline[code]'"),
        ("policy.rules", "CEL rules need the cel extra (cel cannot be imported): pip install 'hopline[cel]'"),
        ("state", "sharing sessions between replicas needs the redis extra (redis.asyncio cannot be imported): pip install 'hopline[redis]'"),
    ])
