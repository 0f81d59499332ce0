"""The SDK echo agent (sdk_agent.py) served over the network by the official Python SDK's own
server (agent-client-protocol 0.12.x ``acp.http.create_asgi_app``: the RFD's /acp endpoint,
Streamable HTTP and WebSocket) under uvicorn on 127.0.0.1, port 0.

Prints ``PORT <n>`` on stdout once it listens; stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import sys

import uvicorn
from acp.http.asgi import create_asgi_app

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdk_agent import EchoAgent  # noqa: E402


def factory(conn):
    agent = EchoAgent()
    agent.on_connect(conn)
    return agent


async def main() -> None:
    app = create_asgi_app(factory)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="websockets-sansio", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            raise SystemExit("uvicorn did not start")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main())
