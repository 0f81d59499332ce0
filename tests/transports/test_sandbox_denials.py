"""What a sandboxed child was denied is reported (issue 35 item 3): a child that ends on a limit of its
profile (CPU time, memory) is named in /status with the denial, and hopline goes on serving it."""

from __future__ import annotations

import httpx
import pytest
import yaml

from tests.conftest import PY, SERVERS, start
from tests.peers import bounded, client, text_of


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    path = tmp_path_factory.mktemp("denials") / "gateway.yaml"
    hostile = [str(SERVERS / "hostile.py")]
    sandbox = {"profile": "network-off", "cpu_seconds": 1, "memory": 256}
    path.write_text(yaml.safe_dump({"backends": {"limited": {"command": PY, "args": hostile, "sandbox": sandbox}}}))
    proc = start([PY, "-m", "hopline", "serve", str(path), "--port", "0", "--admin-port", "0"])
    try:
        url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)", timeout=60).group(1)
        admin = int(proc.wait_line(r"admin endpoint at http://[^:]+:(\d+)/").group(1))
        assert proc.wait_line(r"backend limited: (.*)", timeout=60).group(1).startswith("up")
        yield {"proc": proc, "url": url, "admin": admin}
    finally:
        proc.stop()


async def denials(gateway) -> list[dict]:
    async with httpx.AsyncClient(timeout=20) as http:
        status = (await http.get(f"http://127.0.0.1:{gateway['admin']}/status")).json()
    return next(b for b in status["backends"] if b["id"] == "limited")["sandbox"]["denials"]


async def attempt(gateway, tool: str, **args):
    async with client(gateway["url"], "legacy") as c:
        return await bounded(c.call_tool(f"limited__{tool}", args))


async def denied(gateway, what: str) -> dict:
    """The denial ``what`` as /status keeps it, once the gateway has logged it (kept, then logged)."""
    gateway["proc"].wait_line(rf"backend limited: child \d+ ended: {what}")
    found = [d for d in await denials(gateway) if d["denial"].startswith(what)]
    assert found, await denials(gateway)
    return found[-1]


async def test_a_child_past_its_cpu_time_is_reported_and_the_backend_serves_again(gateway):
    with pytest.raises(Exception):  # the child is killed mid-call: the call fails, it is not answered
        await attempt(gateway, "spin", seconds=30)
    found = await denied(gateway, "CPU time limit reached")
    assert found["status"] in (-24, 152)  # SIGXCPU, as the process or as bwrap reports it
    assert text_of(await attempt(gateway, "whoami")).startswith("OK")  # a new child serves
    async with httpx.AsyncClient(timeout=20) as http:
        page = (await http.get(f"http://127.0.0.1:{gateway['admin']}/")).text
    assert "sandbox network-off · 1 denied (CPU time limit reached (cpu_seconds))" in page


async def test_a_child_that_dies_of_its_memory_limit_is_reported(gateway):
    with pytest.raises(Exception):
        await attempt(gateway, "die_allocating", mib=1024)
    found = await denied(gateway, "memory limit reached")
    assert found["status"] == 1 and "MemoryError" in found["said"]
