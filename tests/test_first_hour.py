"""The first hour with hopline (issue 16, item 4): ``check`` and ``serve`` agree, startup
problems are one clean message and exit 1, broken backends are reported at start, and
the CLI does what its help says. Real processes throughout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = str(ROOT / "src")
PY = sys.executable


def hopline(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hopline …`` to its end (only for what exits by itself)."""
    return subprocess.run([PY, "-m", "hopline", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": SRC, **(env or {})})


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# -- 1. check and serve agree; no traceback at startup -------------------------------------------------

INTERCEPTOR_PROBLEM = (
    "policy.interceptors[0].class: module 'interceptor_example' cannot be imported: ModuleNotFoundError: "
    "No module named 'interceptor_example' (is its directory on PYTHONPATH, or its package installed?)"
)


@pytest.mark.parametrize("command", ["check", "serve"])
def test_an_interceptor_that_cannot_be_imported_fails_check_and_serve_alike(command):
    extra = ["--port", "0"] if command == "serve" else []
    proc = hopline(command, "examples/policy.yaml", *extra)
    no_traceback(proc)
    assert proc.returncode == 1
    prefix = "hopline serve: " if command == "serve" else ""
    assert proc.stderr == f"{prefix}examples/policy.yaml: cannot use this configuration (1 problem)\n  {INTERCEPTOR_PROBLEM}\n"


def test_check_passes_when_the_interceptor_imports():
    proc = hopline("check", "examples/policy.yaml", env={"PYTHONPATH": os.pathsep.join([SRC, str(ROOT / "examples")])})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("examples/policy.yaml: valid\n")


BROKEN = {
    "audit": ("policy:\n  audit: {sink: /nonexistent/dir/audit.log}\n",
              "policy.audit.sink: cannot be opened: directory /nonexistent/dir does not exist or is not writable"),
    "lockfile": ("policy:\n  pinning: {lockfile: ./lock.json}\n", "policy.pinning.lockfile: lockfile ./lock.json cannot be read: JSONDecodeError"),
    "key file": ("auth:\n  resource: http://127.0.0.1:8000/mcp\n  issuers:\n    - issuer: https://idp.example\n"
                 "      keys: [{alg: RS256, pem_file: /nonexistent.pem}]\n",
                 "auth.issuers[0].keys[0]: cannot read the key file: No such file or directory"),
    "bad key": ("auth:\n  resource: http://127.0.0.1:8000/mcp\n  issuers:\n    - issuer: https://idp.example\n"
                "      keys: [{alg: RS256, pem: not-a-key}]\n",
                "auth.issuers[0].keys[0]: not a usable RS256 public key (InvalidKeyError)"),
    "openapi file": ("", "backends.api.openapi: cannot read the spec file /nonexistent.yaml: No such file or directory"),
    "openapi spec": ("", "backends.api.openapi: the spec has no operations to convert"),
}


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.parametrize("command", ["check", "serve"])
def test_startup_problems_are_one_clean_message(tmp_path, case, command):
    extra, problem = BROKEN[case]
    backend = {"openapi file": "{openapi: /nonexistent.yaml}", "openapi spec": "{openapi: ./empty.yaml}"}.get(case)
    backends = f"backends:\n  api: {backend}\n" if backend else "backends:\n  demo: {command: python, args: [-m, hopline.demo]}\n"
    (tmp_path / "gw.yaml").write_text(backends + extra)
    (tmp_path / "lock.json").write_text("{bad")
    (tmp_path / "empty.yaml").write_text("openapi: 3.0.0\n")
    proc = hopline(command, "gw.yaml", *(["--port", "0"] if command == "serve" else []), cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 1
    prefix = "hopline serve: " if command == "serve" else ""
    assert proc.stderr == f"{prefix}gw.yaml: cannot use this configuration (1 problem)\n  {problem}\n"


# -- 2. each backend's state at start; errors said once -----------------------------------------------

def rpc(url: str):
    """A handshake-era client session over plain HTTP: ``call(method, params) -> body``."""
    import httpx

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}
    http = httpx.Client(timeout=30)
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "first-hour", "version": "1"}}
    r = http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    assert r.status_code == 200, r.text
    headers["mcp-session-id"] = r.headers["mcp-session-id"]
    http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(method: str, params: dict) -> dict:
        import json

        r = http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        text = r.text
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
        return json.loads(text)

    return call


