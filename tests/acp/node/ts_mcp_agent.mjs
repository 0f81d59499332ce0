// An agent on the official TypeScript SDK that consumes ACP-transport MCP servers with the SDK's
// own D5 caller (McpOverAcpCaller: connectionless `mcp/message`, MCP 2026-07-28), over stdio.
// It advertises mcpCapabilities.acp. A prompt "call SERVER TOOL [ARGS-JSON]" calls TOOL on the
// session's server named SERVER and answers one agent_message_chunk whose text is the JSON
// outcome: {"result": ...} or {"error": ...} (inner), or {"failed": {code, message}} (outer).
import { agent, methods, ndJsonStream, McpOverAcpCaller, isMcpServerAcp } from "@agentclientprotocol/sdk/unstable";
import { Readable, Writable } from "node:stream";

const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const chunk = (sessionId, text) => ({ sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } });
const mcp = new McpOverAcpCaller({ clientInfo: { name: "ts-mcp-agent", version: "1.0" } });
const sessions = new Map();

const app = agent({ name: "ts-mcp-agent" })
  .onNotification(methods.agent.mcp.message, mcp.handleNotification)
  .onRequest(methods.agent.initialize, ({ params }) => ({
    protocolVersion: params.protocolVersion,
    agentCapabilities: { mcpCapabilities: { acp: true } },
    agentInfo: { name: "ts-mcp-agent", version: "1.0" },
  }))
  .onRequest(methods.agent.session.new, ({ params }) => {
    const sessionId = `ts-mcp-session-${sessions.size + 1}`;
    sessions.set(sessionId, (params.mcpServers ?? []).filter(isMcpServerAcp));
    return { sessionId };
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const text = params.prompt.map((b) => b.text ?? "").join(" ");
    const [, name, tool, ...rest] = text.split(" ");
    const server = (sessions.get(params.sessionId) ?? []).find((s) => s.name === name);
    let out;
    if (!server) {
      out = { failed: { message: `no ACP server named ${name}` } };
    } else {
      try {
        out = await mcp.request(client, server.serverId, "tools/call", { name: tool, arguments: rest.length ? JSON.parse(rest.join(" ")) : {} });
      } catch (error) {
        out = { failed: { code: error.code, message: error.message } };
      }
    }
    await client.notify(methods.client.session.update, chunk(params.sessionId, JSON.stringify(out)));
    return { stopReason: "end_turn" };
  });

const connection = app.connect(stream);
await connection.closed;
