"""Stdio backends under a permission profile, through ``hopline serve`` with the official SDK client (issue 35).

One gateway serves five backends: ``hostile`` (tests/servers/hostile.py, confined: network-off,
one writable directory, 64 processes, 1 GiB), ``open`` (the same server unconfined: the control
that shows each attempt succeeds without the sandbox), and the real npm servers
server-everything, server-filesystem and server-memory (its file in the private home) (tests/node), each in a
profile. Every attempt of the
hostile server is refused inside the sandbox, succeeds outside it where that is safe to let
happen (not the kill, not the 4 GiB), and the gateway and the other backends keep serving.
"""

from __future__ import annotations

import os
import socket

import psutil
import pytest
import yaml

from tests.conftest import PY, ROOT, SERVERS, start
from tests.peers import bounded, client, text_of

MODULES = ROOT / "tests" / "node" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = MODULES / "server-everything" / "dist" / "index.js"
FILESYSTEM = MODULES / "server-filesystem" / "dist" / "index.js"
MEMORY = MODULES / "server-memory" / "dist" / "index.js"
MEMORY_FILE = "/tmp/hopline-sandbox-test-memory.jsonl"  # in the sandbox's private home, never on the host
SECRET = "planted-secret-7c1f"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sandbox")
    home, cfg_dir, allowed, shared, outside = (tmp / n for n in ("home", "cfg", "allowed", "shared", "outside"))
    for d in (home, cfg_dir, allowed, shared, outside):
        d.mkdir()
    (home / ".secret").write_text(SECRET)
    (shared / "hello.txt").write_text("hello from the allowed directory\n")
    if os.geteuid() == 0:  # the sandbox's uid (nobody) must own what it may write
        for d in (allowed, shared):
            os.chown(d, 65534, 65534)
            for f in d.iterdir():
                os.chown(f, 65534, 65534)
    hostile = [str(SERVERS / "hostile.py")]
    config = {
        "backends": {
            "hostile": {
                "command": PY,
                "args": hostile,
                "sandbox": {"profile": "network-off", "read_write": [str(allowed)], "processes": 64, "memory": 1024},
            },
            "open": {"command": PY, "args": hostile},
            "everything": {"command": "node", "args": [str(EVERYTHING), "stdio"], "sandbox": "network-off"},
            "files": {
                "command": "node",
                "args": [str(FILESYSTEM), str(shared)],
                "sandbox": {"profile": "network-off", "read_write": [str(shared)]},
            },
            "memory": {
                "command": "node",
                "args": [str(MEMORY)],
                "env": {"MEMORY_FILE_PATH": MEMORY_FILE},
                "sandbox": "network-off",
            },
        }
    }
    path = cfg_dir / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    listener = socket.create_server(("127.0.0.1", 0))  # a service on hopline's loopback
    proc = start([PY, "-m", "hopline", "serve", str(path), "--port", "0", "--admin-port", "0"], env={"HOME": str(home)})
    try:
        proc.url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)", timeout=60).group(1)
        admin = proc.wait_line(r"admin endpoint at http://[^:]+:(\d+)/")
        reports = dict(proc.wait_line(r"backend (\w+): (.*)", timeout=60).groups() for _ in range(5))
        assert all(r.startswith("up") for r in reports.values()), reports
        yield {
            "proc": proc,
            "url": proc.url,
            "config": path,
            "home": home,
            "allowed": allowed,
            "shared": shared,
            "outside": outside,
            "listener": listener.getsockname()[1],
            "admin": int(admin.group(1)),
        }
    finally:
        children = proc.descendants()
        proc.stop()
        listener.close()
        _, alive = psutil.wait_procs(children, timeout=5)
        for p in alive:
            p.kill()
        assert not alive, f"hopline left children behind: {alive}"


async def attempt(world, tool: str, *, confined: bool = True, **args) -> str:
    """Call ``tool`` on the confined or the open hostile backend, then check that the gateway
    and server-everything still serve."""
    async with client(world["url"], "legacy") as c:
        text = text_of(await bounded(c.call_tool(f"{'hostile' if confined else 'open'}__{tool}", args)))
        echo = await bounded(c.call_tool("everything__echo", {"message": "still here"}))
        assert "still here" in text_of(echo)
    assert world["proc"].popen.poll() is None
    return text


def expect(confined: str, control: str | None) -> None:
    """Refused in the sandbox; done by the same server unconfined (the control), where one is given."""
    assert confined.startswith("DENIED"), confined
    if control is not None:
        assert control.startswith("OK"), control


async def test_the_hostile_server_runs_as_nobody_in_its_own_pid_namespace(world):
    text = await attempt(world, "whoami")
    assert text.startswith("OK: uid 65534 pid ") and int(text.split()[4]) < 10, text


async def test_etc_shadow_is_not_there(world):
    path = "/etc/shadow"
    expect(await attempt(world, "read", path=path), await attempt(world, "read", confined=False, path=path))


