"""SEP-2624 interceptor servers through ``hopline serve`` with the official SDK client (issue 33).

The interceptor servers are tests/servers/interceptor_server.py (the MCP SDK's low-level
server with ``interceptors/list`` and ``interceptor/invoke``) run by hopline as real stdio
children, or over Streamable HTTP; the backend is tests/servers/sdk_server.py. One gateway has
a guard (blocks destructive arguments, stdio), a PII redactor (on results, over HTTP) and a
server of 300 validators; others have a member that hangs, crashes or answers garbage,
failing open or closed.
"""

from __future__ import annotations

import psutil
import pytest
import yaml
from mcp.shared.exceptions import MCPError

from tests.conftest import PY, SERVERS, start
from tests.peers import MODES, bounded, client, start_script, stop, text_of

INTERCEPTOR = str(SERVERS / "interceptor_server.py")


def _gateway(tmp, servers: list[dict], audit: bool = False):
    config: dict = {
        "backends": {"sdk": {"command": PY, "args": [str(SERVERS / "sdk_server.py"), "stdio"]}},
        "policy": {"interceptor_servers": servers},
    }
    if audit:
        config["policy"]["audit"] = {"sink": str(tmp / "audit.jsonl")}
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = start([PY, "-m", "hopline", "serve", str(path), "--port", "0"])
    proc.url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)", timeout=60).group(1)
    proc.wait_line(r"backend sdk: up", timeout=60)
    return proc


def _stop(proc) -> None:
    children = proc.descendants()
    proc.stop()
    _, alive = psutil.wait_procs(children, timeout=5)
    for p in alive:
        p.kill()
    assert not alive, f"hopline left children behind: {alive}"


@pytest.fixture(scope="module")
def redactor_over_http():
    """The PII redactor served over Streamable HTTP (the SDK's app under uvicorn, port 0)."""
    proc, port = start_script(INTERCEPTOR, "redact")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


def server(kind: str, **kw) -> dict:
    return {"name": kind, "command": PY, "args": [INTERCEPTOR, kind, *kw.pop("extra", [])], **kw}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, redactor_over_http):
    tmp = tmp_path_factory.mktemp("guarded")
    log = tmp / "invoked.log"
    servers = [
        server("guard", extra=["--log", str(log)]),
        {"name": "redact", "url": redactor_over_http},
        server("many", extra=["--log", str(log)], max_concurrency=8),
    ]
    proc = _gateway(tmp, servers, audit=True)
    try:
        yield {"url": proc.url, "audit": tmp / "audit.jsonl", "log": log}
    finally:
        _stop(proc)


@pytest.mark.parametrize("mode", MODES)
async def test_a_validator_blocks_a_dangerous_call_with_its_name_and_reason(guarded, mode):
    async with client(guarded["url"], mode) as c:
        with pytest.raises(MCPError) as caught:
            await bounded(c.call_tool("sdk__echo", {"text": "please rm -rf / now"}))
        assert caught.value.error.code == -31005
        assert caught.value.error.message == (
            "blocked by interceptor guard/dangerous-args: dangerous argument: destructive command"
        )
        # the gateway and the interceptor servers keep serving
        assert text_of(await bounded(c.call_tool("sdk__echo", {"text": "ls"}))) == "ls"


@pytest.mark.parametrize("mode", MODES)
async def test_a_mutator_redacts_pii_in_results(guarded, mode):
    async with client(guarded["url"], mode) as c:
        got = await bounded(c.call_tool("sdk__echo", {"text": "mail bob@example.com, SSN 123-45-6789"}))
    assert text_of(got) == "mail [EMAIL], SSN [SSN]"


async def test_warnings_pass_and_every_verdict_is_audited(guarded):
    async with client(guarded["url"], "legacy") as c:
        assert text_of(await bounded(c.call_tool("sdk__echo", {"text": "sudo make me a sandwich"})))
        with pytest.raises(MCPError):
            await bounded(c.call_tool("sdk__echo", {"text": "DROP TABLE users"}))
    records = [yaml.safe_load(line) for line in guarded["audit"].read_text().splitlines()]
    calls = [r for r in records if r.get("event") == "call"]
    warned = next(r for r in calls if any(n.get("outcome") == "invalid (warn)" for n in r.get("interceptors", [])))
    assert warned["decision"] == "allow"
    denied = [r for r in calls if r["decision"] == "deny"][-1]
    assert denied["by"] == "interceptor-servers" and denied["reason"] == (
        "guard/dangerous-args: dangerous argument: destructive command"
    )
    assert "DROP TABLE" not in guarded["audit"].read_text()  # the audit records verdicts, not arguments
    invoked = guarded["log"].read_text()
    assert "guard/dangerous-args request" in invoked
    assert "many/v000 request" in invoked and "many/v299 request" in invoked  # 300 validators, 8 at a time


