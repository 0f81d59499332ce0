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

import os
from pathlib import Path

import pytest
import yaml
from playwright.async_api import async_playwright

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
