"""Capture the tool lists of real MCP servers into ``catalogue/*.json`` (run by hand, not in CI).

The benchmark catalogue is data: each file is exactly what one server answered to
``tools/list`` (via the official MCP Python SDK client over stdio), plus where it came
from. Servers are npm packages at pinned versions, installed with
``npm install --prefix DIR --ignore-scripts`` (no browser downloads), started with
dummy credentials: ``tools/list`` needs none of them, and nothing here reaches a network.

    python bench/disclosure/capture.py --npm-prefix /tmp/disclosure-npm [--install] [backend …]

``redis`` lists its tools only once connected: start a throwaway server first
(``redis-server --port 6391 --save ''``). Captured on 2026-11-30: 17 backends, 175 tools.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent
CATALOGUE = HERE / "catalogue"
ROOT = HERE.parent.parent
DUMMY = "dummy-not-a-secret"

# backend id → (npm package@version, bin path inside node_modules, extra args, env)
SERVERS: dict[str, tuple[str, str, list[str], dict[str, str]]] = {
    "everything": ("@modelcontextprotocol/server-everything@2026.8.31", "@modelcontextprotocol/server-everything/dist/index.js", ["stdio"], {}),
    "memory": ("@modelcontextprotocol/server-memory@2026.8.31", "@modelcontextprotocol/server-memory/dist/index.js", [], {"MEMORY_FILE_PATH": "{tmp}/memory.jsonl"}),
    "filesystem": ("@modelcontextprotocol/server-filesystem@2026.8.31", "@modelcontextprotocol/server-filesystem/dist/index.js", ["{tmp}"], {}),
    "github": ("@modelcontextprotocol/server-github@2025.4.8", "@modelcontextprotocol/server-github/dist/index.js", [], {"GITHUB_PERSONAL_ACCESS_TOKEN": DUMMY}),
    "gitlab": ("@modelcontextprotocol/server-gitlab@2025.4.25", "@modelcontextprotocol/server-gitlab/dist/index.js", [], {"GITLAB_PERSONAL_ACCESS_TOKEN": DUMMY}),
    "slack": ("@modelcontextprotocol/server-slack@2025.4.25", "@modelcontextprotocol/server-slack/dist/index.js", [], {"SLACK_BOT_TOKEN": DUMMY, "SLACK_TEAM_ID": "T0000"}),
    "puppeteer": ("@modelcontextprotocol/server-puppeteer@2025.5.12", "@modelcontextprotocol/server-puppeteer/dist/index.js", [], {}),
    "brave": ("@modelcontextprotocol/server-brave-search@0.6.2", "@modelcontextprotocol/server-brave-search/dist/index.js", [], {"BRAVE_API_KEY": DUMMY}),
    "maps": ("@modelcontextprotocol/server-google-maps@0.6.2", "@modelcontextprotocol/server-google-maps/dist/index.js", [], {"GOOGLE_MAPS_API_KEY": DUMMY}),
    "redis": ("@modelcontextprotocol/server-redis@2025.4.25", "@modelcontextprotocol/server-redis/dist/index.js", ["redis://127.0.0.1:6391"], {}),
    "thinking": ("@modelcontextprotocol/server-sequential-thinking@2026.8.31", "@modelcontextprotocol/server-sequential-thinking/dist/index.js", [], {}),
    "postgres": ("@modelcontextprotocol/server-postgres@0.6.2", "@modelcontextprotocol/server-postgres/dist/index.js", ["postgresql://127.0.0.1:1/none"], {}),
    "everart": ("@modelcontextprotocol/server-everart@0.6.2", "@modelcontextprotocol/server-everart/dist/index.js", [], {"EVERART_API_KEY": DUMMY}),
    "awskb": ("@modelcontextprotocol/server-aws-kb-retrieval@0.6.2", "@modelcontextprotocol/server-aws-kb-retrieval/dist/index.js", [], {"AWS_ACCESS_KEY_ID": DUMMY, "AWS_SECRET_ACCESS_KEY": DUMMY, "AWS_REGION": "us-east-1"}),
    "playwright": ("@playwright/mcp@0.0.83", "@playwright/mcp/cli.js", ["--headless"], {}),
    "kubernetes": ("mcp-server-kubernetes@4.1.7", "mcp-server-kubernetes/dist/index.js", [], {}),
    "notion": ("@notionhq/notion-mcp-server@2.5.2", "@notionhq/notion-mcp-server/bin/cli.mjs", [], {"NOTION_TOKEN": DUMMY}),
}


async def capture(backend: str, prefix: Path, tmp: str) -> dict:
    package, bin_path, args, env = SERVERS[backend]
    script = prefix / "node_modules" / bin_path
    fill = lambda s: s.replace("{tmp}", tmp)
    params = StdioServerParameters(command="node", args=[str(script), *map(fill, args)], env={**os.environ, **{k: fill(v) for k, v in env.items()}}, cwd=tmp)
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), 30)
            listed = await asyncio.wait_for(session.list_tools(), 30)
    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
    return {"backend": backend, "source": f"npm:{package}", "captured_with": "tools/list via mcp Python SDK (stdio)", "tools": tools}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--npm-prefix", type=Path, required=True, help="where the servers are (or will be) npm-installed")
    parser.add_argument("--install", action="store_true", help="npm install the pinned packages into --npm-prefix first")
    parser.add_argument("only", nargs="*", help="backend ids (default: all)")
    opts = parser.parse_args()
    if opts.install:
        opts.npm_prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(opts.npm_prefix), "--no-save", "--no-package-lock", "--ignore-scripts", "--no-audit", "--no-fund",
                        *(spec for spec, *_ in SERVERS.values())], check=True)
    CATALOGUE.mkdir(exist_ok=True)
    for backend in opts.only or SERVERS:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                data = await capture(backend, opts.npm_prefix, tmp)
            except Exception as exc:  # report and go on: one broken server must not stop the rest
                print(f"{backend:12} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
        (CATALOGUE / f"{backend}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(f"{backend:12} {len(data['tools']):3} tools  {data['source']}")


if __name__ == "__main__":
    asyncio.run(main())
