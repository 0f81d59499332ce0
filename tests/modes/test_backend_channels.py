"""End to end through ``hopline serve`` and ``hopline relay`` with the official SDK client (issue 13):
a stdio backend that answers a call with invalid UTF-8 or malformed JSON fails that call with
-31003 at once (the request timeout is the default 300 s; the test allows 20 s), the next call on
the same session works, and the backend starts with a clean environment."""

from __future__ import annotations

import json

import pytest
import yaml
from mcp import MCPError

from tests.conftest import PY, SERVERS
from tests.peers import MODES, bounded, client, text_of

CHANNEL = [PY, str(SERVERS / "channel_server.py")]
HOPLINE_ENV = {"SECRET_OF_ANOTHER_BACKEND": "s3cret-value", "KEEP_ME": "kept"}


def gateway_config(tmp_path) -> str:
    backend = {"command": CHANNEL[0], "args": CHANNEL[1:], "env": {"OWN_SETTING": "own"}, "inherit_env": ["KEEP_*"]}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump({"backends": {"ch": backend}}))
    return str(path)


async def check(c, prefix: str) -> None:
    for tool in ("bad_utf8", "bad_json"):
        with pytest.raises(MCPError) as info:
            await bounded(c.call_tool(prefix + tool, {}))
        assert info.value.error.code == -31003
        assert "backend sent invalid UTF-8 / malformed JSON in its answer to this request" in info.value.error.message
        assert text_of(await bounded(c.call_tool(prefix + "echo", {"text": "still here"}))) == "still here"
    seen = json.loads(text_of(await bounded(c.call_tool(prefix + "env", {}))))
    assert "SECRET_OF_ANOTHER_BACKEND" not in seen["names"] and "PATH" in seen["names"]
    assert "KEEP_ME" in seen["names"] and seen["OWN_SETTING"] == "own"


@pytest.mark.parametrize("mode", MODES)
async def test_gateway_broken_answers_fail_fast_and_children_get_a_clean_environment(tmp_path, hopline_serve, mode):
    gw = hopline_serve(gateway_config(tmp_path), env=HOPLINE_ENV)
    async with client(gw.url, mode) as c:
        await check(c, "ch__")


@pytest.mark.parametrize("mode", MODES)
async def test_relay_broken_answers_fail_fast_and_children_get_a_clean_environment(hopline_relay, mode):
    relay = hopline_relay("--inherit-env", "KEEP_*", "-e", "OWN_SETTING=own", "--", *CHANNEL, env=HOPLINE_ENV)
    async with client(relay.url, mode) as c:
        await check(c, "")
