// A scripted client on the official TypeScript SDK: spawns `argv` as the agent, runs
// initialize → session/new → two prompts, prints one JSON summary line, exits.
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const [command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const texts = [];
const app = client({ name: "ts-client" }).onNotification(methods.client.session.update, ({ params }) => {
  texts.push(params.update.content?.text);
});

const summary = await app.connectWith(stream, async (agentCtx) => {
  const init = await agentCtx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  const session = await agentCtx.request(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
  const first = await agentCtx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: [{ type: "text", text: "updates 3 from ts" }] });
  const afterFirst = [...texts];
  const second = await agentCtx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: [{ type: "text", text: "hello" }] });
  return { agent: init.agentInfo?.name ?? null, stops: [first.stopReason, second.stopReason], afterFirst, texts: [...texts] };
});
process.stdout.write(JSON.stringify(summary) + "\n");
child.stdin.end();
const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
child.on("exit", () => { clearTimeout(timer); process.exit(0); });
