"""Many users, one gateway (issue 28), seen by the TypeScript SDK clients: v1
(``@modelcontextprotocol/sdk``, handshake era) and v2 (``@modelcontextprotocol/client``, both
eras), each run of ``tests/node/ts_client.mjs`` one client session.

- Two principals (API keys) on server-sequential-thinking through ``hopline serve`` see
  independent state; one principal's sessions share its child (``share: principal``).
- Reverse mode is invisible for names: an unknown tool gets server-everything's own answer (an
  ``isError`` result), as the same client gets directly.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
MODULES = NODE_DIR / "node_modules" / "@modelcontextprotocol"
THINKING = MODULES / "server-sequential-thinking" / "dist" / "index.js"
EVERYTHING = MODULES / "server-everything" / "dist" / "index.js"
TS_CLIENT = NODE_DIR / "ts_client.mjs"
NODE = shutil.which("node")
if NODE is None or not THINKING.exists() or not EVERYTHING.exists():  # pragma: no cover - scripts/test installs them
    pytest.fail("the npm peers are not installed; run scripts/test (npm ci in tests/node)", pytrace=False)

KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789ab"}
CLIENTS = [("v1", "legacy"), ("v2", "legacy"), ("v2", "modern")]
THOUGHT = {"thought": "t", "thoughtNumber": 1, "totalThoughts": 3, "nextThoughtNeeded": True}


def ts(url: str, sdk: str, era: str, calls: list, headers: dict[str, str] | None = None) -> dict:
    spec = {"sdk": sdk, "era": era, "url": url, "transport": "http", "calls": calls, "headers": headers or {}}
    argv = [NODE, str(TS_CLIENT), json.dumps(spec)]
    done = subprocess.run(argv, cwd=NODE_DIR, capture_output=True, text=True, timeout=90)
    line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert line, f"ts_client printed nothing (exit {done.returncode}); stderr:\n{done.stderr[-2000:]}"
    summary = json.loads(line)
    assert "error" not in summary, summary
    return summary


def history(url: str, sdk: str, era: str, who: str) -> int:
    """One session of ``who``'s, one thought: the history length the server reports."""
    (call,) = ts(url, sdk, era, [["think__sequentialthinking", THOUGHT]], {"x-api-key": KEYS[who]})["calls"]
    assert not call.get("isError"), call
    return json.loads(call["content"][0]["text"])["thoughtHistoryLength"]


@pytest.mark.parametrize(("sdk", "era"), CLIENTS)
def test_two_principals_through_the_ts_clients_see_their_own_state(tmp_path, hopline_serve, sdk, era):
    conf = {
        "backends": {"think": {"command": NODE, "args": [str(THINKING)]}},
        "auth": {"resource": "http://127.0.0.1/mcp", "api_keys": [{"name": n, "key": k} for n, k in KEYS.items()]},
    }
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    assert history(gw.url, sdk, era, "alice") == 1
    assert history(gw.url, sdk, era, "bob") == 1  # not alice's child: her thought is not in his history
    assert history(gw.url, sdk, era, "alice") == 2  # a second session of alice's shares her child


@pytest.mark.parametrize(("sdk", "era"), CLIENTS)
def test_an_unknown_tool_through_reverse_mode_is_the_servers_own_answer_to_ts(tmp_path, hopline_serve, sdk, era):
    conf = {"mode": "reverse", "backends": {"everything": {"command": NODE, "args": [str(EVERYTHING), "stdio"]}}}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    (call,) = ts(gw.url, sdk, era, [["no-such-tool", {}]])["calls"]
    assert call.get("isError") is True  # server-everything's result, not a JSON-RPC error from hopline
    assert "no-such-tool" in json.dumps(call["content"])
