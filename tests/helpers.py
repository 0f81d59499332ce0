"""Helpers shared by the test modules (one definition each; fixtures live in tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


def write_yaml(tmp_path: Path, conf: dict[str, Any], name: str = "gw.yaml") -> str:
    """``conf`` as a YAML configuration file in ``tmp_path``: its path, as ``hopline serve`` takes it."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(conf))
    return str(path)


def write_backends(tmp_path: Path, backends: dict[str, tuple[list[str], dict[str, Any]]], **top: Any) -> str:
    """A gateway configuration of command backends, ``{id: (argv, extra fields)}``, and top-level sections."""
    conf = {"backends": {bid: {"command": argv[0], "args": argv[1:], **extra} for bid, (argv, extra) in backends.items()}, **top}
    return write_yaml(tmp_path, conf, "gateway.yaml")


def answer_of(response: Any, msg_id: Any) -> dict[str, Any]:
    """The JSON-RPC answer to ``msg_id`` in an httpx response to a client that accepts both JSON and
    SSE: a JSON body, or the one event with that id when the server chose a stream (as it may once
    the answer takes a while, e.g. a backend starting on a loaded machine)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        (answer,) = [e for e in events if e.get("id") == msg_id]
        return answer
    return response.json()
