"""Conversion mode end to end: a real REST API behind ``hopline serve``, used by the SDK client.

One ``hopline serve`` (a real process) holds three backends:

- ``pets``: ``openapi: tests/servers/petstore.openapi.yaml``, its requests going to
  ``tests/servers/rest_api.py`` (uvicorn, a real process) with an ``Authorization``
  header from ``${PETS_TOKEN}`` and a 1.5 s timeout;
- ``down``: the same spec, fetched from the API's own URL, ``operations: [listPets]``,
  pointed at a closed port with a password in its ``base_url``;
- ``demo``: ``python -m hopline.demo``, an ordinary stdio MCP backend.

A policy rule hides ``deletePet``. The official MCP SDK client talks to the gateway in
both eras (legacy 2025-11-25 and 2026-07-28), with a token of its own that must never
reach the API.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from tests.conftest import PY, SERVERS, _launcher, _stop_all
from tests.peers import MODES, bounded, client, free_port, start_script, stop, text_of

SPEC = SERVERS / "petstore.openapi.yaml"
CLIENT_TOKEN = "client-secret-7d1f"
API_TOKEN = "api-secret-91ab"
pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rest") / "requests.jsonl"


@pytest.fixture(scope="module")
def api(record) -> Any:
    proc, port = start_script(str(SERVERS / "rest_api.py"), "--record", str(record))
    yield f"http://127.0.0.1:{port}"
    stop(proc)


@pytest.fixture(scope="module")
def gateway(api, tmp_path_factory) -> Any:
    conf = {
        "backends": {
            "pets": {"openapi": str(SPEC), "base_url": api, "headers": {"Authorization": "Bearer ${PETS_TOKEN}"}, "timeout": 1.5},
            "down": {"openapi": f"{api}/openapi.yaml", "base_url": f"http://user:hunter2@127.0.0.1:{free_port()}", "operations": ["listPets"]},
            "demo": {"command": PY, "args": ["-m", "hopline.demo"]},
        },
        "policy": {"rules": ['mcp.backend != "pets" || mcp.tool.name != "deletePet"']},
    }
    path = tmp_path_factory.mktemp("gw") / "gateway.yaml"
    path.write_text(yaml.safe_dump(conf))
    launch, started = _launcher("serve")
    try:
        yield launch(str(path), env={"PETS_TOKEN": API_TOKEN})
    finally:
        _stop_all(started)


def connect(gateway: Any, mode: str):
    http = create_mcp_http_client(headers={"authorization": f"Bearer {CLIENT_TOKEN}"})
    return client(streamable_http_client(gateway.url, http_client=http), mode), http


async def call(gateway: Any, mode: str, name: str, arguments: dict[str, Any]) -> Any:
    c, http = connect(gateway, mode)
    async with http, c:
        return await bounded(c.call_tool(name, arguments))


@pytest.mark.req("DUAL-HANDSHAKE")
@pytest.mark.parametrize("mode", MODES)
async def test_converted_operations_are_listed_as_tools_beside_the_mcp_backend(gateway, mode):
    c, http = connect(gateway, mode)
    async with http, c:
        tools = {t.name: t for t in (await bounded(c.list_tools())).tools}
    pets = sorted(n for n in tools if n.startswith("pets__"))
    assert pets == sorted(f"pets__{n}" for n in ("listPets", "createPet", "getPet", "updatePet", "getPetNotes", "brokenEndpoint",
                                                  "garbageEndpoint", "slowEndpoint", "bigEndpoint", "echoPath"))
    assert "demo__echo" in tools and "down__listPets" in tools and "down__getPet" not in tools
    get_pet = tools["pets__getPet"]
    assert get_pet.input_schema["properties"]["petId"]["type"] == "integer" and get_pet.input_schema["required"] == ["petId"]
    assert get_pet.annotations.read_only_hint is True
    update = tools["pets__updatePet"]
    assert update.annotations.idempotent_hint is True and update.annotations.read_only_hint is False
    assert set(update.input_schema["properties"]) == {"petId", "name", "tag", "category"}
    assert update.input_schema["properties"]["category"]["properties"]["parent"]["description"].startswith("recursive: Category")
    assert "Every pet" in tools["pets__listPets"].description


@pytest.mark.parametrize("mode", MODES)
async def test_calls_become_http_requests_and_json_comes_back_structured(gateway, mode):
    c, http = connect(gateway, mode)
    async with http, c:
        created = await bounded(c.call_tool("pets__createPet", {"name": f"Nemo-{mode}", "tag": "fish"}))
        assert not created.is_error and created.structured_content["name"] == f"Nemo-{mode}"
        pet_id = created.structured_content["id"]
        got = await bounded(c.call_tool("pets__getPet", {"petId": pet_id}))
        assert got.structured_content == {"id": pet_id, "name": f"Nemo-{mode}", "tag": "fish"}
        listed = await bounded(c.call_tool("pets__listPets", {"tag": "fish", "limit": 50}))
        assert [p["name"] for p in listed.structured_content["result"]] and all(p["tag"] == "fish" for p in listed.structured_content["result"])
        notes = await bounded(c.call_tool("pets__getPetNotes", {"petId": 2}))
        assert not notes.is_error and text_of(notes) == "Tom is a good cat." and notes.structured_content is None
        echoed = await bounded(c.call_tool("pets__echoPath", {"value": "a/b c?", "ids": [1, 2]}))
        assert echoed.structured_content == {"path": "/echo/a%2Fb%20c%3F", "query": "ids=1&ids=2"}
        demo = await bounded(c.call_tool("demo__echo", {"text": "still here"}))
        assert text_of(demo) == "still here"


@pytest.mark.req("POLICY-LIST-CALL")
@pytest.mark.parametrize("mode", MODES)
async def test_policy_hides_a_converted_tool_from_list_and_call(gateway, record, mode):
    c, http = connect(gateway, mode)
    async with http, c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "pets__deletePet" not in names
        with pytest.raises(MCPError):
            await bounded(c.call_tool("pets__deletePet", {"petId": 1}))
    assert not [r for r in _recorded(record) if r["method"] == "DELETE"]


@pytest.mark.parametrize("mode", MODES)
async def test_api_failures_come_back_as_tool_errors(gateway, mode):
    c, http = connect(gateway, mode)
    async with http, c:
        broken = await bounded(c.call_tool("pets__brokenEndpoint", {}))
        assert broken.is_error and "HTTP 500" in text_of(broken) and "database on fire" in text_of(broken)
        garbage = await bounded(c.call_tool("pets__garbageEndpoint", {}))
        assert garbage.is_error and "not valid JSON" in text_of(garbage)
        missing = await bounded(c.call_tool("pets__getPet", {"petId": 999}))
        assert missing.is_error and "HTTP 404" in text_of(missing)
        big = await bounded(c.call_tool("pets__bigEndpoint", {}))
        assert big.is_error and "larger than" in text_of(big)


@pytest.mark.parametrize("mode", MODES)
async def test_bad_arguments_are_tool_errors_that_say_what_is_wrong(gateway, record, mode):
    before = len(_recorded(record))
    c, http = connect(gateway, mode)
    async with http, c:
        none = await bounded(c.call_tool("pets__getPet", {}))
        assert none.is_error and "missing required argument: petId" in text_of(none)
        wrong = await bounded(c.call_tool("pets__getPet", {"petId": "seven"}))
        assert wrong.is_error and "petId must be integer" in text_of(wrong)
        extra = await bounded(c.call_tool("pets__createPet", {"name": "x", "colour": "red"}))
        assert extra.is_error and "unknown argument: colour" in text_of(extra)
    assert len(_recorded(record)) == before  # none of them reached the API


@pytest.mark.parametrize("mode", MODES)
async def test_a_hanging_endpoint_times_out_with_an_error(gateway, mode):
    started = time.monotonic()
    c, http = connect(gateway, mode)
    async with http, c:
        try:
            slow = await bounded(c.call_tool("pets__slowEndpoint", {}), 10)
        except MCPError as exc:  # the gateway's own deadline may win the race; still an error
            assert "time" in str(exc).lower()
        else:
            assert slow.is_error and "did not answer" in text_of(slow)
        assert time.monotonic() - started < 8
        assert text_of(await bounded(c.call_tool("demo__echo", {"text": "alive"}))) == "alive"


@pytest.mark.parametrize("mode", MODES)
async def test_an_unreachable_api_is_named_by_backend_never_by_url(gateway, mode):
    down = await call(gateway, mode, "down__listPets", {})
    assert down.is_error and "backend down" in text_of(down) and "ConnectError" in text_of(down)
    assert "hunter2" not in text_of(down) and "127.0.0.1" not in text_of(down)


async def test_configured_headers_reach_the_api_and_the_clients_token_never_does(gateway, record):
    for mode in MODES:
        await call(gateway, mode, "pets__listPets", {})
    seen = _recorded(record)
    assert seen
    for entry in seen:
        headers = {k.lower(): v for k, v in entry["headers"]}
        assert not any(CLIENT_TOKEN in v for _, v in entry["headers"])
        if entry["path"] == "/openapi.yaml":  # the `down` backend's spec: fetched without the API's headers
            assert "authorization" not in headers
            continue
        assert headers.get("authorization") == f"Bearer {API_TOKEN}", entry
        assert "mcp-session-id" not in headers and "mcp-protocol-version" not in headers


def _recorded(record: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
