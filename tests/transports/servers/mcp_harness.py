"""Start and stop the test MCP server (mcp_http_server.py) as a subprocess.

``McpServerProcess`` picks a free port, waits until the port accepts connections
(polling, never a fixed sleep), and always kills and reaps the child.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_http_server.py")


from tests.peers import free_port, wait_port as wait_for_port  # noqa: E402  (one implementation for the suite)


class McpServerProcess:
    def __init__(self, *args: str, port: int | None = None) -> None:
        self.args = args
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"

    def start(self) -> McpServerProcess:
        self.proc = subprocess.Popen(
            [sys.executable, SERVER, str(self.port), *self.args], stdout=self.log, stderr=self.log
        )
        try:
            wait_for_port(self.port, self.proc)
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.kill()  # a test server has nothing to clean up; SIGTERM waits for open streams
        proc.wait(10)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def __enter__(self) -> McpServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.log.close()
