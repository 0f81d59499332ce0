"""``openapi`` backends in the configuration, ``hopline check``, ``hopline serve`` and the declaration."""

from __future__ import annotations

import argparse
import shutil
import subprocess

import pytest

from hopline.commands import check as check_cli
from hopline.commands import serve_gateway
from hopline.config.load import ConfigError, load_config, parse_config
from hopline.declaration import declare, for_config
from tests.conftest import PY, ROOT, SERVERS

SPEC = SERVERS / "petstore.openapi.yaml"


def write(tmp_path, backend: str, name: str = "gw.yaml"):
    path = tmp_path / name
    path.write_text(f"backends:\n  pets: {backend}\n")
    return path


# -- the schema ---------------------------------------------------------------------------------
def test_an_openapi_backend_is_a_third_kind():
    config = parse_config(f"backends:\n  pets: {{openapi: {SPEC}, base_url: 'http://127.0.0.1:9000', operations: [listPets], headers: {{A: b}}}}\n")
    assert config.backends["pets"].kind() == "openapi"


@pytest.mark.parametrize(("backend", "where", "message"), [
    ("{openapi: s.yaml, url: 'http://h/'}", "backends.pets", "set exactly one of `command` (stdio backend), `url` (HTTP backend) or `openapi` (REST API); both are set"),
    ("{openapi: s.yaml, args: [x]}", "backends.pets.args", "applies to `command` backends only; this backend has an `openapi`"),
    ("{openapi: s.yaml, transport: sse}", "backends.pets.transport", "applies to `url` backends only; this backend has an `openapi`"),
    ("{url: 'http://h/', base_url: 'http://h/'}", "backends.pets.base_url", "applies to `openapi` backends only; this backend has a `url`"),
    ("{command: x, operations: [a]}", "backends.pets.operations", "applies to `openapi` backends only; this backend has a `command`"),
    ("{openapi: s.yaml, base_url: 'ftp://h/'}", "backends.pets.base_url", "must be an http:// or https:// URL"),
    ("{openapi: ''}", "backends.pets.openapi", "at least 1 character"),
])
def test_misplaced_settings_are_errors_at_their_key(backend, where, message):
    with pytest.raises(ConfigError) as info:
        parse_config(f"backends:\n  pets: {backend}\n")
    assert any(path == where and message in msg for path, msg in info.value.problems), info.value.problems


def test_a_relative_spec_path_starts_at_the_config_files_directory(tmp_path):
    shutil.copy(SPEC, tmp_path / "api.yaml")
    config = load_config(write(tmp_path, "{openapi: api.yaml, base_url: 'http://127.0.0.1:9000'}"))
    assert config.base_dir == str(tmp_path)
    from hopline.conversion.preflight import check_specs

    assert "listPets" in [o.tool for o in check_specs(config)["pets"][0].operations]


# -- hopline check ------------------------------------------------------------------------------------
def check(path, capsys) -> tuple[int, str, str]:
    code = check_cli.run(argparse.Namespace(config=str(path)))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_describes_an_openapi_backend_and_its_tools(tmp_path, capsys):
    path = write(tmp_path, f"{{openapi: {SPEC}, base_url: 'http://127.0.0.1:9000', operations: [listPets, getPet]}}")
    code, out, _ = check(path, capsys)
    assert code == 0
    assert f"pets (openapi): {SPEC} (OpenAPI)" in out
    assert "  pets: 2 tools calling http://127.0.0.1:9000: listPets, getPet" in out


@pytest.mark.parametrize(("backend", "where", "message"), [
    ("{openapi: nope.yaml}", "backends.pets.openapi", "cannot read the spec file nope.yaml: No such file or directory"),
    (f"{{openapi: {ROOT / 'examples' / 'gateway.yaml'}}}", "backends.pets.openapi", "is not an OpenAPI 3.x document"),
    (f"{{openapi: {SPEC}, operations: [listPets, nope]}}", "backends.pets.operations", "names operationIds the spec does not have: nope"),
])
def test_check_reports_a_spec_that_cannot_be_used(tmp_path, capsys, backend, where, message):
    code, out, err = check(write(tmp_path, backend), capsys)
    assert code == 1 and out == ""
    assert f"  {where}: " in err and message in err and "Traceback" not in err


def test_check_reports_a_spec_without_servers_or_base_url(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text("openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths: {/a: {get: {operationId: a, responses: {'200': {description: ok}}}}}\n")
    code, _, err = check(write(tmp_path, "{openapi: s.yaml}"), capsys)
    assert code == 1 and "backends.pets.base_url: the spec names no servers[].url; set `base_url`" in err


# -- hopline serve ------------------------------------------------------------------------------------
def test_serve_refuses_to_start_with_a_spec_that_cannot_be_used(tmp_path, capsys):
    path = write(tmp_path, "{openapi: missing.yaml}")
    assert serve_gateway.serve_http(load_config(path), str(path)) == 1
    assert "backends.pets.openapi: cannot read the spec file missing.yaml" in capsys.readouterr().err
    assert serve_gateway.serve_stdio(load_config(path), str(path)) == 1


def test_the_serve_command_prints_the_problem_not_a_traceback(tmp_path):
    (tmp_path / "not-openapi.yaml").write_text("hello: world\n")
    path = write(tmp_path, "{openapi: not-openapi.yaml}")
    done = subprocess.run([PY, "-m", "hopline", "serve", str(path), "--port", "0"], capture_output=True, text=True, timeout=30, cwd=ROOT, check=False)
    assert done.returncode == 1
    assert "backends.pets.openapi: the spec file not-openapi.yaml is not an OpenAPI 3.x document" in done.stderr
    assert "Traceback" not in done.stderr


# -- the declaration ------------------------------------------------------------------------------------
@pytest.mark.req("MODE-SET-DECLARE")
def test_the_declaration_names_conversion_mode_when_an_openapi_backend_is_configured():
    config = parse_config(f"backends:\n  pets: {{openapi: {SPEC}}}\n  demo: {{command: python, args: [-m, hopline.demo]}}\n")
    declared = declare(for_config(config))
    assert declared["modes"] == ["conversion", "forward"]
    assert declared["handshake"]["conversion"] == "dual-handshake (converted capabilities)"
    plain = declare(for_config(parse_config("backends:\n  demo: {command: python}\n")))
    assert "conversion" not in plain["modes"]