def gateway_yaml(tmp_path: Path, backends: dict[str, str], extra: str = "") -> Path:
    lines = ["backends:"]
    for name, body in backends.items():
        lines.append(f"  {name}: {{command: {PY}, inherit_env: [PYTHONPATH], {body}}}")
    path = tmp_path / "gw.yaml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


DEMO = 'args: ["-m", "hopline.demo"]'
CRASHY = """args: ["-c", "import sys; sys.exit(3)"]"""


def backend_lines(proc, n: int) -> list[str]:
    """The next ``n`` lines in which serve says a backend's state, sorted."""
    return sorted(proc.wait_line(r"^hopline serve: backend \w+: .*$").group(0) for _ in range(n))


def test_serve_reports_each_backend_once_it_is_known(tmp_path, hopline_serve_eager):
    proc = hopline_serve_eager(str(gateway_yaml(tmp_path, {"demo": DEMO, "crashy": CRASHY, "solo": DEMO + ", share: isolated"})))
    assert backend_lines(proc, 3) == [
        "hopline serve: backend crashy: unavailable: backend exited with status 3",
        "hopline serve: backend demo: up (4 tools)",
        "hopline serve: backend solo: isolated (a child per client session, started when one connects)",
    ]
    assert proc.stderr[0] == f"hopline serve: forward gateway for 3 backends at {proc.url} (Streamable HTTP) and {proc.base}/sse (legacy SSE)\n"


def test_a_failed_backend_is_named_once_in_the_log(tmp_path, hopline_serve_eager):
    proc = hopline_serve_eager(str(gateway_yaml(tmp_path, {"demo": DEMO, "crashy": CRASHY})))
    backend_lines(proc, 2)
    rpc(proc.url)("tools/list", {})
    m = proc.wait_line(r"WARNING hopline.gateway: backend crashy unavailable: .*$")
    assert m.group(0) == "WARNING hopline.gateway: backend crashy unavailable: backend exited with status 3"


def test_the_startup_line_counts_one_backend_in_the_singular(tmp_path, hopline_serve_eager):
    proc = hopline_serve_eager(str(gateway_yaml(tmp_path, {"demo": DEMO})))
    assert proc.stderr[0] == f"hopline serve: forward gateway for 1 backend at {proc.url} (Streamable HTTP) and {proc.base}/sse (legacy SSE)\n"
    assert backend_lines(proc, 1) == ["hopline serve: backend demo: up (4 tools)"]


# -- 3. a call to a down backend's tool is -31001 naming it, not an unknown tool ---------------------

def test_a_tool_of_a_down_reverse_backend_is_unavailable_not_unknown(tmp_path, hopline_serve):
    proc = hopline_serve(str(gateway_yaml(tmp_path, {"crashy": CRASHY}, "mode: reverse\n")))
    answer = rpc(proc.url)("tools/call", {"name": "anything", "arguments": {}})
    assert answer["error"]["code"] == -31001, answer
    assert answer["error"]["data"]["backend"] == "crashy"
    assert answer["error"]["message"] == "backend crashy unavailable: backend exited with status 3"  # named once


def test_a_tool_of_a_down_forward_backend_is_unavailable_not_unknown(tmp_path, hopline_serve):
    proc = hopline_serve(str(gateway_yaml(tmp_path, {"demo": DEMO, "crashy": CRASHY})))
    call = rpc(proc.url)
    assert call("tools/call", {"name": "crashy__x", "arguments": {}})["error"]["data"] == {"backend": "crashy", "reason": "backend_closed"}
    unknown = call("tools/call", {"name": "demo__nope", "arguments": {}})["error"]  # a live backend's unknown name stays unknown
    assert (unknown["code"], unknown["message"]) == (-32602, "Unknown tool: 'demo__nope'")


# -- 4. the CLI does what its help says --------------------------------------------------------------

def raw_post(url: str, host: str) -> int:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    conn.request("POST", parts.path, body=body, headers={"Host": host, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                                          "MCP-Protocol-Version": "2025-06-18"})
    status = conn.getresponse().status
    conn.close()
    return status


