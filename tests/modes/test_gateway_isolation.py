"""Client isolation in Forward mode (draft §10; reference/mcp-wire.md §9 "JSON-RPC ids",
"progressToken", "Cursors"), with raw HTTP so ids, tokens and streams are exactly ours.

- Several clients use the *same* JSON-RPC ids and the *same* progressToken values at
  the same time, against a per-client backend (``demo``, ``share: isolated``) and a backend every client
  shares (``shared``, ``stateless: true``: one backend connection, where raw ids would
  collide). hypothesis chooses the clients' eras, what each sends, the global order and
  the delays; every client must get exactly one answer per request, with its own
  payload and its id's JSON type, and only progress notifications for tokens it sent,
  with the values its own request produces.
- A cursor minted for one session is ``-32602`` in another.
- A backend whose ``tools/list`` hangs does not stall the other backends beyond the
  list timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import PY, SERVERS, _launcher, _stop_all
from tests.helpers import write_backends as write_config

DEMO = [PY, "-m", "hopline.demo"]
SLOW_LIST = [PY, str(SERVERS / "slow_list_server.py")]
ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}

# Every client uses these, in this order: the same ids and tokens collide across clients.
# 1 and "1" are different JSON-RPC ids (and tokens); the JSON type must come back unchanged.
IDS: list[int | str] = [1, "1", 2, "two", 0]
TOKENS: list[int | str] = [1, "1", "tok", 0, 2]


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory):
    """One gateway for the whole hypothesis run (the function-scoped ``hopline_serve``
    would start one per example); stopped and checked for leftovers like the fixture."""
    launch, started = _launcher("serve")
    path = write_config(tmp_path_factory.mktemp("isolation"), {"demo": (DEMO, {"share": "isolated"}), "shared": (DEMO, {"stateless": True})})
    try:
        yield launch(path)
    finally:
        _stop_all(started)


# -- raw HTTP ----------------------------------------------------------------------------------
def sse_messages(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") if line.startswith("data:") else None for line in event.split("\n")]
        payload = "\n".join(d for d in data if d is not None)
        if payload:
            out.append(orjson.loads(payload))
    return out


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        return sse_messages(response.text)
    if kind.startswith("application/json"):
        body = response.json()
        return body if isinstance(body, list) else [body]
    return []


@dataclass
class RawClient:
    """One client: a legacy session (initialize, GET stream, DELETE) or 2026-07-28 requests."""

    http: httpx.AsyncClient
    url: str
    era: str
    sid: str | None = None
    received: list[dict[str, Any]] = field(default_factory=list)  # every message on every stream of this client
    on_get: list[dict[str, Any]] = field(default_factory=list)
    _listener: asyncio.Task | None = None

    def headers(self, **extra: str) -> dict[str, str]:
        h = {"content-type": "application/json", "accept": ACCEPT, **extra}
        if self.sid:
            h["mcp-session-id"] = self.sid
        if self.era == MODERN:
            h["mcp-protocol-version"] = MODERN
        return h

    async def open(self) -> None:
        if self.era == MODERN:
            return
        init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "isolation", "version": "1"}}}
        r = await self.http.post(self.url, content=orjson.dumps(init), headers=self.headers())
        assert r.status_code == 200, r.text
        self.sid = r.headers["mcp-session-id"]
        r = await self.http.post(self.url, content=orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers=self.headers())
        assert r.status_code == 202
        ready = asyncio.Event()
        self._listener = asyncio.create_task(self._listen(ready))
        await asyncio.wait_for(ready.wait(), 5)

    async def _listen(self, ready: asyncio.Event) -> None:
        """The session's GET stream: anything that lands here counts as received too."""
        async with self.http.stream("GET", self.url, headers={"accept": "text/event-stream", "mcp-session-id": self.sid or ""}) as r:
            assert r.status_code == 200
            ready.set()
            buffer = ""
            async for chunk in r.aiter_text():
                buffer += chunk.replace("\r\n", "\n")
                while "\n\n" in buffer:
                    event, buffer = buffer.split("\n\n", 1)
                    for m in sse_messages(event + "\n\n"):
                        self.on_get.append(m)
                        self.received.append(m)

    async def call(self, rid: int | str, name: str, arguments: dict[str, Any], token: int | str | None) -> list[dict[str, Any]]:
        meta: dict[str, Any] = dict(MODERN_META) if self.era == MODERN else {}
        if token is not None:
            meta["progressToken"] = token
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        extra = {"mcp-method": "tools/call", "mcp-name": name} if self.era == MODERN else {}
        r = await self.http.post(self.url, content=orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}), headers=self.headers(**extra))
        got = messages_of(r)
        assert r.status_code == 200, (r.status_code, r.text)
        self.received.extend(got)
        return got

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
        if self.sid:
            await self.http.delete(self.url, headers=self.headers())


# -- the hypothesis-driven interleaving ------------------------------------------------------------------
@dataclass(frozen=True)
class Op:
    backend: str  # "demo" (a backend session per client) or "shared" (one for everybody)
    kind: str  # "echo" or "countdown"
    steps: int
    delay_ms: int
    with_token: bool
    text: str


