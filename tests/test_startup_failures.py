"""Start-up failures a newcomer can read (issue 29 items 11 and 12): a start that outlasts
``routing.startup_timeout`` names the limit and the setting, a server that writes junk to
stdout is quoted (bounded, redacted), a crash shows its exit status and the tail of its
stderr, a backend that comes up late says so; the admin view and /readyz say the same
about failed backends as the README. Real ``hopline serve`` processes and real children
(``python -c`` scripts)."""

from __future__ import annotations

import json

import httpx

from tests.test_first_hour import DEMO, backend_lines, gateway_yaml

TOKEN = "sk-live-0123456789abcdefABCDEF"
ENV_SECRET = "hunter2hunter2"


def args(code: str, *extra: str) -> str:
    return "args: " + json.dumps(["-c", code, *extra])


CRASH = args("import sys; sys.stderr.write('Error: cannot find module foo\\nat line 3\\n'); sys.exit(7)")
JUNK = args(f"import os, sys, time; print('Welcome to junk v1 token={TOKEN}'); print('key ' + os.environ['API_KEY']); "
            "sys.stdout.flush(); time.sleep(3600)") + f", env: {{API_KEY: {ENV_SECRET}}}"


def gated(flag) -> str:
    return args("import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
                "os.execv(sys.executable, [sys.executable, '-m', 'hopline.demo'])", str(flag))


def test_start_failures_say_why_in_serves_log(tmp_path, hopline_serve_eager):
    flag = tmp_path / "go"
    config = gateway_yaml(tmp_path, {"crash": CRASH, "junk": JUNK, "gated": gated(flag)}, "routing: {startup_timeout: 5}\n")
    proc = hopline_serve_eager(str(config), "--admin-port", "0")
    admin = proc.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    limit = "did not start within 5 s (routing.startup_timeout; cold npx servers often need more)"
    assert backend_lines(proc, 3) == [
        "hopline serve: backend crash: unavailable: backend exited with status 7; its stderr ended: "
        "'Error: cannot find module foo' / 'at line 3'",
        f"hopline serve: backend gated: unavailable: {limit}",
        f"hopline serve: backend junk: unavailable: {limit}; it wrote to stdout what is not JSON-RPC: "
        "'Welcome to junk v1 token=<redacted>'",
    ]
    status = httpx.get(f"{admin}/status", timeout=10).json()  # the admin view says the same (item 12): not grey "idle"
    by_id = {b["id"]: b for b in status["backends"]}
    assert {b: by_id[b]["state"] for b in by_id} == {"crash": "down", "junk": "down", "gated": "down"}
    assert by_id["junk"]["last_error"]["message"] == (
        f"backend junk unavailable: {limit}; it wrote to stdout what is not JSON-RPC: 'Welcome to junk v1 token=<redacted>'")
    assert (status["ready"], status["degraded"]) == (True, ["crash", "gated", "junk"])  # none of them is required
    flag.write_text("go")
    late = proc.wait_line(r"^hopline serve: backend gated: up .*$").group(0)
    assert late.startswith("hopline serve: backend gated: up (4 tools), ")
    assert late.endswith(" s after its start (routing.startup_timeout is 5 s)")
    log = "".join(proc.stderr)
    assert "WARNING hopline.stdio: junk: dropped a frame that is not JSON-RPC (" in log
    assert "): 'key <redacted>'\n" in log  # the backend's own env value, quoted redacted
    assert TOKEN not in log and ENV_SECRET not in log



# -- item 12: the admin page, /status and /readyz say one thing about failed and starting backends ----

from tests.observability.test_admin_page import browser, row  # noqa: E402,F401 (a fixture, and a selector)


async def test_failed_and_starting_backends_show_alike_in_status_the_page_and_readyz(tmp_path, hopline_serve_eager, browser):  # noqa: F811
    import httpx
    from playwright.async_api import expect

    flag = tmp_path / "go"
    backends = {"demo": DEMO, "crash": CRASH, "gated": gated(flag) + ", required: true"}
    proc = hopline_serve_eager(str(gateway_yaml(tmp_path, backends, "routing: {startup_timeout: 30}\n")), "--admin-port", "0")
    admin = proc.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    assert backend_lines(proc, 2) == [
        "hopline serve: backend crash: unavailable: backend exited with status 7; its stderr ended: "
        "'Error: cannot find module foo' / 'at line 3'",
        "hopline serve: backend demo: up (4 tools)",
    ]
    async with httpx.AsyncClient(timeout=10) as http:
        s = (await http.get(f"{admin}/status")).json()
        by_id = {b["id"]: b for b in s["backends"]}
        assert {b: by_id[b]["state"] for b in by_id} == {"demo": "up", "crash": "down", "gated": "starting"}
        assert by_id["crash"]["last_error"]["message"].endswith(
            "backend exited with status 7; its stderr ended: 'Error: cannot find module foo' / 'at line 3'")
        assert (s["ready"], s["not_ready"], s["degraded"]) == (False, ["gated"], ["crash", "gated"])
        r = await http.get(f"{admin}/readyz")
        assert (r.status_code, r.text) == (503, "not ready\n")  # gated is required and still starting

        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await page.goto(f"{admin}/")
        await expect(page.locator(row("crash", "down"))).to_contain_text("exited with status 7")
        await expect(page.locator(row("gated", "starting"))).to_be_visible()
        await expect(page.locator("#updated")).to_contain_text("not ready: gated (/readyz 503)")
        assert await page.locator("#updated").get_attribute("class") == "readiness bad"

        flag.write_text("go")
        proc.wait_line(r"^hopline serve: backend gated: up ")
        r = await http.get(f"{admin}/readyz")
        assert (r.status_code, r.text) == (200, "ready\n")  # crash is down but not required
        await expect(page.locator(row("gated", "up"))).to_be_visible(timeout=10_000)  # the page's own refresh
        await expect(page.locator("#updated")).to_contain_text("degraded: crash (/readyz 200: none is required)")
        assert await page.locator("#updated").get_attribute("class") == "readiness warn"
        await expect(page.locator(row("crash", "down"))).to_be_visible()
