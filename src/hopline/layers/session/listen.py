"""``subscriptions/listen`` streams of 2026-07-28 clients (reference/mcp-wire.md §5).

A :class:`Listener` is one open listen stream: it carries only the change signals the
client asked for and the gateway agreed to, each tagged with the listen request's id
as ``_meta["io.modelcontextprotocol/subscriptionId"]``.
"""

from __future__ import annotations

from typing import Any

from hopline.jsonrpc import notification
from hopline.layers.session.client_end import ClientEnd

LISTEN_KEYS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


class Listener:
    """One open listen stream; every notification on it names the listen's id (reference §5)."""

    def __init__(self, end: ClientEnd, listen_id: Any, agreed: dict[str, bool]) -> None:
        self.end, self.listen_id = end, listen_id
        self.methods = {LISTEN_KEYS[key] for key in agreed}

    def send(self, method: str, params: dict[str, Any] | None = None) -> None:
        meta = {"io.modelcontextprotocol/subscriptionId": self.listen_id}
        self.end.notify(notification(method, {**(params or {}), "_meta": meta}))

    def changed(self, methods: tuple[str, ...]) -> None:
        for method in methods:
            if method in self.methods:
                self.send(method)
