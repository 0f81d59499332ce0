"""Issue 3 interop: many real servers behind one hopline, driven by the official SDK client.

Behind one ``hopline serve`` (Forward mode):

- ``stdio``: ``tests/servers/sdk_server.py stdio`` (official Python SDK, both eras)
- ``stateful``: ``sdk_server.py http`` (legacy sessions with ``Mcp-Session-Id``)
- ``stateless``: ``sdk_server.py http --stateless``, configured ``stateless: true``
  (one backend session shared by every client)
- ``everything``: ``@modelcontextprotocol/server-everything`` (npm, stdio, handshake era only)
- ``memory``: ``@modelcontextprotocol/server-memory`` (npm, stdio, handshake era only)

The official Python SDK client talks to it in ``legacy`` (2025-11-25 handshake) and
``2026-07-28`` modes. Results through hopline equal the direct results apart from
namespaced names (``{backend}__{name}``), ``hopline://{backend}/…`` resource URIs and
documented ``_meta`` (``model_dump(exclude={"meta"})`` everywhere). The npm servers
answer a direct 2026-07-28 client with results the SDK rejects (no ``ttlMs`` /
``cacheScope``, see test_relay_npm.py), so their direct baseline is always a legacy
client; through hopline a 2026-07-28 client can use them (hopline talks handshake to
them and answers in 2026-07-28 itself).

Which client-side features are expected to cross the gateway, and why:

- ``stdio`` / ``stateful`` (a backend session of its own per legacy client; the
  shared 2026-07-28 session for 2026-07-28 requests):

  - legacy client: everything works, as directly: ``sample_direct`` /
    ``elicit_direct`` (real server→client requests), ``sample`` / ``elicit`` /
    ``roots``, ``progress``.
  - 2026-07-28 client: ``sample`` / ``elicit`` / ``roots`` work (MRTR: the backend's
    ``input_required`` result passes through and the client retries), ``progress``
    works; ``sample_direct`` / ``elicit_direct`` fail with the backend's -32600 "no
    back-channel", exactly as directly.

- ``stateless`` (``stateless: true``: one shared session, which hopline opens in the
  2026-07-28 era):

  - both clients: ``progress`` works; ``sample_direct`` / ``elicit_direct`` fail with
    -32600 (the backend has no back-channel, as directly).
  - 2026-07-28 client: ``sample`` / ``elicit`` / ``roots`` work (MRTR passes through).
  - legacy client: ``sample`` / ``elicit`` / ``roots`` are expected to work through
    version mediation (README: "a 2026-07-28 backend's input_required result is
    answered by asking a handshake-era client"); see
    test_legacy_client_gets_version_mediation_from_the_shared_2026_backend.

- ``everything`` (handshake era only):

  - legacy client: sampling, elicitation, roots and progress all work (its own
    backend session declares the client's capabilities).
  - 2026-07-28 client: the same. A 2026-07-28 request uses the backend's shared
    handshake session *of its capability set* (issue 12), so server-everything offers it
    the sampling / elicitation / roots tools a direct client with those capabilities
    sees, and its call is held on that session (issue 28): what the backend asks while
    it is the only call in flight reaches the client as ``input_required``. (Held calls
    on a session of their own, ``mediate_input``, are tested with an HTTP handshake-only
    SDK backend in test_gateway_held.py.)

- ``memory``: tools and its resource, both clients.

hopline's refusal of a server→client request on a shared session that no single
client can take is also tested in test_gateway_shared.py (two handshake clients).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import yaml
from mcp import Client, MCPError, StdioServerParameters

from tests.conftest import PY, SERVERS, _launcher, _stop_all
from tests.peers import MODES, bounded, client, start_sdk_http, stop, text_of

NODE_MODULES = Path(__file__).resolve().parents[1] / "node" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = NODE_MODULES / "server-everything" / "dist" / "index.js"
MEMORY = NODE_MODULES / "server-memory" / "dist" / "index.js"  # its package.json bin "mcp-server-memory"
NODE = shutil.which("node")
SDK_STDIO = [PY, str(SERVERS / "sdk_server.py"), "stdio"]
SDK_BACKENDS = ("stdio", "stateful", "stateless")
NPM_BACKENDS = ("everything", "memory")
BACKENDS = SDK_BACKENDS + NPM_BACKENDS

if NODE is None or not EVERYTHING.exists() or not MEMORY.exists():  # pragma: no cover - scripts/test installs them
    pytest.fail(f"npm peers missing under {NODE_MODULES}; run scripts/test (it runs npm ci in tests/node)", pytrace=False)


# -- backends and the gateway ---------------------------------------------------------------
@pytest.fixture(scope="module")
def sdk_http() -> Any:
    """The two HTTP SDK servers, once for the module: ``{"stateful": url, "stateless": url}``."""
    procs: list[subprocess.Popen] = []
    urls: dict[str, str] = {}
    try:
        for name, flags in (("stateful", []), ("stateless", ["--stateless"])):
            proc, urls[name] = start_sdk_http(*flags)
            procs.append(proc)
        yield urls
    finally:
        for proc in procs:
            stop(proc)


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory) -> Path:
    """The module's directory: server-memory's files, through the gateway and direct, live here for
    the whole module, so both stores see the same writes in the same order whatever tests run."""
    return tmp_path_factory.mktemp("interop")


def gateway_config(sdk_http: dict[str, str], tmp: Path) -> str:
    conf = {
        "backends": {
            "stdio": {"command": SDK_STDIO[0], "args": SDK_STDIO[1:]},
            "stateful": {"url": sdk_http["stateful"]},
            "stateless": {"url": sdk_http["stateless"], "stateless": True},
            "everything": {"command": NODE, "args": [str(EVERYTHING), "stdio"]},
            "memory": {"command": NODE, "args": [str(MEMORY)], "env": {"MEMORY_FILE_PATH": str(tmp / "gateway-memory.jsonl")}},
        }
    }
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path)


@pytest.fixture(scope="module")
def gateway(module_tmp, sdk_http):
    """One gateway for the module: each test is a client session of its own, and the one backend
    with state (server-memory) is compared with a direct server-memory on a file that lives as long."""
    launch, started = _launcher("serve", "--lazy")
    try:
        yield launch(gateway_config(sdk_http, module_tmp))
    finally:
        _stop_all(started)


@pytest.fixture
def fresh_gateway(tmp_path, sdk_http, hopline_serve):
    """A gateway of the test's own, for what only holds before anything else used it."""
    return hopline_serve(gateway_config(sdk_http, tmp_path))


