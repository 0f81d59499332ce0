"""MCP Apps (``ui://`` resources, the ``io.modelcontextprotocol/ui`` extension) through ``hopline serve``.

Two official-SDK Apps backends (tests/servers/apps_server.py, labels A and B) offer the same
URIs: a tool whose ``_meta.ui.resourceUri`` (and flat ``_meta["ui/resourceUri"]``) is
``ui://view/app.html``, that resource (``text/html;profile=mcp-app``), a ``ui://`` template and a
plain resource. In Forward mode each ``ui://`` URI keeps its scheme, with the backend inside:
``ui://a__view/app.html`` (uris.py); a host reading a tool's link gets that backend's HTML, the
two backends' Apps stay distinct, and a ``ui://`` URI the gateway did not hand out is refused like
any unknown resource. Checked with the official Python SDK client in both eras and with a host
built on the official TypeScript packages (tests/node/apps_host.mjs: ext-apps'
``getToolUiResourceUri``, the host-side reading of a tool's UI link, then ``resources/read``).
Reverse mode presents its one backend unchanged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import MCPError

from tests.conftest import PY, SERVERS, _launcher, _stop_all
from tests.peers import MODES, bounded, client, eventually

NODE = shutil.which("node")
HOST = Path(__file__).resolve().parents[1] / "node" / "apps_host.mjs"
EXT_APPS = HOST.parent / "node_modules" / "@modelcontextprotocol" / "ext-apps"
MIME = "text/html;profile=mcp-app"
if NODE is None or not EXT_APPS.exists():  # pragma: no cover - scripts/test installs them
    pytest.fail(f"node or {EXT_APPS} missing; run scripts/test (it runs npm ci in tests/node)", pytrace=False)


def apps_backend(label: str, record: Path) -> dict[str, Any]:
    return {"command": PY, "args": [str(SERVERS / "apps_server.py"), "--label", label, "--record", str(record)]}


@pytest.fixture
def records(tmp_path) -> dict[str, Path]:
    return {b: tmp_path / f"{b}.log" for b in ("a", "b")}


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One Forward gateway over the A and B backends for the module, and its backends' records: the
    tests only read through it, and only the subscription test writes (and reads) the records."""
    tmp = tmp_path_factory.mktemp("apps")
    records = {b: tmp / f"{b}.log" for b in ("a", "b")}
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump({"backends": {"a": apps_backend("A", records["a"]), "b": apps_backend("B", records["b"])}}))
    launch, started = _launcher("serve", "--lazy")
    yield launch(str(path)), records
    _stop_all(started)


@pytest.fixture(scope="module")
def gateway(shared):
    return shared[0]


def html(label: str, page: str | None = None) -> str:
    return f"<!doctype html><html><body><h1>{f'{page} page' if page else 'app'} of {label}</h1></body></html>"


async def refusal(c, uri: str) -> tuple[int, str]:
    with pytest.raises(MCPError) as info:
        await bounded(c.read_resource(uri))
    return info.value.error.code, info.value.error.message


# -- the official Python SDK client, both eras -----------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_each_tool_links_its_own_backends_app_and_reading_it_returns_that_html(gateway, mode):
    async with client(gateway.url, mode) as c:
        tools = {t.name: t for t in (await bounded(c.list_tools())).tools}
        for backend, label in (("a", "A"), ("b", "B")):
            meta = tools[f"{backend}__show_view"].meta
            assert meta == {
                "ui": {"resourceUri": f"ui://{backend}__view/app.html", "visibility": ["model", "app"]},
                "ui/resourceUri": f"ui://{backend}__view/app.html",
            }
            assert tools[f"{backend}__show_page"].meta == {"ui/resourceUri": f"ui://{backend}__view/page/intro"}
            assert tools[f"{backend}__plain"].meta is None
            assert tools[f"{backend}__ui_capability"].meta is None
            read = await bounded(c.read_resource(meta["ui"]["resourceUri"]))
            [content] = read.contents
            assert content.text == html(label)
            assert content.mime_type == MIME
            assert content.uri == meta["ui"]["resourceUri"]  # the App under the address the host asked for
            assert content.meta == {"ui": {"prefersBorder": True, "csp": {"connectDomains": [], "resourceDomains": []}}}
            page = await bounded(c.read_resource(tools[f"{backend}__show_page"].meta["ui/resourceUri"]))
            assert [(x.text, x.uri) for x in page.contents] == [(html(label, "intro"), f"ui://{backend}__view/page/intro")]
            call = await bounded(c.call_tool(f"{backend}__show_view", {"city": "Oslo"}))
            assert call.content[0].text == f"{label}: Oslo"


