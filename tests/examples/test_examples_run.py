"""Every file in examples/ runs as docs/examples.md says (issue 37, item 2).

Each configuration passes ``hopline check`` as a real process; each one that needs no outside
service (no npm agent, no Redis, no iptables, no fixed port) is served with ``hopline serve``
and called by the official MCP SDK, in both eras. The ones run elsewhere are named with the
test that runs them, and docs/examples.md has a section for every file."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PY, ROOT, _launcher, _stop_all, start
from tests.peers import MODES, bounded, client

EXAMPLES = ROOT / "examples"
CONFIGS = sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
# The examples start their servers as `python -m hopline.demo`: the `python` on PATH is this venv's.
PATH = {"PATH": os.pathsep.join([str(Path(PY).parent), os.environ.get("PATH", "")])}
ENV = {
    **PATH,
    "PYTHONPATH": str(EXAMPLES),  # policy.yaml's interceptor_example
    "REMOTE_MCP_TOKEN": "test-token",  # claude_desktop_config.json's (its server is disabled)
    "HOPLINE_INPUT_REMOTE_TOKEN": "input-token",  # vscode-mcp.json's
    "REDIS_URL": "redis://127.0.0.1:6379/0",  # replicas.yaml's: check opens no connection
    "HOPLINE_SESSION_KEY": "A" * 43,
    "HOPLINE_CI_KEY": "ci-key-0123456789abcdef",  # auth.yaml's
}

# Served here with a real client: example -> (tool to call, its arguments, text the answer holds).
SERVED = {
    "gateway.yaml": ("demo__add", {"a": 2, "b": 3}, '"sum":5'),
    "reverse.yaml": ("add", {"a": 2, "b": 3}, '"sum":5'),
    "sidecar.yaml": ("echo", {"text": "hi"}, "hi"),
    "stdio-pool.yaml": ("scratch__add", {"a": 2, "b": 3}, '"sum":5'),
    "toolmodes.yaml": ("invoke_tool", {"name": "bulk__add", "arguments": {"a": 2, "b": 3}}, '"sum":5'),
    "policy.yaml": ("demo__add", {"a": 2, "b": 3}, '"sum":5'),
    "openapi.yaml": ("pets__listPets", {"limit": 1}, "Rex"),
    "federation.yaml": ("team__demo__add", {"a": 2, "b": 3}, '"sum":5'),
    "claude_desktop_config.json": ("demo-copy__add", {"a": 2, "b": 3}, '"sum":5'),
    "vscode-mcp.json": ("demo__add", {"a": 2, "b": 3}, '"sum":5'),
}
# Run by another test (which must name the example), or not runnable here, and why.
ELSEWHERE = {
    "acp-demo.yaml": "tests/acp/test_demo_agent.py",
    # both served as the image runs them by tests/deploy/test_deploy_dockerfile.py, which takes them from deploy_files
    "replicas.yaml": "tests/deploy/deploy_files.py",
    "container.yaml": "tests/deploy/deploy_files.py",
    "auth.yaml": "tests/config/test_config_examples.py",  # its API keys and issuers, loaded and checked
}
CHECK_ONLY = {
    "acp-chain.yaml": "its agent comes from npm and needs the user's credentials",
    "transparent.yaml": "it forwards to a fixed address (127.0.0.1:8001) named by DNS or a proxy",
    "transparent-intercept.yaml": "it needs root for the iptables REDIRECT",
}


def test_every_example_is_run_or_says_why_not():
    assert set(CONFIGS) == set(SERVED) | set(ELSEWHERE) | set(CHECK_ONLY)
    for name, test in ELSEWHERE.items():
        assert f"examples/{name}" in (ROOT / test).read_text() or name in (ROOT / test).read_text(), (name, test)


def test_every_file_in_examples_has_a_section_in_the_docs():
    page = (ROOT / "docs" / "examples.md").read_text()
    sections = re.findall(r"^## `([^`]+)`", page, re.M)
    files = sorted(
        str(p.relative_to(EXAMPLES))
        for p in EXAMPLES.rglob("*")
        if p.is_file() and p.name != "README.md" and "__pycache__" not in p.parts  # (policy.yaml's import writes one)
    )
    assert sorted(sections) == files
    for name in CHECK_ONLY:  # the reason a reader cannot just run it is on the page
        assert f"## `{name}`" in page


@pytest.mark.parametrize("name", CONFIGS)
def test_an_example_checks(name):
    proc = subprocess.run(
        [PY, "-m", "hopline", "check", f"examples/{name}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, **ENV},
    )
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]  # "valid", or "valid, with N warnings" (e.g. a listener beyond loopback)
    assert re.fullmatch(rf"examples/{re.escape(name)}: valid(, with \d+ warnings?)?", first), proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.fixture
def served(tmp_path):
    """``served(name, **env)``: ``hopline serve examples/NAME --port 0``, every backend started."""
    launch, started = _launcher("serve")
    helpers = []

    def serve(name: str, **env: str):
        return launch(f"examples/{name}", env={**ENV, **env})

    serve.started, serve.helpers = started, helpers
    yield serve
    for proc in helpers:
        proc.stop()
    _stop_all(started)


def extra_env(name: str, served, tmp_path: Path) -> dict[str, str]:
    """What an example needs beside the file: the services its header comment says to start."""
    if name == "policy.yaml":
        return {"HOPLINE_LOCKFILE": str(tmp_path / "lock.json"), "HOPLINE_AUDIT": str(tmp_path / "audit.jsonl")}
    if name == "openapi.yaml":  # the pet store its header names, on a free port
        api = start([PY, str(ROOT / "tests" / "servers" / "rest_api.py"), "--port", "0"])
        served.helpers.append(api)
        return {"PETS_URL": api.wait_line(r"rest_api: (http://\S+)").group(1)}  # PETS_TOKEN unset, as in the header
    if name == "federation.yaml":  # its member: examples/gateway.yaml, as its header says
        return {"TEAM_GATEWAY_URL": served("gateway.yaml").url}
    return {}


@pytest.mark.parametrize("name", sorted(SERVED))
async def test_an_example_serves_a_real_client(name, served, tmp_path):
    tool, arguments, expected = SERVED[name]
    gateway = served(name, **extra_env(name, served, tmp_path))
    for mode in MODES:  # one gateway, a client of each era
        async with client(gateway.url, mode) as c:
            tools = [t.name for t in (await bounded(c.list_tools())).tools]
            assert tool in tools, (mode, tools)
            result = await bounded(c.call_tool(tool, arguments))
        assert not result.is_error, (mode, result)
        assert expected in "".join(getattr(block, "text", "") for block in result.content).replace(" ", ""), mode
        if name in EXPECTED_SURFACE:
            EXPECTED_SURFACE[name](tools, result)


def _policy(tools: list[str], result: Any) -> None:
    # an anonymous caller: the everyone-reads rule, no ops tools; the interceptor labels results
    assert sorted(t for t in tools if t.startswith(("demo__", "ops__"))) == ["demo__add", "demo__echo", "demo__whoami"]
    assert result.meta["example.org/backend"] == "demo"


def _sidecar(tools: list[str], result: Any) -> None:
    assert "countdown" not in tools and {"echo", "add", "whoami"} <= set(tools)  # its rule, names unprefixed


def _toolmodes(tools: list[str], result: Any) -> None:
    assert {"get_tool", "invoke_tool", "demo__echo"} <= set(tools) and "bulk__add" not in tools


def _openapi(tools: list[str], result: Any) -> None:
    assert {"pets__listPets", "pets__getPet", "pets__createPet", "demo__echo"} <= set(tools)


EXPECTED_SURFACE = {
    "policy.yaml": _policy,
    "sidecar.yaml": _sidecar,
    "toolmodes.yaml": _toolmodes,
    "openapi.yaml": _openapi,
}
