// A scripted editor on the official TypeScript SDK over WebSocket: the SDK's own
// createWebSocketStream (dist/transports/ws-stream.js; the pinned 2.4.0 does not export it from
// the package entry yet) with Node's WebSocket (node --experimental-websocket on Node 20).
// Connects to argv[2], runs initialize → session/new → one prompt, prints one JSON summary line.
import { client, methods } from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "./node_modules/@agentclientprotocol/sdk/dist/transports/ws-stream.js";

const url = process.argv[2];
const texts = [];
const app = client({ name: "ts-ws-client" }).onNotification(methods.client.session.update, ({ params }) => {
  texts.push(params.update.content?.text);
});
const summary = await app.connectWith(createWebSocketStream(url), async (agentCtx) => {
  const init = await agentCtx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  const session = await agentCtx.request(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
  const result = await agentCtx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: [{ type: "text", text: "updates 2 from ts over ws" }] });
  return { agent: init.agentInfo?.name ?? null, stop: result.stopReason, texts: [...texts] };
});
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(0);