def ops_for(client: int) -> st.SearchStrategy[Op]:
    # Each client's countdowns have their own range of steps, so progress that leaked
    # from another client (whose token and id look the same) has the wrong total.
    return st.builds(
        Op,
        backend=st.sampled_from(["demo", "shared"]),
        kind=st.sampled_from(["echo", "countdown"]),
        steps=st.integers(1 + 4 * client, 3 + 4 * client),
        delay_ms=st.integers(0, 8),
        with_token=st.booleans(),
        text=st.text(max_size=12),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[str], list[list[Op]], list[tuple[int, int]], list[int]]:
    n = draw(st.integers(2, 3))
    eras = [draw(st.sampled_from(["legacy", "legacy", MODERN])) for _ in range(n)]
    plans = [draw(st.lists(ops_for(c), min_size=1, max_size=len(IDS))) for c in range(n)]
    order = draw(st.permutations([(c, j) for c, plan in enumerate(plans) for j in range(len(plan))]))
    gaps = draw(st.lists(st.integers(0, 12), min_size=len(order), max_size=len(order)))
    return eras, plans, list(order), gaps


def key(value: Any) -> tuple[str, Any]:
    """A JSON value with its JSON type: 1 and "1" are different ids and tokens."""
    return (type(value).__name__, value)


def payload(client: int, j: int, op: Op) -> str:
    return f"client{client}/req{j}/{op.text}"


async def run_scenario(url: str, eras: list[str], plans: list[list[Op]], order: list[tuple[int, int]], gaps: list[int]) -> None:
    async with httpx.AsyncClient(timeout=15) as http:
        clients = [RawClient(http, url, era) for era in eras]
        try:
            await asyncio.gather(*(c.open() for c in clients))
            tasks = []
            for (c, j), gap in zip(order, gaps):
                op = plans[c][j]
                args = {"text": payload(c, j, op)} if op.kind == "echo" else {"steps": op.steps, "delay_ms": op.delay_ms}
                token = TOKENS[j] if op.with_token else None
                tasks.append(asyncio.create_task(clients[c].call(IDS[j], f"{op.backend}__{op.kind}", args, token)))
                await asyncio.sleep(gap / 1000)
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
            await asyncio.sleep(0.05)  # a stray notification routed to a GET stream would land by now
        finally:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    for c, client in enumerate(clients):
        check_client(c, client, plans[c])


def check_client(c: int, client: RawClient, plan: list[Op]) -> None:
    answers: dict[tuple[str, Any], list[dict[str, Any]]] = defaultdict(list)
    progress: dict[tuple[str, Any], list[tuple[Any, Any]]] = defaultdict(list)
    for m in client.received:
        if "id" in m and "method" not in m:
            answers[key(m["id"])].append(m)
        elif m.get("method") == "notifications/progress":
            progress[key(m["params"].get("progressToken"))].append((m["params"].get("progress"), m["params"].get("total")))
    expected_ids = {key(IDS[j]) for j in range(len(plan))}
    assert set(answers) == expected_ids, f"client {c} got answers for ids {sorted(answers)}, sent {sorted(expected_ids)}"
    expected_progress: dict[tuple[str, Any], list[tuple[Any, Any]]] = {}
    for j, op in enumerate(plan):
        got = answers[key(IDS[j])]
        assert len(got) == 1, f"client {c} request {IDS[j]!r}: {len(got)} answers: {got}"
        assert "result" in got[0], f"client {c} request {IDS[j]!r}: {got[0]}"
        text = got[0]["result"]["content"][0]["text"]
        want = payload(c, j, op) if op.kind == "echo" else f"liftoff after {op.steps} steps"
        assert text == want, f"client {c} request {IDS[j]!r} ({op}): got {text!r}"
        if op.with_token and op.kind == "countdown":
            expected_progress[key(TOKENS[j])] = [(n, op.steps) for n in range(1, op.steps + 1)]
    assert dict(progress) == expected_progress, f"client {c}: progress by token {dict(progress)} != {expected_progress}"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_clients_with_the_same_ids_and_tokens_see_only_their_own_traffic(shared_gateway, scenario):
    eras, plans, order, gaps = scenario
    asyncio.run(run_scenario(shared_gateway.url, eras, plans, order, gaps))


# -- cursors ------------------------------------------------------------------------------------------
def post(http: httpx.AsyncClient, url: str, body: dict[str, Any], **headers: str):
    return http.post(url, content=orjson.dumps(body), headers={"content-type": "application/json", "accept": ACCEPT, **headers})


async def legacy_session(http: httpx.AsyncClient, url: str) -> str:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    r = await post(http, url, init)
    sid = r.headers["mcp-session-id"]
    assert (await post(http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **{"mcp-session-id": sid})).status_code == 202
    return sid


def tools_list(cursor: str | None = None, rid: int = 2, modern: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"cursor": cursor} if cursor is not None else {}
    if modern:
        params["_meta"] = MODERN_META
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": params}


