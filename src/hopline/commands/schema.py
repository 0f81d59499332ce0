"""``hopline schema``: print the JSON Schema of the configuration file.

Out: JSON Schema (draft 2020-12) on stdout, for editors and CI validators. It is
``GatewayConfig.model_json_schema()`` plus the optional desktop sections a file may
carry instead of (or beside) ``backends``: ``mcpServers``, VS Code's ``servers`` and
``inputs``, and a ``hopline`` key of settings. pydantic is imported only when the
command runs, so ``hopline --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def file_schema() -> dict[str, Any]:
    from hopline.config.desktop import SECTION, VSCODE_SECTION
    from hopline.config.schema import GatewayConfig

    schema = GatewayConfig.model_json_schema()
    schema["properties"][SECTION] = {
        "type": "object",
        "description": "Servers in the desktop-client format (Claude Desktop, Cursor, Cline, Windsurf): "
        "command/args/env or url/headers per entry; imported as backends.",
        "additionalProperties": {"type": "object"},
    }
    schema["properties"][VSCODE_SECTION] = {
        "type": "object",
        "description": "Servers in VS Code's .vscode/mcp.json format (type stdio/http/sse); imported as backends. "
        "${input:ID} is read from the environment variable HOPLINE_INPUT_<ID>.",
        "additionalProperties": {"type": "object"},
    }
    schema["properties"]["inputs"] = {
        "type": "array",
        "description": "VS Code's input prompts (read, not used: see servers).",
    }
    schema["properties"]["hopline"] = {
        "type": "object",
        "description": "In a desktop file: hopline's own top-level settings (routing, listen, …), e.g. "
        "routing.startup_timeout.",
    }
    # With mcpServers present, backends may be absent; the loader enforces "at least one".
    required = [r for r in schema.pop("required", []) if r != "backends"]
    if required:
        schema["required"] = required
    return {"$schema": SCHEMA_DIALECT, **schema, "title": "hopline configuration"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compact", action="store_true", help="one line instead of indented JSON")


def run(args: argparse.Namespace) -> int:
    print(json.dumps(file_schema(), indent=None if args.compact else 2, ensure_ascii=False))
    return 0