def direct_target(backend: str, sdk_http: dict[str, str], tmp_path: Path) -> Any:
    if backend == "stdio":
        return StdioServerParameters(command=SDK_STDIO[0], args=SDK_STDIO[1:])
    if backend in ("stateful", "stateless"):
        return sdk_http[backend]
    if backend == "everything":
        return StdioServerParameters(command=NODE, args=[str(EVERYTHING), "stdio"])
    return StdioServerParameters(command=NODE, args=[str(MEMORY)], env={"MEMORY_FILE_PATH": str(tmp_path / "direct-memory.jsonl")})


def direct_mode(backend: str, mode: str) -> str:
    """npm servers only work with a legacy client directly (module docstring)."""
    return "legacy" if backend in NPM_BACKENDS else mode


@asynccontextmanager
async def direct(backend: str, mode: str, sdk_http: dict[str, str], tmp_path: Path, *, capabilities: bool = True) -> AsyncIterator[Client]:
    target = direct_target(backend, sdk_http, tmp_path)
    c = client(target, direct_mode(backend, mode)) if capabilities else Client(target, mode=direct_mode(backend, mode))
    async with c:
        yield c


def dump(value: Any, *exclude: str) -> dict[str, Any]:
    return value.model_dump(mode="json", exclude={"meta", *exclude})


def code_of(info: pytest.ExceptionInfo) -> int:
    return info.value.error.code


