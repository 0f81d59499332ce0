"""Validation rules of the configuration schema, each with its key path and message."""

from __future__ import annotations

import pytest

from hopline.config.load import ConfigError, load_config, parse_config, parse_config_bytes
from hopline.config.schema import BackendConfig, GatewayConfig, ListenConfig, RoutingConfig

ONE = "backends:\n  a: {command: x}\n"


def problems(text: str, **kw) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="cfg.yaml", env=kw.pop("env", {}), **kw)
    return dict(info.value.problems)


def test_minimal_file_gets_defaults():
    cfg = parse_config(ONE, env={})
    assert cfg.version == 1 and cfg.mode == "forward" and cfg.name == "hopline"
    assert cfg.listen == ListenConfig() and cfg.listen.max_body == 4 * 1024 * 1024
    assert cfg.routing == RoutingConfig(delimiter="__", collision="prefix", max_name_length=64, uri_scheme="hopline")
    a = cfg.backends["a"]
    assert a.kind() == "stdio" and a.prefix and a.enabled and not a.stateless and a.priority == 0
    assert cfg.import_notes == []


def test_url_backend_is_http_kind_and_models_build_directly():
    cfg = GatewayConfig(backends={"r": BackendConfig(url="https://example.com/mcp", transport="sse")})
    assert cfg.backends["r"].kind() == "http"


def test_json_and_yaml_both_accepted():
    y = parse_config("mode: forward\n" + ONE, env={})
    j = parse_config('{"mode": "forward", "backends": {"a": {"command": "x"}}}', env={})
    assert y == j


def test_every_problem_is_reported_with_the_source_in_the_header():
    text = "mod: forward\nlisten: {port: 99999}\nbackends:\n  a: {comand: x}\n  b.c: {command: x}\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="my.yaml", env={})
    err = info.value
    lines = str(err).splitlines()
    assert lines[0] == "my.yaml: cannot use this configuration (4 problems)"
    assert set(lines[1:]) == {f"  {p}: {m}" for p, m in err.problems}
    assert {p for p, _ in err.problems} == {"mod", "listen.port", "backends.a.comand", 'backends["b.c"]'}
    assert err.source == "my.yaml"