async def test_failing_members_that_fail_open_let_calls_through(tmp_path):
    proc = _gateway(
        tmp_path,
        [
            server("hang", fail_open=True, timeout=0.5),
            server("crash", fail_open=True),
            server("garbage", fail_open=True),
        ],
    )
    try:
        async with client(proc.url, "legacy") as c:
            for text in ("one", "two"):  # the crashed server is started again for the second call
                assert text_of(await bounded(c.call_tool("sdk__echo", {"text": text}))) == text
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    "kind, why",
    [
        ("hang", "failed (no answer within 0.5 s); the call is refused (fail closed)"),
        ("crash", "failed (server went away: crash: backend exited with status 3); the call is refused (fail closed)"),
        ("garbage", "failed (validation result has no boolean 'valid'); the call is refused (fail closed)"),
    ],
)
async def test_failing_members_fail_closed_by_default(tmp_path, kind, why):
    proc = _gateway(tmp_path, [server(kind, timeout=0.5)])
    name = {"hang": "slow/hang", "crash": "boom/crash", "garbage": "junk/garbage"}[kind]
    try:
        async with client(proc.url, "legacy") as c:
            with pytest.raises(MCPError) as caught:
                await bounded(c.call_tool("sdk__echo", {"text": "hi"}))
            assert caught.value.error.message == f"blocked by interceptor {name}: {why}"
    finally:
        _stop(proc)


def test_check_lists_the_chain_in_order(tmp_path):
    import subprocess

    from tests.conftest import ROOT

    config = {
        "backends": {"sdk": {"command": PY, "args": [str(SERVERS / "sdk_server.py"), "stdio"]}},
        "policy": {
            "dlp": {},
            "interceptors": [{"class": "interceptor_example:GuardDestructive", "name": "guard-destructive"}],
            "interceptor_servers": [
                server("guard", timeout=0.5),
                {"name": "remote", "url": "https://user:pw@guard.example/mcp?token=abc", "fail_open": True,
                 "events": ["tools/call"], "interceptors": {"pii/redact": {"priority": -5}}},
            ],
            "webhooks": [
                {"name": "opa", "url": "https://opa.internal/v1?key=k", "type": "validating",
                 "secret": "0123456789abcdef0123"},
            ],
        },
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    out = subprocess.run(
        [PY, "-m", "hopline", "check", str(path)], capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "examples"), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    at = lines.index("  interceptor chain, in order on a request (responses in reverse):")
    assert lines[at + 1 : at + 6] == [
        "    1. DLP redaction (built in)",
        "    2. interceptor guard-destructive (in process; enforce, fail closed)",
        f"    3. interceptor server guard (SEP-2624, stdio: {PY}; the server's mode (default enforce), the server's "
        "failure policy (default closed), timeout 0.5 s, 16 in flight)",
        "    4. interceptor server remote (SEP-2624, url: https://user:***@guard.example/mcp?token=***; the server's "
        "mode (default enforce), fail open, timeout 5 s (or the server's), 16 in flight; only tools/call; "
        "overrides for pii/redact)",
        "    5. webhook opa (validating, https://opa.internal/v1?key=***, signed; enforce, fail closed, timeout 2 s, "
        "request of tools/call)",
    ]
    assert "pw" not in out.stdout and "abc" not in out.stdout and "0123456789abcdef0123" not in out.stdout
    assert "policy.webhooks[0].secret is written in the file" in out.stdout


def test_bad_interceptor_server_entries_are_refused_at_their_key(tmp_path):
    from hopline.config.load import ConfigError, parse_config

    base = "backends:\n  gh: {command: python}\npolicy:\n  interceptor_servers:\n"
    with pytest.raises(ConfigError) as err:
        parse_config(
            base + "    - {name: a, command: x, url: 'http://h/mcp'}\n    - {name: a, url: 'ftp://h'}\n"
            "    - {name: b, command: x, timeout: 0}\n    - {name: 'bad name', command: x}\n"
        )
    paths = {p for p, _ in err.value.problems}
    assert {"policy.interceptor_servers[0]", "policy.interceptor_servers[1].url",
            "policy.interceptor_servers[2].timeout", "policy.interceptor_servers[3].name"} <= paths
