"""The admin page in a real browser: Debian's headless Chromium driven by Playwright, against
a real ``hopline serve`` with the demo backend, a backend whose command exits at once, and
one whose tool is named ``<script>alert(1)</script>``.

The page shows every backend idle before any client came; once an SDK client has
connected, its own refresh (``/status`` every 2 s) shows the failing backend ``down``
and the demo ``up``: the test waits on that condition in the page, never on a clock. The
odd tool name is text in both renderings (server-side, and the script's redraw), and no
dialog ever opens. A screenshot of each view is saved under ``tests/artifacts/admin/``
(``HOPLINE_ARTIFACTS`` overrides; git-ignored) and its path printed.

Chromium comes from Debian (``apt-get install chromium``; scripts/test installs it) and
Playwright only drives it: no ``playwright install``, no browser download.
"""

from __future__ import annotations

import re

import os
from pathlib import Path

import pytest
import yaml
from playwright.async_api import expect, async_playwright

from tests.conftest import PY, ROOT, SERVERS
from tests.peers import bounded, client

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
EVIL = "<script>alert(1)</script>"
ARTIFACTS = Path(os.environ.get("HOPLINE_ARTIFACTS", ROOT / "tests" / "artifacts")) / "admin"
VIEWS = ("backends", "sessions", "tools", "requests", "declaration", "config")


@pytest.fixture
def served(tmp_path, hopline_serve):
    conf = {
        "name": "browser-test",
        "routing": {"retry_after": 0.5},
        "backends": {
            "demo": {"command": PY, "args": ["-m", "hopline.demo"], "env": {"DEMO_API_TOKEN": "page-secret-value-0001"}},
            "broken": {"command": PY, "args": ["-c", "raise SystemExit(3)"]},
            "odd": {"command": PY, "args": [str(SERVERS / "odd_names_server.py")]},
        },
    }
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path), "--admin-port", "0")
    return gw, gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)


@pytest.fixture
async def browser():
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


def row(backend: str, state: str) -> str:
    return f'#backends-body tr[data-backend="{backend}"][data-state="{state}"]'


async def shot(target, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await target.screenshot(path=str(path))
    assert path.stat().st_size > 1000
    print(f"screenshot: {path}")
    return path


async def test_the_admin_page_shows_a_failing_backend_down_and_names_as_text(served, browser):
    gw, admin = served
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)

    await page.goto(f"{admin}/")
    for backend in ("demo", "broken", "odd"):
        await page.wait_for_selector(row(backend, "idle"), timeout=10_000)  # nothing started before a client came
    await shot(page, "00-before-any-client")

    async with client(gw.url, "legacy") as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "demo__echo" in names and any(n.startswith("odd__") for n in names)
        assert (await bounded(c.call_tool("demo__echo", {"text": "from the browser test"}))).content[0].text == "from the browser test"
        # the page's own refresh shows it, within seconds
        await page.wait_for_selector(row("broken", "down"), timeout=10_000)
        await page.wait_for_selector(row("demo", "up"), timeout=10_000)
        await page.wait_for_selector("#requests-body tr td:text-is('tools/call')", timeout=10_000)
        tools = await page.locator("#tools-body").inner_text()
        assert EVIL in tools and "demo__echo" in tools  # the odd name is text, redrawn by the script
        assert await page.evaluate("document.scripts.length") == 1 and await page.locator("#tools-body script").count() == 0
        broken = await page.locator(row("broken", "down")).inner_text()
        assert "backend broken unavailable" in broken
        sessions = await page.locator("#sessions-body").inner_text()
        assert "handshake era: 1 open" in sessions and "anonymous: 1" in sessions
        await page.wait_for_selector("#shared-body li:text-is('demo (handshake)')", timeout=10_000)  # command backends share one session
        await shot(page, "01-page-live")
        for i, view in enumerate(VIEWS, start=2):
            await shot(page.locator(f"#{view}"), f"{i:02d}-{view}")

        await page.reload()  # the server-side rendering, before the script's first redraw
        await page.wait_for_selector(row("broken", "down"), timeout=10_000)
        assert EVIL in await page.locator("#tools-body").inner_text()
        assert await page.evaluate("document.scripts.length") == 1
        text = await page.content()
        assert "page-secret-value-0001" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
        config = await page.locator("#config pre").inner_text()
        assert '"DEMO_API_TOKEN": "<redacted>"' in config

        for view in ("status", "config"):  # the JSON views, as a browser shows them
            await page.goto(f"{admin}/{view}")
            body = await page.locator("body").inner_text()
            assert '"backends"' in body and "page-secret-value-0001" not in body
            await shot(page, f"{len(VIEWS) + 2 + (view == 'config'):02d}-json-{view}")
    assert dialogs == [] and console_errors == []


# -- the tool surface of a chosen identity, live policy decisions, charts -----------------------------------------------

KEYS = {"alice": "alice-page-key-value-0009", "bob": "bob-page-key-value-000010"}


