"""A client's roots narrow what a shared backend may reach (issue 28, layers/session/sharing.py).

server-filesystem (npm, pinned in tests/node) started on a directory ``D`` asks its client for
roots after ``initialize`` and, given some, allows only those. A client that declares the root
``D/sub`` must be refused ``D/hello.txt`` through ``hopline serve`` exactly as directly: the
shared child's ``roots/list`` reaches the client it was started for (no call is in flight then).
When the request cannot be attributed, hopline answers with the roots every client of that
child declared (their intersection), never an error that leaves the server its wider reach.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from mcp import Client, StdioServerParameters, types

from tests.peers import bounded, text_of

FILESYSTEM = Path(__file__).resolve().parents[1] / "node" / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
NODE = shutil.which("node")
if NODE is None or not FILESYSTEM.exists():  # pragma: no cover - scripts/test installs it
    pytest.fail(f"server-filesystem is not installed at {FILESYSTEM}; run scripts/test (npm ci in tests/node)", pytrace=False)


def tree(tmp_path: Path) -> Path:
    d = (tmp_path / "D").resolve()
    (d / "sub").mkdir(parents=True)
    (d / "hello.txt").write_text("outside the root")
    (d / "sub" / "inner.txt").write_text("inside the root")
    return d


def roots_of(*dirs: Path):
    async def roots(context) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=d.as_uri(), name=d.name) for d in dirs])

    return roots


async def reach(c: Client, d: Path, prefix: str = "") -> tuple[str, bool, bool]:
    """What the server allows once it has the client's roots, and whether it reads each file."""
    allowed: list[str] = []

    async def narrowed() -> bool:
        allowed[:] = [text_of(await c.call_tool(f"{prefix}list_allowed_directories", {}))]
        return str(d / "sub") in allowed[0]

    for _ in range(200):  # the server asks for roots after initialize: its answer may land after our first call
        if await bounded(narrowed()):
            break
    outside = await bounded(c.call_tool(f"{prefix}read_text_file", {"path": str(d / "hello.txt")}))
    inside = await bounded(c.call_tool(f"{prefix}read_text_file", {"path": str(d / "sub" / "inner.txt")}))
    return allowed[0], not outside.is_error, not inside.is_error


async def test_a_clients_roots_narrow_the_filesystem_server_through_serve_as_directly(tmp_path, hopline_serve):
    d = tree(tmp_path)
    direct = Client(StdioServerParameters(command=NODE, args=[str(FILESYSTEM), str(d)]), mode="legacy", list_roots_callback=roots_of(d / "sub"))
    async with direct:
        want = await reach(direct, d)
    assert want == (f"Allowed directories:\n{d / 'sub'}", False, True)
    conf = tmp_path / "gw.yaml"
    conf.write_text(yaml.safe_dump({"backends": {"fs": {"command": NODE, "args": [str(FILESYSTEM), str(d)]}}}))
    gw = hopline_serve(str(conf))
    async with Client(gw.url, mode="legacy", list_roots_callback=roots_of(d / "sub")) as c:
        assert await reach(c, d, "fs__") == want


def test_roots_every_client_declared_are_the_intersection():
    from hopline.layers.session.sharing import intersect_roots

    def r(*uris: str) -> list[dict]:
        return [{"uri": u} for u in uris]

    assert intersect_roots([r("file:///d/sub")]) == r("file:///d/sub")
    assert intersect_roots([r("file:///d"), r("file:///d/sub")]) == r("file:///d/sub")  # the narrower of two nested
    assert intersect_roots([r("file:///d/sub", "file:///e"), r("file:///d")]) == r("file:///d/sub")
    assert intersect_roots([r("file:///d/sub"), r("file:///d/subway")]) == []  # a prefix is no parent
    assert intersect_roots([r("file:///d"), r("file:///e")]) == []
    assert intersect_roots([]) == []  # nobody to vouch for: nothing
