"""Federation mode (draft §5.6): a gateway of gateways. Members are hoplines over
Streamable HTTP, driven by the official SDK client in both eras; a real SDK backend at
the bottom records what reaches it. Checked: names nest, the hop sequence arrives in
order with every hop's mode, members are listed in the declaration, and a loop of
intermediaries is refused at its first handshake or list fetch instead of recursing."""

from __future__ import annotations

import httpx
import orjson
import pytest
import yaml

from tests.conftest import PY
from tests.faults.tcp_proxy import FaultProxy
from tests.peers import MODES, bounded, client, text_of
from tests.servers import recorder_server

HOPS = "io.modelcontextprotocol/proxy-hops"
DEMO = {"command": PY, "args": ["-m", "hopline.demo"]}


def write(tmp_path, name: str, conf: dict) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **conf}))
    return str(path)


@pytest.mark.parametrize("era", MODES)
async def test_a_federation_of_gateways_nests_names_and_carries_every_hop(tmp_path, hopline_serve, recorded, era):
    url, record = recorded
    team = hopline_serve(write(tmp_path, "team-gw", {"backends": {"rec": {"url": url, "transport": "streamable-http"}}}))
    top = hopline_serve(write(tmp_path, "org-gw", {"mode": "federation", "backends": {"team": {"url": team.url, "transport": "streamable-http"}}}))
    async with client(top.url, era) as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert {"team__rec__echo", "team__rec__add"} <= names
        assert text_of(await bounded(c.call_tool("team__rec__echo", {"text": "down two levels"}))) == "down two levels"
    bodies = [orjson.loads(r["body"]) for r in recorder_server.recorded(record) if r["body"]]
    call = next(b for b in bodies if b.get("method") == "tools/call")
    path = call["params"]["_meta"][HOPS]
    assert [(h["name"], h["mode"]) for h in path] == [("org-gw", "federation"), ("team-gw", "forward")]  # in the order travelled
    assert all(h["instance"] and h["timestamp"].endswith("Z") for h in path)
    listing = next(b for b in bodies if b.get("method") == "tools/list")  # the team's fetch, on the org's behalf
    assert [h["name"] for h in listing["params"]["_meta"][HOPS]] == ["org-gw", "team-gw"]
    async with httpx.AsyncClient(timeout=10) as http:
        declared = (await http.get(top.base + "/.well-known/agent-tool-proxy")).json()
    assert declared["modes"] == ["federation"]
    member = declared["federation"]["members"]["team"]
    assert member["declared"] and member["name"] == "hopline" and member["modes"] == ["forward"] and member["tier"] == 2


@pytest.mark.parametrize("era", MODES)
async def test_a_loop_of_intermediaries_is_refused_not_followed(tmp_path, hopline_serve, era):
    # Each member's peer is the other: one reaches two through a loopback link pointed at two
    # once two is up, so both bind port 0 and no port is picked for a member to bind later.
    link = await FaultProxy.start(0)

    def member(name: str, peer_url: str) -> str:
        conf = {"mode": "federation", "backends": {"demo": DEMO, "peer": {"url": peer_url, "transport": "streamable-http"}}}
        return write(tmp_path, name, conf)

    try:
        one = hopline_serve(member("one", link.url("/mcp")))
        two = hopline_serve(member("two", one.url))
        link.target = ("127.0.0.1", httpx.URL(two.url).port)
        async with client(one.url, era) as c:
            names = {t.name for t in (await bounded(c.list_tools())).tools}
            assert {"demo__echo", "peer__demo__echo"} <= names  # each member's own tools, once
            assert not any(n.startswith("peer__peer__") for n in names)  # and never itself again
            assert text_of(await bounded(c.call_tool("peer__demo__echo", {"text": "one hop"}))) == "one hop"
    finally:
        await link.aclose()
    # The member that would have led back was refused, and its gateway says why.
    two.wait_line(r"backend peer unavailable: backend peer: request loop: this request already passed through this hopline", timeout=10)