# Calls whose results must be identical through the gateway and directly.
CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    **{b: [("echo", {"text": f"héllo {b}"}), ("add", {"a": 2, "b": 3})] for b in SDK_BACKENDS},
    "everything": [
        ("echo", {"message": "through hopline"}),
        ("get-sum", {"a": 19, "b": 23}),
        ("get-structured-content", {"location": "New York"}),
        ("get-tiny-image", {}),
        ("get-annotated-message", {"messageType": "error", "includeImage": False}),
    ],
    "memory": [
        ("create_entities", {"entities": [{"name": "alice", "entityType": "person", "observations": ["likes gateways"]}]}),
        ("create_relations", {"relations": [{"from": "alice", "to": "alice", "relationType": "knows"}]}),
        ("read_graph", {}),
        ("search_nodes", {"query": "gateways"}),
    ],
}


# -- catalogue --------------------------------------------------------------------------------
async def every_tool(c: Client) -> list[Any]:
    """``tools/list`` once no backend is missing from it. A backend slower to start than a list
    waits (``routing.list_timeout``, 5 s: a loaded machine starting a new session's children) is
    left out of that answer, named in ``_meta``, and joins later, so a client asks again."""
    while True:
        listed = await bounded(c.list_tools())
        if not (listed.meta or {}).get("io.hopline/missing-backends"):
            return listed.tools
        await asyncio.sleep(0.1)


@pytest.mark.req("DUAL-HANDSHAKE")
@pytest.mark.parametrize("mode", MODES)
async def test_every_backends_tools_are_listed_namespaced_and_unchanged(gateway, sdk_http, module_tmp, mode):
    async with client(gateway.url, mode) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        through = {t.name: dump(t, "name") for t in await bounded(every_tool(c), 50)}
    expected: dict[str, dict[str, Any]] = {}
    for backend in BACKENDS:
        # A 2026-07-28 request reaches an npm server over the shared session of its own
        # capability set (issue 12): the same tools as a direct client with those capabilities.
        async with direct(backend, mode, sdk_http, module_tmp) as d:
            tools = (await bounded(d.list_tools())).tools
        assert tools, backend
        expected.update({f"{backend}__{t.name}": dump(t, "name") for t in tools})
    assert sorted(through) == sorted(expected)
    if mode != "legacy":  # Tool.execution is handshake-era vocabulary: the 2026-07-28 schema has no such field
        assert all(t["execution"] is None for t in through.values())
        expected = {name: {**tool, "execution": None} for name, tool in expected.items()}
    for name in expected:
        assert through[name] == expected[name], name


# -- invokes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_a_call_per_backend_equals_the_direct_call(gateway, sdk_http, module_tmp, mode):
    want: dict[str, list[dict[str, Any]]] = {}
    for backend, calls in CALLS.items():
        async with direct(backend, mode, sdk_http, module_tmp) as d:
            want[backend] = [dump(await bounded(d.call_tool(name, args))) for name, args in calls]
    async with client(gateway.url, mode) as c:
        for backend, calls in CALLS.items():
            got = [dump(await bounded(c.call_tool(f"{backend}__{name}", args))) for name, args in calls]
            for (name, _), g, w in zip(calls, got, want[backend]):
                assert not g["is_error"], (backend, name, g)
                assert g == w, (backend, name)
    # Structured results, the way a user reads them.
    assert want["stdio"][1]["structured_content"] == {"result": 5.0}
    assert want["memory"][2]["structured_content"]["entities"][0]["name"] == "alice"