BAD = [
    ("mod: forward\n" + ONE, "mod", "unknown key (did you mean 'mode'?)"),
    ("backends:\n  a: {comand: x}\n", "backends.a.comand", "did you mean 'command'"),
    ("routing: {delimter: '-'}\n" + ONE, "routing.delimter", "did you mean 'delimiter'"),
    ("listen: {zzz: 1}\n" + ONE, "listen.zzz", "unknown key (allowed: host, port"),
    ("backends:\n  a: {command: x, url: 'http://h/'}\n", "backends.a", "exactly one of `command` (stdio backend) or `url` (HTTP backend); both are set"),
    ("backends:\n  a: {prefix: false}\n", "backends.a", "neither is set"),
    ("backends:\n  a: {url: 'ftp://h/x'}\n", "backends.a.url", "must be an http:// or https:// URL"),
    ("backends:\n  a: {url: 'http:///x'}\n", "backends.a.url", "with a host"),
    ("backends:\n  a: {command: x, headers: {A: b}}\n", "backends.a.headers", "applies to `url` backends only"),
    ("backends:\n  a: {url: 'http://h:99999/'}\n", "backends.a.url", "valid port"),
    ("backends:\n  a: {url: 'http://[::1/'}\n", "backends.a.url", "http:// or https://"),
    ("backends:\n  a: {url: 'http://h/', headers: {'Bad Name': v}}\n", 'backends.a.headers["Bad Name"]', "HTTP token"),
    ("backends:\n  a: {url: 'http://h/', headers: {X: \"a\\r\\nInjected: 1\"}}\n", "backends.a.headers.X", "must not contain CR, LF or NUL"),
    ("backends:\n  a: {command: x, transport: sse}\n", "backends.a.transport", "applies to `url` backends only"),
    ("backends:\n  a: {url: 'http://h/', args: [x]}\n", "backends.a.args", "applies to `command` backends only"),
    ("backends:\n  a: {url: 'http://h/', env: {A: b}}\n", "backends.a.env", "applies to `command` backends only"),
    ("backends:\n  a: {url: 'http://h/', inherit_env: [AWS_*]}\n", "backends.a.inherit_env", "applies to `command` backends only"),
    ("backends:\n  a: {command: x, inherit_env: ['']}\n", "backends.a.inherit_env", "a list of variable names or glob patterns"),
    ("backends:\n  a: {url: 'http://h/', transport: websocket}\n", "backends.a.transport", "'auto', 'streamable-http' or 'sse'"),
    ("backends:\n  a: {command: ''}\n", "backends.a.command", "at least 1 character"),
    ("backends:\n  a: {command: x, timeout: 0}\n", "backends.a.timeout", "greater than 0"),
    ("backends:\n  a: {command: x, args: [ok, 1]}\n", "backends.a.args[1]", "valid string"),
    ("backends:\n  a: {command: x, env: {DEBUG: 1}}\n", "backends.a.env.DEBUG", "valid string"),
    ("backends:\n  a: {command: x, rename: {x: y, z: y}}\n", "backends.a.rename.z", "exposes the same name as 'x'"),
    ("backends:\n  a: {command: x, rename: {x: ''}}\n", "backends.a.rename.x", "must not be empty"),
    ("backends:\n  a: {command: x, rename: {x: 'b__y'}}\n", "backends.a.rename.x", "must start with this backend's prefix 'a__'"),
    ("backends:\n  a: {command: x, rename: {x: 'has space'}}\n", "backends.a.rename.x", "1-64 characters from [a-zA-Z0-9_-]"),
    ("backends:\n  my.server: {command: x}\n", 'backends["my.server"]', "must be 1-64 characters from [a-zA-Z0-9_-] (try 'my-server')"),
    ("backends:\n  github server: {command: x}\n", 'backends["github server"]', "(try 'github-server')"),
    ("backends:\n  a__b: {command: x}\n", "backends.a__b", "contains the name delimiter '__' (try 'a-b')"),
    ("routing: {delimiter: '-'}\nbackends:\n  a-b: {command: x}\n", "backends.a-b", "contains the name delimiter '-' (try 'a_b')"),
    ("backends:\n  a_: {command: x}\n", "backends.a_", "runs into the delimiter '__'"),
    ("backends:\n  " + "b" * 65 + ": {command: x}\n", "backends." + "b" * 65, "must be 1-64 characters"),
    ("backends:\n  " + "b" * 60 + ": {command: x}\n", "backends." + "b" * 60, "longer than 52 characters"),
    ("routing: {delimiter: ''}\n" + ONE, "routing.delimiter", "non-empty"),
    ("routing: {delimiter: '.'}\n" + ONE, "routing.delimiter", "only characters from [a-zA-Z0-9_-]"),
    ("routing: {collision: first}\n" + ONE, "routing.collision", "'prefix', 'priority', 'rename' or 'reject'"),
    ("routing: {max_name_length: 5}\n" + ONE, "routing.max_name_length", "leaves no room"),
    ("routing: {uri_scheme: '1x'}\n" + ONE, "routing.uri_scheme", "should match pattern"),
    ("routing: {uri_scheme: UI}\n" + ONE, "routing.uri_scheme", "'ui' is the MCP Apps scheme"),
    ("mode: sideways\n" + ONE, "mode", "'forward', 'reverse', 'sidecar', 'federation' or 'transparent'"),
    ("version: 2\n" + ONE, "version", "Input should be 1"),
    ("name: ''\n" + ONE, "name", "at least 1 character"),
    ("listen: {port: 70000}\n" + ONE, "listen.port", "less than or equal to 65535"),
    ("listen: {path: mcp}\n" + ONE, "listen.path", "should match pattern"),
    ("listen: {max_sessions: 0}\n" + ONE, "listen.max_sessions", "greater than or equal to 1"),
    ("backends: {}\n", "backends", "at least one backend is required"),
    ("mode: forward\n", "backends", "is required"),
    ("backends: [a]\n", "backends", "valid dictionary"),
    ("mode: reverse\nbackends:\n  a: {command: x}\n  b: {command: y}\n", "backends", "reverse mode needs exactly one enabled backend; 2 are enabled (a, b)"),
    ("mode: reverse\nbackends:\n  a: {command: x, enabled: false}\n", "backends", "0 are enabled"),
]


@pytest.mark.parametrize("text,path,message", BAD, ids=[f"{i}:{b[1][:30]}" for i, b in enumerate(BAD)])
def test_rule(text, path, message):
    found = problems(text)
    assert path in found, found
    assert message in found[path]


def test_reverse_with_one_enabled_backend_is_fine():
    cfg = parse_config("mode: reverse\nbackends:\n  a: {command: x}\n  b: {command: y, enabled: false}\n", env={})
    assert cfg.mode == "reverse"


def test_delimiter_decides_which_ids_are_valid():
    cfg = parse_config("routing: {delimiter: '-'}\nbackends:\n  a__b: {command: x}\n", env={})
    assert list(cfg.backends) == ["a__b"]