@pytest.mark.parametrize("command", ["relay", "serve"])
def test_allow_host_takes_a_host_and_port(tmp_path, command, hopline_relay, hopline_serve):
    extra = ["--allow-host", "gw.example:8123", "--allow-host", "any.example"]
    proc = hopline_relay(*extra) if command == "relay" else hopline_serve(str(gateway_yaml(tmp_path, {"demo": DEMO})), *extra)
    assert raw_post(proc.url, "gw.example:8123") != 403
    assert raw_post(proc.url, "any.example:9999") != 403
    assert raw_post(proc.url, "gw.example:9999") == 403  # that port only
    assert raw_post(proc.url, "evil.example") == 403


def test_log_level_and_v_are_taken_after_the_command():
    from hopline.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["relay", "-v"]).log_level == "debug"
    assert parse(["relay", "-v", "--", "cmd", "-v"]).target == ["cmd", "-v"]  # after --, the command's
    assert parse(["serve", "cfg.yaml", "--log-level", "debug"]).log_level == "debug"
    assert parse(["--log-level", "warning", "serve", "cfg.yaml"]).log_level == "warning"
    assert parse(["serve", "cfg.yaml"]).log_level == "info"


def test_serve_with_log_level_after_the_config_logs_at_debug(tmp_path, hopline_serve):
    proc = hopline_serve(str(gateway_yaml(tmp_path, {"demo": DEMO})), "--log-level", "debug")
    assert "DEBUG asyncio: Using selector" in proc.stderr[0]  # at info (before: exit 2, unrecognized arguments) it is not logged


@pytest.mark.parametrize("command", ["relay", "serve"])
def test_binding_beyond_loopback_without_auth_warns(tmp_path, command, hopline_relay, hopline_serve):
    if command == "relay":
        proc = hopline_relay("--host", "0.0.0.0")
        want = "hopline relay: warning: listening on 0.0.0.0 without authentication: anyone who can reach this port can use the target\n"
    else:
        proc = hopline_serve(str(gateway_yaml(tmp_path, {"demo": DEMO})), "--host", "0.0.0.0")
        want = "hopline serve: warning: listening on 0.0.0.0 without `auth`: anyone who can reach this port can use every backend\n"
    assert want in proc.stderr


def test_otel_endpoint_takes_the_collector_base_url(tmp_path):
    from hopline.config.observability import OtelConfig

    assert OtelConfig(endpoint="http://collector:4318").endpoint == "http://collector:4318/v1/traces"
    assert OtelConfig(endpoint="http://collector:4318/").endpoint == "http://collector:4318/v1/traces"
    assert OtelConfig(endpoint="http://collector:4318/v1/traces").endpoint == "http://collector:4318/v1/traces"
    (tmp_path / "gw.yaml").write_text("backends:\n  demo: {command: python}\nobservability:\n  otel: {endpoint: 'collector:4318'}\n")
    proc = hopline("check", "gw.yaml", cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 1
    assert "observability.otel.endpoint: must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:4318 (/v1/traces is appended)" in proc.stderr


@pytest.mark.parametrize("command", ["relay", "serve"])
def test_a_port_in_use_is_one_line_and_exit_1(tmp_path, command):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = [str(gateway_yaml(tmp_path, {"demo": DEMO}))] if command == "serve" else []
        proc = hopline(command, *args, "--port", str(port))
    assert proc.returncode == 1
    assert proc.stderr == f"hopline {command}: port {port} is in use; pick another with --port\n"


def test_a_port_out_of_range_is_a_usage_error():
    proc = hopline("relay", "--port", "99999")
    assert proc.returncode == 2
    assert proc.stderr.endswith("hopline relay: error: argument --port: 99999 is not a port (0 to 65535; 0 picks a free one)\n")


def test_an_admin_port_in_use_is_one_line_and_exit_1(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = hopline("serve", str(gateway_yaml(tmp_path, {"demo": DEMO})), "--port", "0", "--admin-port", str(port))
    assert proc.returncode == 1
    assert proc.stderr == f"hopline serve: admin port {port} is in use; pick another with --admin-port\n"


def test_an_address_not_of_this_machine_is_one_line_and_exit_1():
    proc = hopline("relay", "--host", "192.0.2.1", "--port", "0")  # TEST-NET-1: never a local address
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == "hopline relay: cannot listen on 192.0.2.1:0: Cannot assign requested address"