@pytest.mark.parametrize("mode", MODES)
async def test_resources_and_templates_are_rewritten_and_read_like_direct(gateway, sdk_http, module_tmp, mode):
    want_resources: dict[str, dict[str, Any]] = {}
    want_templates: dict[str, dict[str, Any]] = {}
    reads = {b: "test://info" for b in SDK_BACKENDS} | {"everything": "demo://resource/static/document/features.md", "memory": "memory://knowledge-graph"}
    want_reads: dict[str, dict[str, Any]] = {}
    for backend in BACKENDS:
        async with direct(backend, mode, sdk_http, module_tmp) as d:
            for r in (await bounded(d.list_resources())).resources:
                want_resources[f"hopline://{backend}/{r.uri}"] = dump(r, "uri")
            if backend == "everything":
                for t in (await bounded(d.list_resource_templates())).resource_templates:
                    want_templates[f"hopline://{backend}/{t.uri_template}"] = dump(t, "uri_template")
            want_reads[backend] = dump(await bounded(d.read_resource(reads[backend])))
    async with client(gateway.url, mode) as c:
        got_resources = {str(r.uri): dump(r, "uri") for r in (await bounded(c.list_resources())).resources}
        got_templates = {t.uri_template: dump(t, "uri_template") for t in (await bounded(c.list_resource_templates())).resource_templates}
        got_reads = {b: dump(await bounded(c.read_resource(f"hopline://{b}/{uri}"))) for b, uri in reads.items()}
        # An expanded template still routes (README: templates are rewritten too).
        dynamic = await bounded(c.read_resource("hopline://everything/demo://resource/dynamic/text/7"))
    assert got_resources == want_resources
    assert got_templates == want_templates and len(got_templates) >= 1
    for backend in BACKENDS:
        assert got_reads[backend] == want_reads[backend], backend
    # Results are not namespaced (draft §8): the contents keep the backend's own URI.
    assert str(dynamic.contents[0].uri) == "demo://resource/dynamic/text/7"
    assert dynamic.contents[0].text.startswith("Resource 7:")


@pytest.mark.parametrize("mode", MODES)
async def test_prompts_are_listed_namespaced_and_rendered_like_direct(gateway, sdk_http, module_tmp, mode):
    gets = {
        **{b: [("review", {"code": "x = 1"})] for b in SDK_BACKENDS},
        "everything": [("simple-prompt", {}), ("args-prompt", {"city": "Paris", "state": "TX"})],
    }
    want_list: dict[str, dict[str, Any]] = {}
    want_get: dict[str, list[dict[str, Any]]] = {}
    for backend in gets:  # server-memory has no prompts
        async with direct(backend, mode, sdk_http, module_tmp) as d:
            want_list.update({f"{backend}__{p.name}": dump(p, "name") for p in (await bounded(d.list_prompts())).prompts})
            want_get[backend] = [dump(await bounded(d.get_prompt(name, args))) for name, args in gets[backend]]
    async with client(gateway.url, mode) as c:
        got_list = {p.name: dump(p, "name") for p in (await bounded(c.list_prompts())).prompts}
        for backend, calls in gets.items():
            got = [dump(await bounded(c.get_prompt(f"{backend}__{name}", args))) for name, args in calls]
            assert got == want_get[backend], backend
    assert got_list == want_list


# -- client-side features: sampling, elicitation, roots, progress ------------------------------------
class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))


async def call_with_progress(c: Client, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[float, float | None, str | None]]]:
    progress = Progress()
    result = await bounded(c.call_tool(name, args, progress_callback=progress))
    return dump(result), progress.seen


EVERYTHING_FEATURES = [
    ("trigger-sampling-request", {"prompt": "hello", "maxTokens": 10}),
    ("trigger-elicitation-request", {}),
    ("get-roots-list", {}),
]
LONG_RUNNING = ("trigger-long-running-operation", {"duration": 0.4, "steps": 4})


async def test_legacy_client_server_everything_sampling_elicitation_roots_progress(gateway, sdk_http, module_tmp):
    """Legacy client: the backend session is the client's own, so server→client requests reach it."""
    async with direct("everything", "legacy", sdk_http, module_tmp) as d:
        want = [dump(await bounded(d.call_tool(name, args))) for name, args in EVERYTHING_FEATURES]
        want_long, want_progress = await call_with_progress(d, *LONG_RUNNING)
    async with client(gateway.url, "legacy") as c:
        got = [dump(await bounded(c.call_tool(f"everything__{name}", args))) for name, args in EVERYTHING_FEATURES]
        got_long, got_progress = await call_with_progress(c, f"everything__{LONG_RUNNING[0]}", LONG_RUNNING[1])
    assert got == want
    assert "sampled:" in str(got[0]["content"]) and "accept" in str(got[1]["content"]) and "file:///tmp/project" in str(got[2]["content"])
    assert got_long == want_long
    assert got_progress == want_progress and [p for p, _, _ in got_progress] == [1, 2, 3, 4]