@pytest.mark.parametrize("mode", MODES)
async def test_listings_keep_ui_uris_ui_and_the_two_backends_apps_distinct(gateway, mode):
    async with client(gateway.url, mode) as c:
        resources = {r.uri: r for r in (await bounded(c.list_resources())).resources}
        templates = {t.uri_template: t for t in (await bounded(c.list_resource_templates())).resource_templates}
        assert sorted(resources) == ["hopline://a/test://info", "hopline://b/test://info", "ui://a__view/app.html", "ui://b__view/app.html"]
        assert {resources[f"ui://{b}__view/app.html"].mime_type for b in "ab"} == {MIME}
        assert resources["ui://a__view/app.html"].meta == {"ui": {"prefersBorder": True, "csp": {"connectDomains": [], "resourceDomains": []}}}
        assert sorted(templates) == ["ui://a__view/page/{name}", "ui://b__view/page/{name}"]
        texts = {uri: (await bounded(c.read_resource(uri))).contents[0].text for uri in resources}
        assert texts == {
            "hopline://a/test://info": "info of A",
            "hopline://b/test://info": "info of B",
            "ui://a__view/app.html": html("A"),
            "ui://b__view/app.html": html("B"),
        }
        assert (await bounded(c.read_resource("hopline://b/test://info"))).contents[0].uri == "test://info"  # not an App: as before
        expanded = await bounded(c.read_resource("ui://b__view/page/welcome"))  # the exposed template, expanded by the client
        assert expanded.contents[0].text == html("B", "welcome")


@pytest.mark.parametrize("mode", MODES)
async def test_a_ui_uri_the_gateway_did_not_hand_out_is_refused_like_an_unknown_resource(gateway, mode):
    async with client(gateway.url, mode) as c:
        unknown_code, unknown_message = await refusal(c, "hopline://zz/test://info")
        assert unknown_message.startswith("Unknown resource")
        for forged in [
            "ui://view/app.html",  # the backend's own URI: no backend named in it
            "ui://zz__view/app.html",  # no such backend
            "ui://a/view/app.html",  # the backend as an authority without the delimiter
            "hopline://a/ui://view/app.html",  # a ui:// URI has one exposed form only
            "ui://a_view/app.html",
        ]:
            code, message = await refusal(c, forged)
            assert (code, message) == (unknown_code, f"Unknown resource: {forged!r}"), forged


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")  # handshake-era methods, on purpose
async def test_a_subscription_to_an_app_reaches_its_own_backend_under_the_backends_uri(shared):
    gateway, records = shared
    async with client(gateway.url, "legacy") as c:
        await bounded(c.subscribe_resource("ui://b__view/app.html"))
        await bounded(c.unsubscribe_resource("ui://b__view/app.html"))
        with pytest.raises(MCPError) as info:
            await bounded(c.subscribe_resource("ui://view/app.html"))
        assert info.value.error.message == "Unknown resource: 'ui://view/app.html'"
    await eventually(lambda: records["b"].exists(), what="backend b's subscription record")
    assert records["b"].read_text().splitlines() == ["subscribe ui://view/app.html", "unsubscribe ui://view/app.html"]
    assert not records["a"].exists()


