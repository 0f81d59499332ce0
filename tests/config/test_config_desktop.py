"""The desktop ``mcpServers`` format accepted as-is, and backend id derivation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopline.config.ids import derive_id, id_problem, runs_into
from hopline.config.load import ConfigError, parse_config
from hopline.layers.routing.namespace import Namespace

CLAUDE = {
    "mcpServers": {
        "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
        "github": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
                   "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GH}"}},
    }
}


def load(obj, env=None):
    return parse_config(json.dumps(obj), source="mcp.json", env=env or {})


def problems(obj, env=None) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        load(obj, env)
    return dict(info.value.problems)


def test_claude_desktop_file_is_accepted_as_is():
    cfg = load(CLAUDE, {"GH": "tok"})
    assert list(cfg.backends) == ["filesystem", "github"]
    assert cfg.backends["filesystem"].kind() == "stdio"
    assert cfg.backends["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "tok"}
    assert cfg.mode == "forward" and cfg.import_notes == []


@pytest.mark.parametrize("entry,transport,enabled", [
    ({"url": "https://h/mcp"}, "auto", True),  # Cursor: url only
    ({"type": "http", "url": "https://h/mcp"}, "streamable-http", True),  # VS Code / Claude Code
    ({"type": "streamable-http", "url": "https://h/mcp"}, "streamable-http", True),
    ({"type": "sse", "url": "https://h/sse", "headers": {"X-Key": "k"}}, "sse", True),
    ({"transportType": "sse", "url": "https://h/sse"}, "sse", True),  # Cline
    ({"serverUrl": "https://h/mcp"}, "auto", True),  # Windsurf
    ({"httpUrl": "https://h/mcp"}, "streamable-http", True),  # Gemini CLI
    ({"url": "https://h/mcp", "disabled": True}, "auto", False),
    ({"url": "https://h/mcp", "disabled": False, "timeout": 60}, "auto", True),
])
def test_remote_entries_map_to_url_backends(entry, transport, enabled):
    backend = load({"mcpServers": {"r": entry}}).backends["r"]
    assert backend.kind() == "http" and backend.url.startswith("https://h/")
    assert backend.transport == transport and backend.enabled is enabled


def test_stdio_type_and_client_side_keys_are_tolerated_with_a_note():
    cfg = load({"mcpServers": {"s": {"type": "stdio", "command": "x", "autoApprove": ["a"], "alwaysAllow": [], "disabledTools": []}}})
    assert cfg.backends["s"].command == "x"
    assert cfg.import_notes == ["mcpServers.s: ignored autoApprove, alwaysAllow, disabledTools (desktop-client settings hopline does not use)"]


def test_hopline_settings_may_sit_in_a_desktop_entry():
    cfg = load({"mcpServers": {"s": {"command": "x", "prefix": False, "priority": 3, "stateless": True}}})
    s = cfg.backends["s"]
    assert (s.prefix, s.priority, s.stateless) == (False, 3, True)


@pytest.mark.parametrize("entry,path,message", [
    ({"command": "x", "foo": 1}, "mcpServers.s.foo", "unknown key"),
    ({"type": "stdio", "url": "https://h/"}, "mcpServers.s.type", "a stdio entry takes `command`, not a URL"),
    ({"type": "websocket", "url": "https://h/"}, "mcpServers.s.type", "must be one of stdio, sse, http"),
    ({"type": ["sse"], "url": "https://h/"}, "mcpServers.s.type", "must be one of"),
    ({"type": "sse", "command": "x"}, "mcpServers.s.type", "applies to `url` backends only"),
    ({"command": "x", "disabled": "yes"}, "mcpServers.s.disabled", "must be true or false"),
    ({"command": "x", "disabled": True, "enabled": True}, "mcpServers.s.enabled", "sets `enabled` again (already set by `disabled`)"),
    ({"url": "ftp://h/"}, "mcpServers.s.url", "http:// or https://"),
    ({"serverUrl": "ftp://h/"}, "mcpServers.s.serverUrl", "http:// or https://"),
    ({"url": "https://h/", "serverUrl": "https://h/"}, "mcpServers.s.serverUrl", "sets `url` again"),
    ({"command": "x", "args": "not-a-list"}, "mcpServers.s.args", "valid list"),
    ({}, "mcpServers.s", "exactly one of"),
    ("npx server", "mcpServers.s", "must be a mapping"),
])
def test_errors_in_desktop_entries_point_into_mcpServers(entry, path, message):
    found = problems({"mcpServers": {"s": entry}})
    assert path in found, found
    assert message in found[path]


def test_mcpServers_must_be_a_mapping():
    assert problems({"mcpServers": ["a"]}) == {"mcpServers": "must be a mapping of server name to server entry"}


def test_empty_mcpServers_means_no_backends():
    assert "at least one backend is required" in problems({"mcpServers": {}})["backends"]


def test_mcpServers_beside_hopline_keys_is_merged():
    cfg = load({"mode": "forward", "listen": {"port": 9001}, "backends": {"own": {"command": "a"}},
                "mcpServers": {"desk": {"command": "b"}}})
    assert list(cfg.backends) == ["own", "desk"] and cfg.listen.port == 9001


def test_the_same_id_in_backends_and_mcpServers_is_an_error():
    found = problems({"backends": {"gh": {"command": "a"}}, "mcpServers": {"gh": {"command": "b"}}})
    assert found == {"mcpServers.gh": "backend id 'gh' is also defined under `backends`"}
    found = problems({"backends": {"my-server": {"command": "a"}}, "mcpServers": {"my.server": {"command": "b"}}})
    assert found == {'mcpServers["my.server"]': "backend id 'my-server' is also defined under `backends`"}


def test_invalid_names_get_a_derived_id_and_a_note():
    cfg = load({"mcpServers": {"my.server": {"command": "a"}, "github server": {"command": "b"}, "a__b": {"command": "c"}}})
    assert list(cfg.backends) == ["my-server", "github-server", "a-b"]
    assert cfg.import_notes == [
        "mcpServers[\"my.server\"] is backend id 'my-server' (ids use [a-zA-Z0-9_-] without '__')",
        "mcpServers[\"github server\"] is backend id 'github-server' (ids use [a-zA-Z0-9_-] without '__')",
        "mcpServers.a__b is backend id 'a-b' (ids use [a-zA-Z0-9_-] without '__')",
    ]


def test_derived_ids_follow_the_configured_delimiter():
    cfg = load({"routing": {"delimiter": "-"}, "mcpServers": {"my.server": {"command": "a"}, "x-y": {"command": "b"}}})
    assert list(cfg.backends) == ["my_server", "x_y"]


def test_two_names_deriving_the_same_id_is_an_error():
    found = problems({"mcpServers": {"my.server": {"command": "a"}, "my server": {"command": "b"}}})
    assert found == {'mcpServers["my server"]': "its backend id 'my-server' is also the id of mcpServers[\"my.server\"]; rename one of them"}


def test_long_names_are_cut_to_what_routing_allows():
    cfg = load({"mcpServers": {"x" * 80: {"command": "a"}}})
    (bid,) = cfg.backends
    assert bid == "x" * Namespace().max_backend_length


@pytest.mark.parametrize("name,delimiter,expected", [
    ("github", "__", "github"),
    ("my.server", "__", "my-server"),
    ("  spaced   out  ", "__", "spaced-out"),
    ("a..b//c", "__", "a-b-c"),
    ("a__b", "__", "a-b"),
    ("a___b", "__", "a-_b"),  # the delimiter goes; a lone "_" may stay
    ("a_", "__", "a"),
    ("a._", "__", "a"),
    ("a-b", "-", "a_b"),
    ("a.b", "_-", "a-b"),
    ("日本語", "__", "server"),
    ("", "__", "server"),
    ("...", "s", "b"),
])
def test_derive_id(name, delimiter, expected):
    assert derive_id(name, delimiter) == expected


DELIMITERS = st.sampled_from(["__", "_", "-", "--", "_-", "-_", "x", "ab", "___"])


@given(st.text(max_size=80), DELIMITERS, st.integers(min_value=1, max_value=64))
def test_derived_ids_are_always_valid(name, delimiter, max_length):
    bid = derive_id(name, delimiter, max_length)
    assert id_problem(bid, delimiter) is None and not runs_into(bid, delimiter)
    assert 1 <= len(bid) <= max_length
    assert derive_id(name, delimiter, max_length) == bid  # deterministic
    assert derive_id(bid, delimiter, max_length) == bid  # a valid id is kept


@given(st.text(max_size=80), DELIMITERS)
def test_derived_ids_pass_the_routing_gate(name, delimiter):
    namespace = Namespace(delimiter, max_length=64)
    namespace.check_backend_id(derive_id(name, delimiter, namespace.max_backend_length))


VSCODE = {
    "inputs": [{"type": "promptString", "id": "gh-token", "description": "GitHub token", "password": True}],
    "servers": {
        "github": {"type": "http", "url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${input:gh-token}"}},
        "fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-filesystem", "${env:HOME}"], "env": {"K": "${env:K:-d}"}},
        "old": {"type": "sse", "url": "https://h/sse"},
    },
}


def test_vscode_file_is_accepted_with_inputs_from_the_environment():
    cfg = load(VSCODE, {"HOPLINE_INPUT_GH_TOKEN": "tok", "HOME": "/home/u"})
    assert list(cfg.backends) == ["github", "fs", "old"]
    assert cfg.backends["github"].transport == "streamable-http" and cfg.backends["github"].headers == {"Authorization": "Bearer tok"}
    assert cfg.backends["fs"].args[-1] == "/home/u" and cfg.backends["fs"].env == {"K": "d"}
    assert cfg.backends["old"].transport == "sse"
    assert cfg.as_written("backends", "github", "headers", "Authorization") == "Bearer ${input:gh-token}"


def test_a_vscode_input_not_given_is_an_error_naming_it_never_an_empty_string():
    got = problems(VSCODE, {"HOME": "/h"})
    assert got == {"servers.github.headers.Authorization": "input 'gh-token' is not given (VS Code prompts for it; "
                   "hopline reads it from the environment variable HOPLINE_INPUT_GH_TOKEN)"}


def test_vscode_only_keys():
    assert problems({"servers": {"s": {"command": "x", "envFile": "${workspaceFolder}/.env"}}}) == {
        "servers.s.envFile": "hopline does not read env files; put the variables under `env`"}
    assert problems({"servers": {"s": {"command": "x", "args": ["${workspaceFolder}/src"]}}})["servers.s.args[0]"] == (
        "environment variable workspaceFolder is not set (give a default with ${NAME:-default}; workspaceFolder is a VS Code "
        "variable that hopline does not define: set it in the environment)")
    assert load({"servers": {"s": {"command": "x", "args": ["${workspaceFolder}/src"]}}}, {"workspaceFolder": "/w"}).backends["s"].args == ["/w/src"]
    assert problems({"servers": {"s": {"command": "x"}}, "inputs": {"id": "x"}}) == {"inputs": "must be a list of VS Code input definitions"}
    assert problems({"servers": {"s": {"command": "x", "bogus": 1}}})["servers.s.bogus"].startswith("unknown key")


def test_a_server_in_both_desktop_sections_is_refused():
    got = problems({"servers": {"a": {"command": "x"}}, "mcpServers": {"a": {"command": "y"}}})
    assert list(got) == ["servers.a"] and "'a'" in got["servers.a"]


@pytest.mark.parametrize("section,entry", [
    ("mcpServers", {"url": "https://h/mcp", "headers": {"A": "${MISSING}"}, "disabled": True}),
    ("servers", {"type": "stdio", "command": "x", "env": {"T": "${input:tok}"}, "disabled": True}),
    ("backends", {"command": "x", "env": {"T": "${MISSING}"}, "enabled": False}),
])
def test_a_disabled_servers_missing_variable_is_a_note_not_an_error(section, entry):
    cfg = load({section: {"s": entry}})
    assert cfg.backends["s"].enabled is False
    assert [n for n in cfg.import_notes if "not needed while its server is disabled" in n and n.startswith(f"{section}.s.")]
    enabled = {k: v for k, v in entry.items() if k not in ("disabled", "enabled")}
    assert list(problems({section: {"s": enabled}})) == [f"{section}.s.{'headers.A' if 'headers' in entry else 'env.T'}"]


def test_hopline_settings_in_a_desktop_file():
    cfg = load({"hopline": {"routing": {"startup_timeout": 60}, "name": "desk"}, **CLAUDE}, {"GH": "t"})
    assert cfg.routing.startup_timeout == 60 and cfg.name == "desk" and list(cfg.backends) == ["filesystem", "github"]
    assert problems({"hopline": {"routing": {"startup_timeout": -1}}, **CLAUDE}, {"GH": "t"}) == {
        "hopline.routing.startup_timeout": "Input should be greater than 0"}
    assert problems({"hopline": {"routing": {}}, "routing": {}, **CLAUDE}, {"GH": "t"}) == {
        "hopline.routing": "`routing` is also set at the top level; set it in one place"}
    assert problems({"hopline": {"mcpServers": {}}, **CLAUDE}, {"GH": "t"}) == {"hopline.mcpServers": "`mcpServers` belongs at the top level of the file"}
    assert problems({"hopline": [1], **CLAUDE}, {"GH": "t"}) == {"hopline": "must be a mapping of hopline settings (routing, listen, ...)"}
    assert "hopline" in problems({"hoplin": {}, **CLAUDE}, {"GH": "t"})["hoplin"]
    assert load({"hopline": {"routing": {"startup_timeout": "${T}"}}, **CLAUDE}, {"GH": "t", "T": "5"}).as_written("routing", "startup_timeout") == "${T}"
