"""Every 2026-07-28 result hopline builds or mediates follows the 2026-07-28 schema (issue 28
item 4), validated against the specification's JSON Schema (``../shared/spec``, beside the
repository) with jsonschema.

Through ``hopline serve`` in Forward and Reverse modes: a 2026-07-28 backend (the official
SDK's ``sdk_server.py``, stdio) and a handshake-era one (server-everything, npm), whose
results hopline turns into 2026-07-28 ones. Raw HTTP, so the JSON checked is exactly what a
client receives: ``server/discover``, the four lists, ``tools/call``,
``resources/read`` (cache fields: ``ttlMs``, ``cacheScope``), ``prompts/get``,
``completion/complete``, and the ``input_required`` result of a call held on a handshake-era
backend that asks for sampling.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tests.conftest import PY, ROOT, SERVERS
from tests.modes.test_gateway_isolation import messages_of
from tests.helpers import write_yaml

EVERYTHING = ROOT / "tests" / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE = shutil.which("node")
MODERN = "2026-07-28"
if NODE is None or not EVERYTHING.exists():  # pragma: no cover - scripts/test installs it
    pytest.fail(f"server-everything is not installed at {EVERYTHING}; run scripts/test (npm ci in tests/node)", pytrace=False)


def spec_dir() -> Path:
    """``shared/spec`` beside the repository (for a git worktree: beside its main checkout)."""
    common = subprocess.run(["git", "rev-parse", "--git-common-dir"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    for base in (ROOT.parent, (ROOT / common).resolve().parent.parent if common else ROOT.parent):
        if (base / "shared" / "spec" / f"mcp-schema-{MODERN}.json").exists():
            return base / "shared" / "spec"
    pytest.fail(f"the {MODERN} schema is not in ../shared/spec", pytrace=False)


SCHEMA = json.loads((spec_dir() / f"mcp-schema-{MODERN}.json").read_text())


def check(value: dict[str, Any], definition: str) -> None:
    validator = jsonschema.validators.validator_for(SCHEMA)({**SCHEMA, "$ref": f"#/$defs/{definition}"})
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"{definition}: " + "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


class Modern:
    """A 2026-07-28 client over raw HTTP: every request self-contained (no session)."""

    def __init__(self, http: httpx.AsyncClient, url: str, caps: dict[str, Any] | None = None) -> None:
        self.http, self.url, self.caps, self.n = http, url, caps or {}, 0

    async def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.n += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": self.caps,
            "io.modelcontextprotocol/clientInfo": {"name": "schema", "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": {**(params or {}), "_meta": meta}}
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN, "mcp-method": method}
        name = (params or {}).get("name") if method in ("tools/call", "prompts/get") else (params or {}).get("uri")
        if isinstance(name, str):
            headers["mcp-name"] = name
        r = await self.http.post(self.url, content=json.dumps(body), headers=headers)
        answer = next(m for m in messages_of(r) if m.get("id") == self.n)
        assert "result" in answer, (method, answer)
        return answer["result"]


def write(tmp_path: Path, backends: dict[str, Any], **top: Any) -> str:
    return write_yaml(tmp_path, {"backends": backends, **top})


SDK = {"command": PY, "args": [str(SERVERS / "sdk_server.py"), "stdio"]}
EVERYTHING_BACKEND = {"command": NODE, "args": [str(EVERYTHING), "stdio"]}


async def validate_surface(c: Modern, tool: str, resource: str, prompt: tuple[str, dict], template_ref: dict | None) -> None:
    check(await c.result("server/discover"), "DiscoverResult")
    for method, definition in (
        ("tools/list", "ListToolsResult"),
        ("resources/list", "ListResourcesResult"),
        ("resources/templates/list", "ListResourceTemplatesResult"),
        ("prompts/list", "ListPromptsResult"),
    ):
        check(await c.result(method), definition)
    check(await c.result("tools/call", {"name": tool[0], "arguments": tool[1]}), "CallToolResult")  # type: ignore[index]
    read = await c.result("resources/read", {"uri": resource})
    check(read, "ReadResourceResult")
    check(await c.result("prompts/get", {"name": prompt[0], "arguments": prompt[1]}), "GetPromptResult")
    if template_ref is not None:
        check(await c.result("completion/complete", template_ref), "CompleteResult")


async def test_forward_mode_results_follow_the_2026_schema(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"sdk": SDK, "everything": EVERYTHING_BACKEND}))
    async with httpx.AsyncClient(timeout=30) as http:
        c = Modern(http, gw.url)
        await validate_surface(c, ("sdk__echo", {"text": "x"}), "hopline://sdk/test://info", ("sdk__review", {"code": "x"}), None)
        await validate_surface(
            c,
            ("everything__echo", {"message": "x"}),
            "hopline://everything/demo://resource/static/document/features.md",
            ("everything__simple-prompt", {}),
            {"ref": {"type": "ref/prompt", "name": "everything__args-prompt"}, "argument": {"name": "city", "value": "P"}},
        )
        asking = Modern(http, gw.url, {"sampling": {}})  # a call held on the handshake backend: hopline's input_required
        held = await asking.result("tools/call", {"name": "everything__trigger-sampling-request", "arguments": {"prompt": "hi", "maxTokens": 5}})
        check(held, "InputRequiredResult")
        assert held["resultType"] == "input_required"
        (key,) = held["inputRequests"]
        answer = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}
        done = await asking.result(
            "tools/call",
            {"name": "everything__trigger-sampling-request", "arguments": {"prompt": "hi", "maxTokens": 5}, "inputResponses": {key: answer}, "requestState": held["requestState"]},
        )
        check(done, "CallToolResult")


async def test_reverse_mode_results_follow_the_2026_schema(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"everything": EVERYTHING_BACKEND}, mode="reverse"))
    async with httpx.AsyncClient(timeout=30) as http:
        await validate_surface(
            Modern(http, gw.url),
            ("echo", {"message": "x"}),
            "demo://resource/static/document/features.md",
            ("simple-prompt", {}),
            {"ref": {"type": "ref/prompt", "name": "args-prompt"}, "argument": {"name": "city", "value": "P"}},
        )
