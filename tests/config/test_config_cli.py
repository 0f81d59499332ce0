"""``hopline schema`` and ``hopline check`` as real processes: exit codes and output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SECRET = "s3cr3t-Vault-Value"


def hopline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hopline", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, cwd=ROOT)


def test_help_lists_both_commands():
    out = hopline("--help").stdout
    assert "schema" in out and "check" in out


def test_schema_prints_a_json_schema():
    proc = hopline("schema")
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "hopline configuration"
    assert {"backends", "mcpServers", "listen", "routing", "mode"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False and "required" not in schema
    assert json.loads(hopline("schema", "--compact").stdout) == schema


def test_schema_accepts_the_examples_and_rejects_a_typo():
    import jsonschema  # installed with the test extras (the MCP SDK depends on it)
    schema = json.loads(hopline("schema").stdout)
    for name in ("reverse.yaml", "claude_desktop_config.json", "vscode-mcp.json", "toolmodes.yaml", "auth.yaml"):
        jsonschema.validate(yaml.safe_load((EXAMPLES / name).read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"backends": {"a": {"comand": "x"}}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"backends": {"a.b": {"command": "x"}}}, schema)
    with pytest.raises(jsonschema.ValidationError):  # an endpoint's settings are checked like the model's
        jsonschema.validate({"backends": {"a": {"command": "x"}}, "tools": {"endpoints": {"/mcp/s": {"mode": "search", "grups": {}}}}}, schema)


def test_check_explains_a_valid_file():
    proc = hopline("check", "examples/gateway.yaml")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "examples/gateway.yaml: valid"
    assert "mode: forward (3 backends, 2 enabled)" in out
    assert "listen: http://127.0.0.1:8000/mcp" in out
    assert "names: {backend}__{name}, at most 64 characters" in out
    assert any(line.startswith("collisions: prefix (") for line in out)
    assert "  demo (stdio): python -m hopline.demo" in out
    assert "    exposed as demo__<name>; share: principal" in out
    assert "  remote (http, disabled): ${REMOTE_MCP_URL:-http://127.0.0.1:8001/mcp}" in out


def test_check_explains_reverse_mode_and_unprefixed_backends(tmp_path):
    proc = hopline("check", "examples/reverse.yaml")
    assert proc.returncode == 0 and "names: passed through unchanged (reverse mode)" in proc.stdout
    cfg = tmp_path / "c.yaml"
    cfg.write_text("routing: {collision: priority}\nbackends:\n  a: {command: x, prefix: false, priority: 2}\n"
                   "  b: {url: 'http://[::1]:9/mcp', transport: sse, stateless: true, timeout: 2.5}\n")
    out = hopline("check", str(cfg)).stdout
    assert "    exposed as <name> (prefix off); priority 2; share: principal" in out
    assert "  b (http): http://[::1]:9/mcp (sse)" in out
    assert "    exposed as b__<name>; priority 0; share: shared; timeout 2.5s" in out


def test_check_warns_where_one_child_would_serve_several_principals(tmp_path):
    """share: shared is the explicit opt-in to one child for everyone: said when auth is on or the
    listener is not loopback; the default (a child per principal) and a local listener are quiet."""
    cfg = tmp_path / "c.yaml"
    auth = "auth: {resource: 'http://127.0.0.1/mcp', api_keys: [{name: a, key: '0123456789abcdef'}]}\n"
    cfg.write_text(auth + "backends:\n  s: {command: x, share: shared}\n  p: {command: x}\n")
    out = hopline("check", str(cfg)).stdout.splitlines()
    assert [line for line in out if "warning" in line and "share:" in line] == [
        "    warning: share: shared with auth is on: one backend session serves every principal (what it holds in "
        "memory, one caller's state or scope, reaches the others); `share: principal` (the default for command "
        "backends) keeps a child per principal"
    ]
    assert "    children: one per principal (shared by that principal's client sessions; anonymous clients are one principal), at most 8, an idle one reaped after 300s" in out
    cfg.write_text("listen: {host: 0.0.0.0}\nbackends:\n  s: {command: x, share: shared}\n  p: {command: x}\n")
    out = hopline("check", str(cfg)).stdout
    assert "warning: share: shared with the listener is not loopback:" in out
    assert "each anonymous client session is a principal of its own" in out
    cfg.write_text(f"backends:\n  s: {{command: {sys.executable}, share: shared}}\n")  # a command on PATH: no warning at all
    assert "warning" not in hopline("check", str(cfg)).stdout


def test_check_prints_import_notes_for_a_desktop_file():
    proc = hopline("check", "examples/claude_desktop_config.json", env={"REMOTE_MCP_TOKEN": "t"})
    assert proc.returncode == 0, proc.stderr
    assert "notes:" in proc.stdout
    assert "  mcpServers[\"demo copy\"] is backend id 'demo-copy'" in proc.stdout


def test_check_passes_a_disabled_server_whose_variable_is_unset():
    env = {k: v for k, v in os.environ.items() if k != "REMOTE_MCP_TOKEN"}
    proc = subprocess.run([sys.executable, "-m", "hopline", "check", "examples/claude_desktop_config.json"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "REMOTE_MCP_TOKEN is not set (give a default with ${NAME:-default}); not needed while its server is disabled" in proc.stdout


def test_check_names_a_vscode_input_that_is_not_given():
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOPLINE_INPUT_")}
    proc = subprocess.run([sys.executable, "-m", "hopline", "check", "examples/vscode-mcp.json"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert proc.returncode == 1
    assert "servers.remote.headers.Authorization: input 'remote-token' is not given" in proc.stdout + proc.stderr
    ok = hopline("check", "examples/vscode-mcp.json", env={"HOPLINE_INPUT_REMOTE_TOKEN": SECRET})
    assert ok.returncode == 0, ok.stderr
    assert SECRET not in ok.stdout + ok.stderr and "remote (http): http://127.0.0.1:8001/mcp (streamable-http)" in ok.stdout


def test_check_never_echoes_secrets(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("backends:\n"
                   "  a: {command: run, args: [--token, '${TOKEN}'], env: {T: '${TOKEN}'}}\n"
                   f"  b: {{url: 'https://user:{SECRET}@h/mcp?key={SECRET}&x=1', headers: {{A: '${{TOKEN}}'}}}}\n")
    proc = hopline("check", str(cfg), env={"TOKEN": SECRET})
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert "run --token '${TOKEN}'" in proc.stdout
    assert "https://user:***@h/mcp?key=***&x=***" in proc.stdout


def test_check_never_echoes_a_literal_credential_in_a_commands_arguments(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({
        "backends": {"remote": {"command": "npx", "args": ["-y", "mcp-remote", "https://h/mcp", "--header", f"Authorization: Bearer {SECRET}",
                                                          "--auth", SECRET, f"GITHUB_TOKEN={SECRET}", "--token", "${TOKEN}"]}},
        "acp": {"mode": "agent", "components": [{"command": "agent", "args": ["--api-key", SECRET, "-H", f"Cookie: {SECRET}"]}]},
    }))
    proc = hopline("check", str(cfg), env={"TOKEN": "from-the-environment"})
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr and "from-the-environment" not in proc.stdout
    assert "npx -y mcp-remote https://h/mcp --header 'Authorization: <redacted>' --auth '<redacted>' 'GITHUB_TOKEN=<redacted>' --token '${TOKEN}'" in proc.stdout
    assert "agent --api-key '<redacted>' -H 'Cookie: <redacted>'" in proc.stdout


def test_check_reports_auth_and_policy_and_warns_of_risky_or_broken_choices(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(sort_keys=False, data={
        "listen": {"host": "0.0.0.0", "port": 8000},
        "backends": {"gone": {"command": "hopline-no-such-server"}, "path": {"command": "./no/such/server"},
                     "off": {"command": "hopline-no-such-server", "enabled": False},
                     "demo": {"command": sys.executable, "args": ["-m", "hopline.demo"], "inherit_env": True}},
        "policy": {"rate_limits": {"limits": [{"requests": 5, "per": ["principal"]}]}, "dlp": {"builtins": True}},
        "observability": {"metrics": {"port": 9464, "host": "0.0.0.0"}},
    }))
    proc = hopline("check", str(cfg))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == f"{cfg}: valid, with 5 warnings"
    assert out[1:6] == [
        "  warning: listen.host: 0.0.0.0 is reachable from the network and there is no `auth`: anyone who can reach port 8000 can use every backend (add auth.api_keys or auth.issuers, or listen on 127.0.0.1)",
        "  warning: observability.metrics.host: the admin listener on 0.0.0.0 has no authentication: whoever reaches it sees /status and /config (secrets redacted); keep its port off the load balancer",
        "  warning: backends.gone.command: 'hopline-no-such-server' is not on PATH: this backend cannot start (install it or give its full path)",
        "  warning: backends.path.command: './no/such/server': there is no executable file at that path: this backend cannot start (install it or give its full path)",
        "  warning: backends.demo.inherit_env: true gives the child all of hopline's environment, the other backends' secrets included (list the names it needs instead)",
    ]
    assert "auth: none (every caller is anonymous)" in out
    assert out[out.index("policy:") + 1:out.index("policy:") + 3] == ["  rate limits: 1, kept in memory (per process)", "  DLP: all built-in patterns, redacting arguments and results"]


def test_check_explains_auth_and_warns_of_a_key_written_in_the_file(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({
        "listen": {"host": "0.0.0.0"},
        "backends": {"demo": {"command": sys.executable, "args": ["-m", "hopline.demo"]}},
        "auth": {"resource": "https://gw.example.com/mcp", "required_scopes": ["mcp:tools"],
                 "issuers": [{"issuer": "https://idp.example", "jwks_url": "https://idp.example/jwks?tenant=t1"}],
                 "api_keys": [{"name": "ci", "key": SECRET + "-in-the-file"}, {"name": "bot", "key": "${BOT_KEY}"}]},
    }))
    proc = hopline("check", str(cfg), env={"BOT_KEY": "bot-key-0123456789abcdef"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[:2] == [f"{cfg}: valid, with 1 warning",
                       "  warning: auth.api_keys[0].key is written in the file: whoever reads the file has it (use ${VAR} and set the variable where hopline runs)"]
    at = out.index("auth: clients authenticate; resource https://gw.example.com/mcp")
    assert out[at + 1:at + 5] == [
        "  JWT issuer https://idp.example (JWKS https://idp.example/jwks?tenant=***)",
        "  tokens: audience https://gw.example.com/mcp, typ at+jwt, application/at+jwt, jwt, leeway 30 s",
        "  API keys in header x-api-key: ci, bot",
        "  every request needs scopes: mcp:tools",
    ]
    assert SECRET not in proc.stdout and "bot-key-0123456789abcdef" not in proc.stdout


def test_check_of_the_auth_example():
    proc = hopline("check", "examples/auth.yaml", env={"HOPLINE_CI_KEY": SECRET + "-0123456789"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("examples/auth.yaml: valid\n") and "  JWT issuer https://login.example.com/realms/tools (JWKS " in proc.stdout
    assert SECRET not in proc.stdout


@pytest.mark.parametrize("text,where", [
    ('{\n  "mcpServers": {\n    "demo": {"command": "python", "args": ["-m", "hopline.demo"]},\n  }\n}\n', "a trailing comma at line 3, column 66"),
    ('{"mcpServers": {"demo": {"command": "python", "args": ["-m", "hopline.demo",]}}}', "a trailing comma at line 1, column 76"),
    ('{"mcpServers": {"demo": {"command": "python"}}, "hopline": {"routing": {"startup_timeout": 60},},}', "a trailing comma at line 1, column 95"),
])
def test_check_refuses_a_desktop_file_its_client_would_refuse(tmp_path, text, where):
    cfg = tmp_path / "claude_desktop_config.json"
    cfg.write_text(text)
    proc = hopline("check", str(cfg))
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[1] == f"  not valid JSON: {where}; desktop clients read an mcpServers file as strict JSON and refuse it (no trailing comma, no comment)"
    cfg.write_text(re.sub(r",(\s*[]}])", r"\1", text))
    assert hopline("check", str(cfg)).returncode == 0  # without the commas: valid


def test_check_shows_what_a_stdio_child_inherits_by_name_only(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("backends:\n  a: {command: run, env: {T: '${TOKEN}'}, inherit_env: ['AWS_*', HTTPS_PROXY]}\n"
                   "  b: {command: run}\n  c: {command: run, inherit_env: true}\n")
    proc = hopline("check", str(cfg), env={"TOKEN": SECRET})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert "    environment: the safe list + inherit_env AWS_*, HTTPS_PROXY + env T" in out
    assert "    environment: the safe list" in out and "    environment: all of hopline's" in out
    assert SECRET not in proc.stdout


def test_check_lists_problems_and_exits_1(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("mod: forward\nbackends:\n  a: {url: 'ftp://${TOKEN}'}\n  b.c: {command: x}\n")
    proc = hopline("check", str(cfg), env={"TOKEN": SECRET})
    assert proc.returncode == 1 and proc.stdout == ""
    err = proc.stderr.splitlines()
    assert err[0] == f"{cfg}: cannot use this configuration (3 problems)"
    assert "  mod: unknown key (did you mean 'mode'?)" in err
    assert any(line.startswith("  backends.a.url: must be an http:// or https:// URL with a host") for line in err)
    assert any(line.startswith('  backends["b.c"]: backend id') for line in err)
    assert SECRET not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("content", [None, b"", b"backends: [\n", b"\xff\xfe"])
def test_check_unreadable_or_unparseable_exits_1(tmp_path, content):
    cfg = tmp_path / "c.yaml"
    if content is not None:
        cfg.write_bytes(content)
    proc = hopline("check", str(cfg))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{cfg}: cannot use this configuration")


def test_check_without_a_file_is_a_usage_error():
    proc = hopline("check")
    assert proc.returncode == 2 and "usage:" in proc.stderr and "Traceback" not in proc.stderr


def test_check_shows_the_front_door_limits(tmp_path):
    out = hopline("check", "examples/gateway.yaml").stdout.splitlines()
    assert "limits: 4096 connections (256 per source); idle 15s, header 10s, body 30s; head at most 65536 bytes, 100 fields, target 8192 bytes" in out
    cfg = tmp_path / "c.yaml"
    cfg.write_text("listen:\n  limits: {max_connections: 50, max_connections_per_source: 5, header_timeout: 2.5}\nbackends:\n  a: {command: x}\n")
    assert "limits: 50 connections (5 per source); idle 15s, header 2.5s, body 30s" in hopline("check", str(cfg)).stdout
    cfg.write_text("listen:\n  limits: {max_header_bytes: 10, header_timout: 1}\nbackends:\n  a: {command: x}\n")
    proc = hopline("check", str(cfg))
    assert proc.returncode == 1 and "max_header_bytes" in proc.stderr and "header_timout" in proc.stderr


def test_check_shows_the_listener_bounds(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("listen: {max_pending_sessions: 8, handshake_timeout: 5, stream_buffer_messages: 50, stream_buffer_bytes: 65536}\nbackends: {a: {command: x}}\n")
    out = hopline("check", str(cfg)).stdout.splitlines()
    assert "  sessions: at most 1000, 8 being created at once (503 past either), handshake within 5 s; stream buffer 50 messages / 65536 bytes" in out
