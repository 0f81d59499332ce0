"""Start and stop the test MCP server (mcp_http_server.py) as a subprocess.

``McpServerProcess`` starts it on port 0 and reads the port it bound from the line it prints
once it accepts connections (tests/servers/serving.py: no port is picked for it to bind later),
and always kills and reaps the child.
"""

from __future__ import annotations

import os
import sys

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_http_server.py")


from tests.conftest import Proc, start  # noqa: E402  (one implementation for the suite)


class McpServerProcess:
    def __init__(self, *args: str) -> None:
        self.args = args
        self.port = 0
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"

    def start(self) -> McpServerProcess:
        """Start on port 0 the first time; started again (a restart), on the port it had."""
        self.proc = start([sys.executable, SERVER, str(self.port), *self.args])
        try:
            self.port = int(self.proc.wait_line(r"^mcp_http_server: http://127\.0\.0\.1:(\d+)").group(1))
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.popen.kill()  # a test server has nothing to clean up; SIGTERM waits for open streams
        proc.popen.wait(10)

    def __enter__(self) -> McpServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
