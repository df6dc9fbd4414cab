// An MCP server (stdio, newline-delimited JSON-RPC 2.0) offering tools/train/corpus.py's tools,
// get_weather and get_time, so that a real agent can run the tool sipp-demo calls. Node's standard
// library only. Each tools/call is appended to the file named by argv[2], one JSON line
// {"name", "arguments"}, for the test to read; the result is always 21 °C and sunny, or 14:05.
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const log = process.argv[2];
const city = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const tools = [
  { name: "get_weather", description: "Get the current weather in a city", inputSchema: city },
  { name: "get_time", description: "Get the local time in a city", inputSchema: city },
];

function reply(id, result) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id, result }) + "\n");
}

function call(params) {
  const args = params.arguments ?? {};
  if (log) appendFileSync(log, JSON.stringify({ name: params.name, arguments: args }) + "\n");
  const where = typeof args.city === "string" ? args.city : "";
  const result = params.name === "get_weather" ? { city: where, temperature_c: 21, condition: "sunny" }
    : params.name === "get_time" ? { city: where, time: "14:05" } : null;
  if (!result) return { isError: true, content: [{ type: "text", text: `no tool named ${params.name}` }] };
  return { content: [{ type: "text", text: JSON.stringify(result) }] };
}

createInterface({ input: process.stdin }).on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined) return; // a notification (notifications/initialized) needs no answer
  switch (msg.method) {
    case "initialize":
      return reply(msg.id, { protocolVersion: msg.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} }, serverInfo: { name: "weather", version: "1.0.0" } });
    case "tools/list":
      return reply(msg.id, { tools });
    case "tools/call":
      return reply(msg.id, call(msg.params ?? {}));
    case "ping":
      return reply(msg.id, {});
    default:
      process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id,
        error: { code: -32601, message: `no method ${msg.method}` } }) + "\n");
  }
});
