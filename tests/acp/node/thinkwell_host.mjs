// Hosts @thinkwell/conductor 0.5.x (a library, no bin) on this process's stdio:
//   node thinkwell_host.mjs "proxy1 args" ... "agent args"
// Logging stays at warn: its default logger prints INFO to stdout, corrupting ACP.
// THINKWELL_MCP_BRIDGE=http turns on its built-in MCP-over-ACP bridge (default: disabled).
import { Conductor, fromCommands } from "@thinkwell/conductor";
import { createInterface } from "node:readline";

const stdioClient = {
  async connect() {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    return {
      send(message) { process.stdout.write(JSON.stringify(message) + "\n"); },
      messages: {
        async *[Symbol.asyncIterator]() {
          for await (const line of lines) if (line.trim()) yield JSON.parse(line);
        },
      },
      async close() { lines.close(); },
    };
  },
};

const conductor = new Conductor({
  instantiator: fromCommands(process.argv.slice(2)),
  mcpBridgeMode: process.env.THINKWELL_MCP_BRIDGE ?? "disabled",
  logging: { level: "warn" },
});
await conductor.connect(stdioClient);
await conductor.shutdown?.();
process.exit(0);