def test_id_problems_and_value_problems_are_reported_together():
    found = problems("backends:\n  a.b: {url: 'ftp://x'}\n  c: {command: x, timeout: -1}\n")
    assert set(found) == {'backends["a.b"]', 'backends["a.b"].url', "backends.c.timeout"}


@pytest.mark.parametrize("text,what", [("", "empty"), ("# only a comment\n", "empty"), ("- a\n", "a list"), ("42\n", "a int")])
def test_file_must_be_a_mapping(text, what):
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="f.yaml", env={})
    assert info.value.problems == [("", f"the file is {what}; expected a mapping with `backends` or `mcpServers`")]
    assert str(info.value).startswith("f.yaml: ")


def test_yaml_syntax_error_names_the_line():
    with pytest.raises(ConfigError) as info:
        parse_config("backends:\n  a: {command: x\n", env={})
    assert "not valid YAML or JSON: line 3" in str(info.value)


def test_duplicate_keys_are_an_error_not_a_silent_overwrite():
    with pytest.raises(ConfigError) as info:
        parse_config("backends:\n  a: {command: x}\n  a: {command: y}\n", env={})
    assert "line 3, column 3: duplicate key 'a' (first at line 2)" in str(info.value)


def test_yaml_merge_keys_may_be_overridden():
    cfg = parse_config("backends:\n  a: &b {command: x, timeout: 5}\n  c: {<<: *b, timeout: 9}\n", env={})
    assert cfg.backends["c"].timeout == 9 and cfg.backends["c"].command == "x"


def test_bytes_must_be_utf8_and_may_carry_a_bom():
    assert parse_config_bytes(b"\xef\xbb\xbf" + ONE.encode(), env={}).backends["a"].command == "x"
    with pytest.raises(ConfigError) as info:
        parse_config_bytes(b"backends: \xff\n", source="b.yaml", env={})
    assert "not UTF-8 text" in str(info.value)


def test_load_config_reads_a_file_and_reports_an_unreadable_one(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(ONE)
    assert load_config(path).backends["a"].command == "x"
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "missing.yaml")
    assert "cannot read the file: No such file or directory" in str(info.value)
    assert str(tmp_path / "missing.yaml") in str(info.value)
    with pytest.raises(ConfigError):
        load_config(tmp_path)  # a directory


def test_json_schema_describes_the_models():
    schema = GatewayConfig.model_json_schema()
    # `backends` may be absent only in a file that holds just an `acp:` chain (checked in _whole).
    assert "required" not in schema and "acp" in schema["properties"]["backends"]["description"]
    assert schema["properties"]["backends"]["propertyNames"] == {"pattern": "^[a-zA-Z0-9_-]{1,64}$"}
    assert schema["$defs"]["BackendConfig"]["additionalProperties"] is False
    assert "import_notes" not in schema["properties"]


def test_a_header_value_loses_its_surrounding_whitespace():
    # `Bearer ${TOKEN:-}` with TOKEN unset: HTTP clients refuse a value ending in a space, so an
    # openapi backend's every call failed ("the API could not be reached (LocalProtocolError)").
    cfg = parse_config("backends:\n  a: {url: 'http://h/', headers: {Authorization: 'Bearer ${T:-}', X: ' v\t'}}\n", env={})
    assert cfg.backends["a"].headers == {"Authorization": "Bearer", "X": "v"}


@pytest.mark.parametrize("path", ["/oauth", "/oauth/token", "/.well-known/x", "/healthz"])
def test_an_endpoint_cannot_take_a_path_the_gateway_serves_itself(path):
    """``/oauth/…`` is the sign-in server's (auth.signin): an endpoint there would be shadowed by it."""
    from hopline.config.tools import path_problem

    assert "keeps" in (path_problem(path) or "")


@pytest.mark.parametrize(
    "host, loopback",
    [("localhost", True), ("LOCALHOST", True), ("app.localhost", True), ("127.0.0.1", True), ("127.9.9.9", True),
     ("[::1]", True), ("::1", True), ("127.evil.example", False), ("localhost.evil.example", False),
     ("10.0.0.1", False), ("", False)],  # fmt: skip
)
def test_one_rule_says_which_url_hosts_are_loopback(host, loopback):
    """config (http allowed only to loopback), sign-in (RFC 8252 redirects) and the admin page's Host
    check share one rule (bound.loopback_name): a name that merely starts with 127. is not loopback."""
    from hopline.bound import loopback_name

    assert loopback_name(host) is loopback
