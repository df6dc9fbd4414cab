// demo_tool_loop.mjs: the tool loop an application writes, through the official openai and
// @anthropic-ai/sdk clients, against sipp-demo (the trained model in models/). Usage:
//   node demo_tool_loop.mjs BASE_URL MODEL
// Each client offers get_weather and get_time, asks for the weather in Paris, runs the call the model
// makes with a fixed result, sends the result back and reads the final answer. Prints one JSON line
// with what it checked, and exits 1 with the reason on the first failure.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const [base, model] = process.argv.slice(2);
const TIMEOUT_MS = 120000;
const QUESTION = "What's the weather in Paris?";
const RESULT = { city: "Paris", temperature_c: 21, condition: "sunny" };
const CITY = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const TOOLS = [
  { name: "get_weather", description: "Get the current weather in a city", parameters: CITY },
  { name: "get_time", description: "Get the local time in a city", parameters: CITY },
];
const done = [];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// what the application's function returns; only get_weather for Paris is expected
function runTool(name, args) {
  check(name === "get_weather", `the model called ${name}, not get_weather`);
  check(JSON.stringify(args) === JSON.stringify({ city: "Paris" }), `arguments ${JSON.stringify(args)}`);
  return JSON.stringify(RESULT);
}

function usesResult(text) {
  check(text.includes("21") && text.toLowerCase().includes("sunny"), `the answer does not use the result: ${JSON.stringify(text)}`);
}

async function openaiLoop() {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", timeout: TIMEOUT_MS, maxRetries: 0 });
  const tools = TOOLS.map((t) => ({ type: "function", function: t }));
  const messages = [{ role: "user", content: QUESTION }];
  const first = await client.chat.completions.create({ model, messages, tools, tool_choice: "auto", temperature: 0, max_tokens: 64 });
  const choice = first.choices[0];
  check(choice.finish_reason === "tool_calls", `finish_reason ${choice.finish_reason}`);
  messages.push(choice.message);
  for (const call of choice.message.tool_calls) {
    messages.push({ role: "tool", tool_call_id: call.id, content: runTool(call.function.name, JSON.parse(call.function.arguments)) });
  }
  const final = await client.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 48 });
  usesResult(final.choices[0].message.content);
  done.push("openai");
}

async function anthropicLoop() {
  const client = new Anthropic({ baseURL: base, apiKey: "unused", timeout: TIMEOUT_MS, maxRetries: 0 });
  const tools = TOOLS.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
  const messages = [{ role: "user", content: QUESTION }];
  const first = await client.messages.create({ model, messages, tools, tool_choice: { type: "auto" }, temperature: 0, max_tokens: 64 });
  check(first.stop_reason === "tool_use", `stop_reason ${first.stop_reason}`);
  messages.push({ role: "assistant", content: first.content });
  const results = first.content.filter((b) => b.type === "tool_use")
    .map((b) => ({ type: "tool_result", tool_use_id: b.id, content: runTool(b.name, b.input) }));
  messages.push({ role: "user", content: results });
  const final = await client.messages.create({ model, messages, tools, temperature: 0, max_tokens: 48 });
  usesResult(final.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
  done.push("anthropic");
}

try {
  await openaiLoop();
  await anthropicLoop();
  console.log(JSON.stringify({ ok: true, checked: done }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, checked: done, error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
}