async def test_2026_client_server_everything_sampling_elicitation_roots_progress(fresh_gateway, sdk_http, module_tmp):
    """2026-07-28 client on the shared handshake session of its capability set (issue 28): the
    backend's sampling / elicitation requests during its call (the only one in flight) reach it
    through input_required, so it sees what a direct legacy client sees; progress too. The
    roots the backend asked for before any call are the empty list (README "Stdio backends")."""
    async with direct("everything", "legacy", sdk_http, module_tmp) as d:
        want = [dump(await bounded(d.call_tool(name, args))) for name, args in EVERYTHING_FEATURES]
    async with client(fresh_gateway.url, "2026-07-28") as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        for name, args in EVERYTHING_FEATURES:
            assert f"everything__{name}" in names  # as a direct client with these capabilities sees them
        result, seen = await call_with_progress(c, f"everything__{LONG_RUNNING[0]}", LONG_RUNNING[1])
        assert "completed" in result["content"][0]["text"]
        assert [p for p, _, _ in seen] == [1, 2, 3, 4]
        got = [dump(await bounded(c.call_tool(f"everything__{name}", args))) for name, args in EVERYTHING_FEATURES]
    assert got[:2] == want[:2]
    assert "sampled:" in str(got[0]["content"]) and "accept" in str(got[1]["content"])
    # server-everything asks for roots right after initialize, when no call is in flight: a
    # 2026-07-28 client cannot be asked then, so hopline vouches for nothing (an empty list)
    assert "no roots are currently configured" in got[2]["content"][0]["text"]