async def test_hoplines_config_file_is_not_there(world):
    path = str(world["config"])
    confined = await attempt(world, "read", path=path)
    expect(confined, await attempt(world, "read", confined=False, path=path))
    assert "No such file" in confined


async def test_a_secret_in_hoplines_home_is_not_there(world):
    path = str(world["home"] / ".secret")
    confined = await attempt(world, "read", path=path)
    control = await attempt(world, "read", confined=False, path=path)
    expect(confined, control)
    assert SECRET in control and SECRET not in confined


async def test_writing_outside_the_allowed_path_fails_and_inside_works(world):
    path = str(world["outside"] / "planted.txt")
    expect(await attempt(world, "write", path=path), None)
    assert not os.path.exists(path)
    assert (await attempt(world, "write", confined=False, path=path)).startswith("OK")
    inside = world["allowed"] / "mine.txt"
    assert (await attempt(world, "write", path=str(inside))).startswith("OK")
    assert inside.read_text() == "written by a hostile server\n"


async def test_a_listener_on_hoplines_loopback_cannot_be_reached(world):
    port = world["listener"]
    control = await attempt(world, "connect", confined=False, host="127.0.0.1", port=port)
    expect(await attempt(world, "connect", host="127.0.0.1", port=port), control)


async def test_the_admin_port_cannot_be_reached(world):
    port = world["admin"]
    control = await attempt(world, "connect", confined=False, host="127.0.0.1", port=port)
    expect(await attempt(world, "connect", host="127.0.0.1", port=port), control)


async def test_a_fork_bomb_stops_at_the_process_limit(world):
    confined = await attempt(world, "fork_bomb", limit=200)
    control = await attempt(world, "fork_bomb", confined=False, limit=200)
    expect(confined, control)
    assert "Resource temporarily unavailable" in confined and int(confined.split()[-2]) < 64, confined


async def test_allocating_4_gib_fails(world):
    expect(await attempt(world, "allocate", mib=4096), None)


async def test_hopline_cannot_be_killed_from_the_sandbox(world):
    pid = world["proc"].popen.pid
    expect(await attempt(world, "kill", pid=pid), None)  # attempt() checks hopline is alive after
    assert psutil.pid_exists(pid)


async def test_hoplines_environment_cannot_be_read_through_proc(world):
    pid = world["proc"].popen.pid
    expect(await attempt(world, "environ", pid=pid), await attempt(world, "environ", confined=False, pid=pid))


async def test_server_filesystem_works_on_its_allowed_directory_and_nowhere_else(world):
    shared = world["shared"]
    async with client(world["url"], "legacy") as c:
        read = await bounded(c.call_tool("files__read_text_file", {"path": str(shared / "hello.txt")}))
        assert "hello from the allowed directory" in text_of(read)
        await bounded(c.call_tool("files__write_file", {"path": str(shared / "new.txt"), "content": "made inside"}))
        denied = await bounded(c.call_tool("files__read_text_file", {"path": str(world["config"])}))
        assert denied.is_error
    assert (shared / "new.txt").read_text() == "made inside"


async def test_server_memory_keeps_its_file_in_the_private_home(world):
    assert not os.path.exists(MEMORY_FILE)
    entity = {"name": "sandbox-test", "entityType": "test", "observations": ["kept inside"]}
    async with client(world["url"], "legacy") as c:
        await bounded(c.call_tool("memory__create_entities", {"entities": [entity]}))
        graph = text_of(await bounded(c.call_tool("memory__read_graph", {})))
    assert "sandbox-test" in graph and "kept inside" in graph
    assert not os.path.exists(MEMORY_FILE)  # written to the sandbox's own /tmp, not the host's


async def test_server_everything_works_in_its_profile(world):
    async with client(world["url"], "legacy") as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert {"everything__echo", "files__read_text_file", "hostile__read"} <= names
        total = await bounded(c.call_tool("everything__get-sum", {"a": 2, "b": 3}))
        assert "5" in text_of(total)


async def test_status_and_the_admin_page_show_each_backends_profile(world):
    import httpx

    base = f"http://127.0.0.1:{world['admin']}"
    async with httpx.AsyncClient(timeout=20) as http:
        status = (await http.get(f"{base}/status")).json()
        page = (await http.get(f"{base}/")).text
    sandbox = {b["id"]: b["sandbox"] for b in status["backends"]}
    assert sandbox["open"] == {"profile": "none"}
    hostile = sandbox["hostile"]
    assert (hostile["profile"], hostile["launcher"], hostile["network"]) == ("network-off", "bubblewrap", "none")
    assert (hostile["memory_mib"], hostile["processes"], hostile["uid"]) == (1024, 64, 65534)
    assert hostile["read_write"] == [str(world["allowed"])] and "problem" not in hostile
    assert "sandbox network-off" in page
