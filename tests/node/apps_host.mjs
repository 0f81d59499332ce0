#!/usr/bin/env node
// The host side of MCP Apps (io.modelcontextprotocol/ui) for tests/modes/test_gateway_apps.py:
// what a host does before it renders a tool's View, with the official packages.
//
//   node apps_host.mjs '{"url": URL, "era": "legacy"|"modern"}'
//
// Connects with @modelcontextprotocol/client (2.x; era "modern" pins 2026-07-28), declaring the
// MCP Apps extension, lists the tools, and for each one takes its UI resource URI with ext-apps'
// own getToolUiResourceUri (app-bridge: the nested _meta.ui.resourceUri, else the flat
// _meta["ui/resourceUri"]; it throws on a URI that is not ui://), then reads that resource the way
// a host does before rendering it. Prints one JSON line:
//   {tools: {name: {uri, error?, contents?: [{uri, mimeType, text}]}}, calls: {name: text}}
// where calls are the results of calling each tool named in spec.calls (no arguments).
// A failure to connect or list prints {"error": message} and exits 1.

import { getToolUiResourceUri, RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const spec = JSON.parse(process.argv[2]);

async function main() {
  const options = { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } } };
  if (spec.era === "modern") options.versionNegotiation = { mode: { pin: "2026-07-28" } };
  const client = new Client({ name: "hopline-apps-host", version: "1.0.0" }, options);
  await client.connect(new StreamableHTTPClientTransport(new URL(spec.url)));
  try {
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    const out = {};
    for (const tool of tools) {
      const entry = {};
      try {
        entry.uri = getToolUiResourceUri(tool) ?? null;
      } catch (err) {
        entry.uri = null;
        entry.error = String(err?.message ?? err);
      }
      if (entry.uri) {
        const read = await client.readResource({ uri: entry.uri });
        entry.contents = read.contents.map((c) => ({ uri: c.uri, mimeType: c.mimeType, text: c.text }));
      }
      out[tool.name] = entry;
    }
    const calls = {};
    for (const name of spec.calls ?? []) {
      calls[name] = (await client.callTool({ name, arguments: {} })).content[0].text;
    }
    process.stdout.write(JSON.stringify({ tools: out, calls }) + "\n");
  } finally {
    await client.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stdout.write(JSON.stringify({ error: String(err?.message ?? err) }) + "\n");
    process.exit(1);
  },
);
