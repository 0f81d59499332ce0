"""``${VAR}`` interpolation: syntax, escaping, error paths, and never echoing a secret."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopline.config.interpolate import InterpolationError, escape, expand, interpolate
from hopline.config.load import ConfigError, parse_config

SECRET = "s3cr3t-Vault-Value"
NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)


@pytest.mark.parametrize("text,env,out", [
    ("${A}", {"A": "1"}, "1"),
    ("x-${A}-${B}", {"A": "1", "B": "2"}, "x-1-2"),
    ("${A:-dflt}", {}, "dflt"),
    ("${A:-dflt}", {"A": ""}, "dflt"),  # as in sh: empty counts as unset for :-
    ("${A:-dflt}", {"A": "set"}, "set"),
    ("${A:-}", {}, ""),
    ("${A:-a b:c/d}", {}, "a b:c/d"),
    ("${A}", {"A": ""}, ""),
    ("$${A}", {}, "${A}"),
    ("$$${A}", {"A": "1"}, "$1"),  # a run of '$' before '{' is halved; odd ends in a reference
    ("$$$${A}", {"A": "1"}, "$${A}"),
    ("$$ {A} $", {}, "$$ {A} $"),
    ("a$$$b", {}, "a$$$b"),
    ("$A and $$ and {A}", {}, "$A and $$ and {A}"),
    ("${A}", {"A": "${B}"}, "${B}"),  # a value is never expanded again
])
def test_expand(text, env, out):
    assert expand(text, env) == out


@pytest.mark.parametrize("text", ["${", "${A", "${1A}", "${A-b}", "${A:b}", "x ${ y}", "${}"])
def test_malformed_reference_is_an_error(text):
    with pytest.raises(InterpolationError) as info:
        expand(text, {"A": "1"})
    assert "malformed '${' reference" in str(info.value) and "$${" in str(info.value)


def test_unset_variables_are_named_once_each():
    with pytest.raises(InterpolationError) as info:
        expand("${B} ${A} ${B}", {})
    assert info.value.unset == ["B", "A"]
    assert str(info.value).startswith("environment variables B, A are not set")


@given(st.text())
def test_escape_round_trips_any_text(text):
    assert expand(escape(text), {}) == text


@given(st.text().filter(lambda t: "${" not in t))
def test_text_without_references_is_unchanged(text):
    assert expand(text, {}) == text


@given(NAMES, st.text(), st.text(), st.text())
def test_any_text_around_a_reference_is_expressible(name, value, before, after):
    # escape(before + "{") doubles a trailing run of '$', which the reference's '{' completes
    template = escape(before + "{")[:-1] + "${" + name + "}" + escape(after)
    assert expand(template, {name: value}) == before + value + after


def test_interpolate_walks_values_not_keys_and_keeps_templates():
    tree = {"${K}": "${V}", "list": ["${V}", 3, None, True], "n": {"deep": "x${V}"}}
    out, problems, templates = interpolate(tree, {"K": "key", "V": "val"})
    assert out == {"${K}": "val", "list": ["val", 3, None, True], "n": {"deep": "xval"}}
    assert problems == []
    assert templates == {("${K}",): "${V}", ("list", 0): "${V}", ("n", "deep"): "x${V}"}


def test_unset_variable_error_names_variable_and_key_path():
    text = "backends:\n  gh:\n    url: https://api.example.com/mcp\n    headers: {Authorization: 'Bearer ${GH_TOKEN}'}\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="c.yaml", env={})
    assert info.value.problems == [(
        "backends.gh.headers.Authorization",
        "environment variable GH_TOKEN is not set (give a default with ${NAME:-default})",
    )]


def test_interpolated_strings_are_coerced_like_literals():
    cfg = parse_config("listen: {port: '${PORT}'}\nbackends:\n  a: {command: x, enabled: '${ON:-false}'}\n", env={"PORT": "8123"})
    assert cfg.listen.port == 8123 and cfg.backends["a"].enabled is False


def test_as_written_keeps_the_reference_not_the_secret():
    cfg = parse_config("backends:\n  a: {command: run, args: [--token, '${TOKEN}'], env: {T: '${TOKEN}'}}\n", env={"TOKEN": SECRET})
    assert cfg.backends["a"].args[1] == SECRET and cfg.backends["a"].env["T"] == SECRET
    assert cfg.as_written("backends", "a", "args", 1) == "${TOKEN}"
    assert cfg.as_written("backends", "a", "args", 0) is None


@pytest.mark.parametrize("text", [
    "backends:\n  a: {url: 'ftp://${S}@host/'}\n",                 # custom validator
    "listen: {port: '${S}'}\nbackends:\n  a: {command: x}\n",       # int parsing
    "backends:\n  a: {url: 'http://h/', transport: '${S}'}\n",     # literal choice
    "backends:\n  a: {command: x, timeout: '${S}'}\n",              # float parsing
    "backends:\n  a: {command: x, enabled: '${S}'}\n",              # bool parsing
    "mode: '${S}'\nbackends:\n  a: {command: x}\n",
    "listen: {path: '${S}'}\nbackends:\n  a: {command: x}\n",       # pattern
    "backends:\n  a: {command: x, rename: {t: '${S}.x'}}\n",       # cross-field rule
    "mcpServers:\n  a: {type: '${S}', url: 'http://h/'}\n",         # desktop import
    "backends:\n  a: {command: '${S}', url: 'http://h/${S}'}\n",
    "backends:\n  a: {url: 'http://h/', headers: {X: \"${S}\\n\"}}\n",    # header hygiene
])
def test_secrets_are_never_echoed_in_errors(text):
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="c.yaml", env={"S": SECRET})
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert all(SECRET not in p and SECRET not in m for p, m in info.value.problems)
