"""Supervision (issue 4): a stdio backend that dies is reconnected with backoff, and the
client's resource subscriptions on it are re-established on the new backend session
(layers/session/links.py ``_resubscribe``). The fault server records every
``resources/subscribe`` it receives, so the renewal is seen at the backend itself."""

from __future__ import annotations

import asyncio

import yaml
from mcp import types

from tests.conftest import PY, SERVERS
from tests.peers import bounded, client


async def test_subscriptions_are_renewed_on_the_reconnected_backend(tmp_path, hopline_serve):
    events = tmp_path / "events.log"
    conf = {
        "backends": {"f": {"command": PY, "args": [str(SERVERS / "fault_server.py"), "--subscribe", "--events", str(events)]}},
        "routing": {"retry_after": 0.2},
        "resilience": {"breaker": {"enabled": False}},
    }
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    changed = asyncio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification) or getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with client(gw.url, "legacy", message_handler=on_message) as c:
        uri = "hopline://f/fault://watched"  # any URI of the backend routes (templates cannot be enumerated)
        await bounded(c.subscribe_resource(uri))
        subscribed = [line for line in events.read_text().splitlines() if line.startswith("subscribe ")]
        assert subscribed == ["subscribe fault://watched"]
        changed.clear()
        try:
            await bounded(c.call_tool("f__crash", {}))
        except Exception:
            pass  # the crash answers with an error; what matters is what follows
        await asyncio.wait_for(changed.wait(), 15)  # the backend went away (CHANGE-SIGNAL) …
        deadline = asyncio.get_running_loop().time() + 15
        while len(renewed := [line for line in events.read_text().splitlines() if line.startswith("subscribe ")]) < 2:
            assert asyncio.get_running_loop().time() < deadline, renewed  # … and once back, has the subscription again
            await asyncio.sleep(0.05)
        assert renewed == subscribed * 2  # renewed once, same URI
        assert (await bounded(c.call_tool("f__echo", {"text": "back"}))).content[0].text == "back"
        await bounded(c.unsubscribe_resource(uri))
    assert events.read_text().splitlines()[-1].startswith("unsubscribe ")
