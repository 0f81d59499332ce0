#!/usr/bin/env node
// A real TypeScript-SDK MCP client for the interop tests (tests/interop/test_ts_and_inspector.py).
//
//   node ts_client.mjs '{"sdk": "v1"|"v2", "url": URL, "transport": "http"|"sse",
//                        "era": "legacy"|"modern", "calls": [[tool, args], ...],
//                        "headers": {name: value}}'   (headers: optional, sent with every request)
//
// sdk "v1" is @modelcontextprotocol/sdk (1.x, handshake era only); sdk "v2" is
// @modelcontextprotocol/client (2.x), which speaks 2026-07-28 when era is "modern"
// (versionNegotiation pinned to 2026-07-28: no fallback to the handshake).
// It connects, lists tools / prompts / resources (every page), calls each tool in
// "calls", and prints one JSON line: {protocolVersion, tools, prompts, resources, calls}.
// A failure prints {"error": message} and exits 1.

const spec = JSON.parse(process.argv[2]);

async function sdk(version) {
  if (version === "v1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    const { SSEClientTransport } = await import("@modelcontextprotocol/sdk/client/sse.js");
    return { Client, StreamableHTTPClientTransport, SSEClientTransport };
  }
  return await import("@modelcontextprotocol/client");
}

async function all(list, key) {
  const out = [];
  let cursor;
  do {
    const page = await list(cursor === undefined ? {} : { cursor });
    out.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

async function main() {
  const { Client, StreamableHTTPClientTransport, SSEClientTransport } = await sdk(spec.sdk);
  const url = new URL(spec.url);
  const opts = spec.headers ? { requestInit: { headers: spec.headers } } : undefined; // e.g. an API key
  const transport = spec.transport === "sse" ? new SSEClientTransport(url, opts) : new StreamableHTTPClientTransport(url, opts);
  const options = { capabilities: {} };
  if (spec.era === "modern") {
    if (spec.sdk !== "v2") throw new Error("the 2026-07-28 era needs sdk v2");
    options.versionNegotiation = { mode: { pin: "2026-07-28" } };
  }
  const client = new Client({ name: `hopline-interop-ts-${spec.sdk}`, version: "1.0.0" }, options);
  await client.connect(transport);
  try {
    const caps = client.getServerCapabilities() ?? {};
    const summary = {
      protocolVersion: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null,
      tools: caps.tools ? await all((p) => client.listTools(p), "tools") : [],
      prompts: caps.prompts ? await all((p) => client.listPrompts(p), "prompts") : [],
      resources: caps.resources ? await all((p) => client.listResources(p), "resources") : [],
      calls: [],
    };
    for (const [name, args] of spec.calls ?? []) {
      summary.calls.push(await client.callTool({ name, arguments: args }));
    }
    process.stdout.write(JSON.stringify(summary) + "\n");
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
