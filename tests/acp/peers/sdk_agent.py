"""An echo agent built on the official Python SDK (agent-client-protocol 0.12.x).

Prompt text drives it (the first word, then arguments):
- ``updates N text``: N agent_message_chunk updates "echo i: text", then end_turn;
- ``permission``: asks the client for permission and echoes the chosen option;
- ``wait``: waits until ``session/cancel`` for this session, then ``cancelled``;
- ``crash``: exits with status 3 mid-request;
- anything else: one chunk "echo: TEXT", then end_turn.
``_example/ping`` extension requests are answered with their params.
``loadSession`` is supported (sessions survive only in this process); a load
replays one ``history: SESSION`` chunk before it answers, as agents replay history.
``session/close`` is supported (advertised in ``sessionCapabilities.close``).

Options: ``--log FILE`` appends one JSON line per initialize, session/new|load|close
and prompt it handles (``{"method", "sessionId", "params"}``); ``--exit-if-exists
FILE`` exits with status 9 at start-up while FILE exists (an agent that cannot be
restarted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from typing import Any

import acp
from acp import InitializeResponse, NewSessionResponse, PromptResponse, update_agent_message_text
from acp.schema import AgentCapabilities, CloseSessionResponse, Implementation, LoadSessionResponse, PermissionOption, SessionCapabilities, SessionCloseCapabilities, ToolCallUpdate


class EchoAgent:
    def __init__(self, log: str = "") -> None:
        self.conn: Any = None
        self.cancelled: dict[str, asyncio.Event] = {}
        self.log = open(log, "a") if log else None

    def record(self, method: str, session_id: str | None = None, params: Any = None) -> None:
        if self.log:
            self.log.write(json.dumps({"method": method, "sessionId": session_id, "params": params}) + "\n")
            self.log.flush()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities=None, client_info=None, **kwargs: Any) -> InitializeResponse:
        self.record("initialize", None, {"protocolVersion": protocol_version, "clientInfo": client_info.name if client_info else None})
        return InitializeResponse(
            protocol_version=protocol_version,
            agent_capabilities=AgentCapabilities(load_session=True, session_capabilities=SessionCapabilities(close=SessionCloseCapabilities())),
            agent_info=Implementation(name="sdk-echo-agent", version="1.0"),
        )

    async def new_session(self, cwd: str, mcp_servers=None, **kwargs: Any) -> NewSessionResponse:
        sid = f"sess-{uuid.uuid4().hex[:8]}"
        self.cancelled[sid] = asyncio.Event()
        self.record("session/new", sid, {"cwd": cwd})
        return NewSessionResponse(session_id=sid)

    async def load_session(self, cwd: str, session_id: str, mcp_servers=None, **kwargs: Any) -> LoadSessionResponse:
        self.record("session/load", session_id, {"cwd": cwd})
        self.cancelled.setdefault(session_id, asyncio.Event())
        await self.conn.session_update(session_id=session_id, update=update_agent_message_text(f"history: {session_id}"))
        return LoadSessionResponse()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        self.record("session/close", session_id)
        self.cancelled.pop(session_id, None)
        return CloseSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, session_id: str, prompt: list, **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(b, "text", "") for b in prompt)
        self.record("session/prompt", session_id, {"text": text})
        word, _, rest = text.partition(" ")
        if word == "crash":
            os._exit(3)
        if word == "wait":
            await self.cancelled.setdefault(session_id, asyncio.Event()).wait()
            return PromptResponse(stop_reason="cancelled")
        if word == "permission":
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="call-1", title="write a file"),
                options=[PermissionOption(option_id="yes", name="Allow", kind="allow_once"), PermissionOption(option_id="no", name="Deny", kind="reject_once")],
            )
            outcome = answer.outcome
            chosen = getattr(outcome, "option_id", None) or getattr(outcome, "outcome", "?")
            await self.conn.session_update(session_id=session_id, update=update_agent_message_text(f"permission: {chosen}"))
            return PromptResponse(stop_reason="end_turn")
        if word == "updates":
            count, _, body = rest.partition(" ")
            for i in range(int(count)):
                await self.conn.session_update(session_id=session_id, update=update_agent_message_text(f"echo {i}: {body}"))
            return PromptResponse(stop_reason="end_turn")
        await self.conn.session_update(session_id=session_id, update=update_agent_message_text(f"echo: {text}"))
        return PromptResponse(stop_reason="end_turn")

    async def ext_method(self, method: str, params: dict) -> dict:
        return {"method": method, "echo": params}

    async def ext_notification(self, method: str, params: dict) -> None:
        return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", default="")
    parser.add_argument("--exit-if-exists", default="")
    args = parser.parse_args()
    if args.exit_if_exists and os.path.exists(args.exit_if_exists):
        sys.exit(9)
    asyncio.run(acp.run_agent(EchoAgent(args.log), use_unstable_protocol=True))  # session/close is unstable
