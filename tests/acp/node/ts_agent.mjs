// An echo agent on the official TypeScript SDK (@agentclientprotocol/sdk 2.4.x), over stdio.
// A prompt gets one agent_message_chunk "echo: TEXT" (then end_turn); "updates N TEXT" gets N.
import { agent, methods, ndJsonStream } from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";

const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const chunk = (sessionId, text) => ({ sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } });

const app = agent({ name: "ts-echo-agent" })
  .onRequest(methods.agent.initialize, ({ params }) => ({
    protocolVersion: params.protocolVersion,
    agentCapabilities: {},
    agentInfo: { name: "ts-echo-agent", version: "1.0" },
  }))
  .onRequest(methods.agent.session.new, () => ({ sessionId: "ts-session-1" }))
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const text = params.prompt.map((b) => b.text ?? "").join(" ");
    const [word, count, ...rest] = text.split(" ");
    if (word === "updates") {
      for (let i = 0; i < Number(count); i++) await client.notify(methods.client.session.update, chunk(params.sessionId, `echo ${i}: ${rest.join(" ")}`));
    } else {
      await client.notify(methods.client.session.update, chunk(params.sessionId, `echo: ${text}`));
    }
    return { stopReason: "end_turn" };
  });

const connection = app.connect(stream);
await connection.closed;