SDK_FEATURES = [("sample", {"prompt": "gw"}), ("elicit", {"message": "ok?"}), ("roots", {})]
SDK_DIRECT_FEATURES = [("sample_direct", {"prompt": "gw"}), ("elicit_direct", {"message": "ok?"})]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ["stdio", "stateful"])
async def test_sdk_backend_sampling_elicitation_roots_progress_equal_direct(gateway, sdk_http, module_tmp, mode, backend):
    """Own backend session (legacy) or MRTR (2026-07-28): the same answers as directly.

    ``sample_direct`` / ``elicit_direct`` are real server→client requests: they work for
    a legacy client and fail with the backend's -32600 for a 2026-07-28 client, both
    directly and through hopline."""
    async def run(c: Client, prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {name: dump(await bounded(c.call_tool(prefix + name, args))) for name, args in SDK_FEATURES}
        out["progress"] = await call_with_progress(c, prefix + "progress", {"steps": 3})
        for name, args in SDK_DIRECT_FEATURES:
            if mode == "legacy":
                out[name] = dump(await bounded(c.call_tool(prefix + name, args)))
            else:
                with pytest.raises(MCPError) as info:
                    await bounded(c.call_tool(prefix + name, args))
                out[name] = (code_of(info), info.value.error.message)
        return out

    async with direct(backend, mode, sdk_http, module_tmp) as d:
        want = await run(d, "")
    async with client(gateway.url, mode) as c:
        got = await run(c, f"{backend}__")
    assert got == want
    assert got["sample"]["content"][0]["text"] == "test-model: sampled:gw"
    assert got["elicit"]["content"][0]["text"] == "accepted: yes"
    assert "file:///tmp/project" in got["roots"]["content"][0]["text"]
    assert [p for p, _, _ in got["progress"][1]] == [1, 2, 3]
    if mode == "legacy":
        assert got["sample_direct"]["content"][0]["text"] == "test-model: sampled:gw"
        assert got["elicit_direct"]["content"][0]["text"] == "accepted: yes"
    else:
        assert got["sample_direct"][0] == got["elicit_direct"][0] == -32600


@pytest.mark.parametrize("mode", MODES)
async def test_stateless_shared_backend_progress_and_direct_requests(gateway, sdk_http, module_tmp, mode):
    """The ``stateless: true`` backend (one shared session): progress reaches the caller;
    ``sample_direct`` / ``elicit_direct`` have no back-channel (-32600, as directly)."""
    async with client(gateway.url, mode) as c:
        result, seen = await call_with_progress(c, "stateless__progress", {"steps": 3})
        assert result["content"][0]["text"] == "done after 3 steps"
        assert seen == [(1, 3, "step 1/3"), (2, 3, "step 2/3"), (3, 3, "step 3/3")]
        for name, args in SDK_DIRECT_FEATURES:
            with pytest.raises(MCPError) as info:
                await bounded(c.call_tool(f"stateless__{name}", args))
            assert code_of(info) == -32600
        if mode != "legacy":  # MRTR results pass through to a 2026-07-28 client
            assert text_of(await bounded(c.call_tool("stateless__sample", {"prompt": "gw"}))) == "test-model: sampled:gw"
            assert text_of(await bounded(c.call_tool("stateless__elicit", {"message": "ok?"}))) == "accepted: yes"
            assert "file:///tmp/project" in text_of(await bounded(c.call_tool("stateless__roots", {})))


async def test_legacy_client_gets_version_mediation_from_the_shared_2026_backend(gateway):
    """README: "a 2026-07-28 backend's input_required result is answered by asking a
    handshake-era client (version mediation)". The ``stateless: true`` backend is reached
    over a shared 2026-07-28 session; the call itself belongs to one legacy client, which
    declared sampling, elicitation and roots in its ``initialize``, so the backend's
    ``input_required`` must be turned into server→client requests to that client."""
    async with client(gateway.url, "legacy") as c:
        assert text_of(await bounded(c.call_tool("stateless__sample", {"prompt": "gw"}))) == "test-model: sampled:gw"
        assert text_of(await bounded(c.call_tool("stateless__elicit", {"message": "ok?"}))) == "accepted: yes"
        assert "file:///tmp/project" in text_of(await bounded(c.call_tool("stateless__roots", {})))


@pytest.mark.parametrize("mode", ["legacy"])
async def test_resource_links_in_results_route_back_through_the_gateway(gateway, sdk_http, module_tmp, mode):
    """A ``resource_link`` a tool returns is an address to follow, so it comes back in the
    gateway's routable form and reads like the backend's own (layers/routing/links.py);
    embedded resources are contents and keep the backend's URI."""
    async with direct("everything", mode, sdk_http, module_tmp) as d:
        direct_links = [item for item in (await bounded(d.call_tool("get-resource-links", {"count": 2}))).content if item.type == "resource_link"]
        direct_read = dump(await bounded(d.read_resource(str(direct_links[0].uri))))
        embedded = (await bounded(d.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": 1}))).content
    async with client(gateway.url, mode) as c:
        links = [item for item in (await bounded(c.call_tool("everything__get-resource-links", {"count": 2}))).content if item.type == "resource_link"]
        assert [str(link.uri) for link in links] == [f"hopline://everything/{link.uri}" for link in direct_links]
        read = dump(await bounded(c.read_resource(str(links[0].uri))))
        # Dynamic resources carry their creation time: compare all but that.
        strip = lambda r: [{k: v for k, v in item.items() if k not in ("text", "blob")} for item in r["contents"]]  # noqa: E731
        assert strip(read) == strip(direct_read) and read["contents"][0].keys() == direct_read["contents"][0].keys()
        through = (await bounded(c.call_tool("everything__get-resource-reference", {"resourceType": "Text", "resourceId": 1}))).content
    uris = lambda content: [(x.type, str(x.resource.uri)) for x in content if x.type == "resource"]  # noqa: E731
    assert uris(through) == uris(embedded) and uris(through)[0][1].startswith("demo://")