@pytest.mark.parametrize("mode", MODES)
async def test_an_app_the_policy_hides_is_neither_linked_nor_readable_and_its_tool_stays(tmp_path, hopline_serve, records, mode):
    # allow rules: everything but resources, and every resource but b's App (cel.py: a rule naming
    # mcp.resource applies to resources only)
    rules = ['mcp.kind != "resource"', '!(mcp.backend == "b" && mcp.resource.uri == "ui://view/app.html")']
    path = tmp_path / "hidden.yaml"
    backends = {"a": apps_backend("A", records["a"]), "b": apps_backend("B", records["b"])}
    path.write_text(yaml.safe_dump({"backends": backends, "policy": {"rules": rules}}))
    gw = hopline_serve(str(path))
    async with client(gw.url, mode) as c:
        tools = {t.name: t for t in (await bounded(c.list_tools())).tools}
        assert tools["b__show_view"].meta == {"ui": {"visibility": ["model", "app"]}}  # who may call it still says
        assert tools["b__show_page"].meta == {"ui/resourceUri": "ui://b__view/page/intro"}  # another App of b's
        assert tools["a__show_view"].meta["ui"]["resourceUri"] == "ui://a__view/app.html"
        uris = [r.uri for r in (await bounded(c.list_resources())).resources]
        assert "ui://b__view/app.html" not in uris and "ui://a__view/app.html" in uris
        assert await refusal(c, "ui://b__view/app.html") == (
            (await refusal(c, "ui://zz__view/app.html"))[0],
            "Unknown resource: 'ui://b__view/app.html'",
        )
        assert (await bounded(c.call_tool("b__show_view", {"city": "Rome"}))).content[0].text == "B: Rome"


# -- a host on the official TypeScript packages (ext-apps' own reading of the UI link) ---------------
def host(url: str, era: str, calls: tuple[str, ...] = ()) -> dict[str, Any]:
    spec = {"url": url, "era": era, "calls": list(calls)}
    done = subprocess.run([NODE, str(HOST), json.dumps(spec)], capture_output=True, text=True, timeout=60, cwd=HOST.parent, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_an_ext_apps_host_finds_and_reads_each_tools_app_through_the_gateway(gateway, era):
    seen = host(gateway.url, era, ("a__ui_capability", "b__ui_capability"))
    tools = seen["tools"]
    assert sorted(tools) == sorted(f"{b}__{t}" for b in "ab" for t in ("plain", "show_page", "show_view", "ui_capability"))
    # the host's declared MCP Apps support reaches each backend (an Apps server offers its Views on it)
    assert seen["calls"] == dict.fromkeys(["a__ui_capability", "b__ui_capability"], json.dumps({"mimeTypes": [MIME]}))
    for backend, label in (("a", "A"), ("b", "B")):
        assert tools[f"{backend}__plain"] == {"uri": None}
        assert tools[f"{backend}__show_view"] == {
            "uri": f"ui://{backend}__view/app.html",
            "contents": [{"uri": f"ui://{backend}__view/app.html", "mimeType": MIME, "text": html(label)}],
        }
        assert tools[f"{backend}__show_page"]["contents"][0]["text"] == html(label, "intro")


# -- reverse mode: the one backend as itself ---------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_reverse_mode_presents_ui_uris_unchanged(tmp_path, hopline_serve, records, mode):
    path = tmp_path / "reverse.yaml"
    path.write_text(yaml.safe_dump({"mode": "reverse", "backends": {"a": apps_backend("A", records["a"])}}))
    gw = hopline_serve(str(path))
    async with client(gw.url, mode) as c:
        tools = {t.name: t for t in (await bounded(c.list_tools())).tools}
        assert tools["show_view"].meta["ui"]["resourceUri"] == tools["show_view"].meta["ui/resourceUri"] == "ui://view/app.html"
        assert sorted(r.uri for r in (await bounded(c.list_resources())).resources) == ["test://info", "ui://view/app.html"]
        [content] = (await bounded(c.read_resource("ui://view/app.html"))).contents
        assert (content.uri, content.text) == ("ui://view/app.html", html("A"))
    assert host(gw.url, "modern")["tools"]["show_view"]["contents"][0]["text"] == html("A")