@pytest.fixture
def governed(tmp_path, hopline_serve):
    """Two API keys; CEL: alice sees every tool, everyone else only echo; audit to a file."""
    conf = {
        "name": "governed-page",
        "auth": {"resource": "http://127.0.0.1/mcp", "api_keys": [{"name": n, "key": k} for n, k in KEYS.items()]},
        "backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}},
        "policy": {
            "rules": [{"name": "alice-sees-all", "expr": 'jwt.sub == "alice"'}, {"name": "echo-for-everyone", "expr": 'mcp.tool.name == "echo"'}],
            "audit": {"sink": str(tmp_path / "audit.jsonl")},
        },
    }
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path), "--admin-port", "0")
    return gw, gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)


def as_key(url: str, name: str):
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    http = create_mcp_http_client(headers={"x-api-key": KEYS[name]})
    return client(streamable_http_client(url, http_client=http), "legacy"), http


async def surface_rows(page) -> list[str]:
    return await page.locator("#surface-body tr").evaluate_all("rows => rows.map(r => r.dataset.tool)")


async def test_the_page_shows_each_identitys_surface_live_decisions_and_charts(governed, browser):
    from mcp import MCPError

    gw, admin = governed
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    c_alice, h_alice = as_key(gw.url, "alice")
    c_bob, h_bob = as_key(gw.url, "bob")
    async with h_alice, c_alice, h_bob, c_bob:
        alice = [t.name for t in (await bounded(c_alice.list_tools())).tools]
        bob = [t.name for t in (await bounded(c_bob.list_tools())).tools]
        assert bob == ["demo__echo"] and len(alice) > 1

        await page.goto(f"{admin}/")
        # server-rendered: anonymous in the configured mode, refused where auth is configured
        assert "refused before any list: 401" in await page.locator("#surface-note").inner_text()
        await page.select_option("#surface-identity", "key:bob")
        await page.wait_for_selector('#surface[data-identity="key:bob"][data-mode="configured"]', timeout=10_000)
        assert await surface_rows(page) == bob
        hidden = await page.locator("#surface-hidden").inner_text()
        assert all(f"{name} (demo)" in hidden for name in alice if name not in bob)
        await shot(page.locator("#surface"), "20-surface-bob")
        await page.select_option("#surface-identity", "key:alice")
        await page.wait_for_selector('#surface[data-identity="key:alice"]', timeout=10_000)
        assert await surface_rows(page) == alice and "none" in await page.locator("#surface-hidden").inner_text()
        await shot(page.locator("#surface"), "21-surface-alice")
        await page.select_option("#surface-identity", "key:bob")
        await page.select_option("#surface-mode", "search")
        await page.wait_for_selector('#surface[data-identity="key:bob"][data-mode="search"]', timeout=10_000)
        assert await surface_rows(page) == ["get_tool", "invoke_tool"]
        await shot(page.locator("#surface"), "22-surface-bob-search")
        await page.select_option("#surface-identity", "custom")
        await page.fill("#surface-subject", "alice")
        await page.select_option("#surface-mode", "standard")
        await page.wait_for_selector('#surface[data-identity="custom"][data-mode="standard"]', timeout=10_000)
        assert await surface_rows(page) == alice  # the rules see the typed subject as jwt.sub
        await page.fill("#surface-subject", "carol")
        await page.click("#surface-show")
        # (expect polls from Playwright's own world: the page's CSP forbids eval, so no wait_for_function)
        await expect(page.locator("#surface-note")).to_have_text(re.compile(r"^carol"), timeout=10_000)
        assert await surface_rows(page) == bob

        # calls, then the page's own refresh shows bob's refused call as a deny and the charts' points
        for i in range(6):
            await bounded(c_alice.call_tool("demo__echo", {"text": f"call {i}"}))
        with pytest.raises(MCPError):
            await bounded(c_bob.call_tool("demo__add", {"a": 1, "b": 2}))
        deny = page.locator('#requests-body tr[data-decision="deny"]')
        await deny.first.wait_for(timeout=10_000)
        text = await deny.first.inner_text()
        assert "bob" in text and "add" in text and "deny · visibility @pre_route: not visible to the caller" in text
        assert await page.locator('#requests-body tr[data-decision="allow"]').count() >= 6
        await shot(page.locator("#requests"), "23-requests-with-decisions")
        await page.wait_for_selector('#charts-body tr[data-backend="demo"] svg.latency[data-points="6"]', timeout=10_000)
        chart = page.locator('#charts-body tr[data-backend="demo"]')
        assert await chart.locator("svg.latency circle.point").count() == 6 and await chart.locator("svg.latency polyline").count() == 1
        assert await chart.locator("svg.errors rect.bar").count() == 2 and await chart.locator("svg.errors rect.failed").count() == 0
        await shot(page.locator("#charts"), "24-charts")

        await page.reload()  # the server-side rendering of the same: decisions and charts without the script
        assert await page.locator('#requests-body tr[data-decision="deny"]').count() == 1
        assert await page.locator('#charts-body tr[data-backend="demo"] svg.latency circle.point').count() == 6
        text = await page.content()
        for key in KEYS.values():
            assert key not in text
    assert dialogs == [] and console_errors == []
