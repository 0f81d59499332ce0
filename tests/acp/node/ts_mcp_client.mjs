// An editor-side client on the official TypeScript SDK that provides an MCP server over ACP
// with the SDK's own D5 provider (McpOverAcpProvider, connectionless `mcp/message`).
//   node ts_mcp_client.mjs "prompt 1" "prompt 2" ... -- command args...
// It spawns the command as the agent, runs initialize → session/new (declaring its server
// "client-tools") → one session/prompt per prompt, and prints one JSON summary line:
// {sessionId, stops, texts, handled}. The server's tool `whoami` answers JSON text
// {"session": inner _meta["io.hopline/acp-session-id"], "requestId": the binding's requestId};
// `fail` answers an inner MCP error. `handled` lists the inner methods it served.
import { client, methods, ndJsonStream, McpOverAcpProvider, McpProtocolError } from "@agentclientprotocol/sdk/unstable";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const argv = process.argv.slice(2);
const cut = argv.indexOf("--");
const prompts = argv.slice(0, cut);
const [command, ...args] = argv.slice(cut + 1);
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const texts = [];
const handled = [];
const mcp = new McpOverAcpProvider();
const tools = [
  { name: "whoami", description: "which ACP session am I serving?", inputSchema: { type: "object", properties: {} } },
  { name: "fail", description: "always fails", inputSchema: { type: "object", properties: {} } },
];
const handler = ({ method, params, requestId }) => {
  handled.push(method);
  if (method === "initialize") {  // handshake-era consumers (through a conductor that translates) start here
    return { result: { protocolVersion: params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "client-tools", version: "1" } } };
  }
  if (method === "tools/list") return { result: { tools } };
  if (method === "tools/call" && params?.name === "whoami") {
    const info = { session: params?._meta?.["io.hopline/acp-session-id"] ?? null, requestId };
    return { result: { content: [{ type: "text", text: JSON.stringify(info) }], isError: false } };
  }
  if (method === "tools/call" && params?.name === "fail") throw new McpProtocolError(-32000, "tool failed");
  throw new McpProtocolError(-32601, `Method not found: ${method}`);
};
const app = client({ name: "ts-mcp-client" })
  .onRequest(methods.client.mcp.message, mcp.handleRequest)
  .onNotification(methods.client.session.update, ({ params }) => {
    texts.push(params.update.content?.text);
  });

const summary = await app.connectWith(stream, async (agentCtx) => {
  await agentCtx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  const server = mcp.registerServer(agentCtx, { name: "client-tools", handler });
  const session = await agentCtx.request(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [server.declaration] });
  const stops = [];
  for (const text of prompts) {
    const answer = await agentCtx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: [{ type: "text", text }] });
    stops.push(answer.stopReason);
  }
  return { sessionId: session.sessionId, stops, texts: [...texts], handled };
});
process.stdout.write(JSON.stringify(summary) + "\n");
child.stdin.end();
const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
child.on("exit", () => { clearTimeout(timer); process.exit(0); });