def only(response: httpx.Response) -> dict[str, Any]:
    got = messages_of(response)
    assert len(got) == 1, got
    return got[0]


async def test_a_cursor_from_another_session_is_invalid_params(tmp_path, hopline_serve):
    """hopline pages its composed lists 500 items at a time: a 600-tool backend gives a
    real ``nextCursor``, bound (HMAC) to the session that received it."""
    gw = hopline_serve(write_config(tmp_path, {"big": (SLOW_LIST + ["--tools", "600"], {}), "demo": (DEMO, {})}))
    modern_headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    async with httpx.AsyncClient(timeout=15) as http:
        a, b = await legacy_session(http, gw.url), await legacy_session(http, gw.url)
        first = only(await post(http, gw.url, tools_list(), **{"mcp-session-id": a}))["result"]
        cursor = first.get("nextCursor")
        assert isinstance(cursor, str) and len(first["tools"]) < 604, "no nextCursor: the composed list fit on one page"

        stolen = only(await post(http, gw.url, tools_list(cursor, rid=3), **{"mcp-session-id": b}))
        assert stolen.get("error", {}).get("code") == -32602, stolen
        modern = only(await post(http, gw.url, tools_list(cursor, rid=4, modern=True), **modern_headers))
        assert modern.get("error", {}).get("code") == -32602, modern

        # The session it was minted for can use it: the rest of the catalogue, then the end.
        rest = only(await post(http, gw.url, tools_list(cursor, rid=5), **{"mcp-session-id": a}))["result"]
        assert "nextCursor" not in rest
        names = [t["name"] for t in first["tools"] + rest["tools"]]
        assert len(names) == len(set(names)) == 604
        assert {"big__echo", "big__t0599", "demo__echo", "demo__countdown"} <= set(names)

        # …and a cursor from a 2026-07-28 listing is no good in a legacy session either.
        page1 = only(await post(http, gw.url, tools_list(rid=6, modern=True), **modern_headers))["result"]
        assert isinstance(page1.get("nextCursor"), str)
        crossed = only(await post(http, gw.url, tools_list(page1["nextCursor"], rid=7), **{"mcp-session-id": b}))
        assert crossed.get("error", {}).get("code") == -32602, crossed
        for sid in (a, b):
            await http.delete(gw.url, headers={"mcp-session-id": sid})


# -- a backend that hangs on tools/list --------------------------------------------------------------
async def timed(coro: Any, limit: float) -> tuple[Any, float]:
    start = time.monotonic()
    value = await asyncio.wait_for(coro, limit)
    return value, time.monotonic() - start


async def check_not_stalled(url: str, bound: float) -> None:
    """tools/list and a call to the healthy backend, legacy and 2026-07-28, each within ``bound``."""
    modern_list = {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    modern_call = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "demo__echo"}
    echo = {"name": "demo__echo", "arguments": {"text": "still here"}}
    async with httpx.AsyncClient(timeout=bound + 5) as http:
        sid, took = await timed(legacy_session(http, url), bound)
        session = {"mcp-session-id": sid}
        for label, body, headers in (
            ("legacy tools/list", tools_list(), session),
            ("legacy tools/call demo__echo", {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": echo}, session),
            ("legacy tools/list again", tools_list(rid=4), session),
            ("2026-07-28 tools/list", tools_list(rid=5, modern=True), modern_list),
            ("2026-07-28 tools/call demo__echo", {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {**echo, "_meta": MODERN_META}}, modern_call),
        ):
            try:
                response, took = await timed(post(http, url, body, **headers), bound)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                pytest.fail(f"{label}: no answer within {bound} s while backend 'slow' hangs on tools/list")
            result = only(response).get("result")
            assert result is not None, (label, response.text)
            if "tools" in result:
                names = {t["name"] for t in result["tools"]}
                assert {"demo__echo", "demo__countdown"} <= names and not any(n.startswith("slow__") for n in names), (label, names)
            else:
                assert result["content"][0]["text"] == "still here", label
        await http.delete(url, headers=session)


async def test_a_hung_tools_list_stalls_nobody_beyond_the_backends_timeout(tmp_path, hopline_serve):
    """hopline has no separate list timeout: a backend's ``timeout`` bounds every request
    to it, tools/list included. With ``timeout: 1.5`` on the hung backend, lists and calls
    to the healthy backend answer within that plus a margin."""
    gw = hopline_serve(write_config(tmp_path, {"demo": (DEMO, {}), "slow": (SLOW_LIST + ["--hang-list"], {"timeout": 1.5})}))
    await check_not_stalled(gw.url, bound=4.0)


async def test_a_hung_tools_list_stalls_nobody_with_the_default_settings(tmp_path, hopline_serve):
    """The same without any timeout in the file. The healthy backend's tools must come back
    within a list timeout (a few seconds), not after ``listen.request_timeout`` (300 s)."""
    gw = hopline_serve(write_config(tmp_path, {"demo": (DEMO, {}), "slow": (SLOW_LIST + ["--hang-list"], {})}))
    await check_not_stalled(gw.url, bound=8.0)
