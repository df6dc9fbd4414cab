// openai_tools.mjs: tool calling, structured output and logprobs through the official openai npm
// client, as an agent would use them. Usage: node openai_tools.mjs BASE_URL MODEL
// The model is a random-weight one with a real template: only the grammar makes its answers valid.
// Prints one JSON line with what it checked, and exits 1 with the reason on the first failure.
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const MAX_TOKENS = 600;
const TIMEOUT_MS = 120000;
const client = new OpenAI({ baseURL, apiKey: "unused", timeout: TIMEOUT_MS, maxRetries: 0 });
const done = [];

const WEATHER = {
  type: "object",
  properties: {
    city: { type: "string", enum: ["Paris", "Rome"] },
    days: { type: "integer", minimum: 1, maximum: 7 },
  },
  required: ["city", "days"],
  additionalProperties: false,
};
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather", parameters: WEATHER } }];
const messages = [{ role: "user", content: "Weather in Paris?" }];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

function checkWeather(args) {
  check(["Paris", "Rome"].includes(args.city), `city ${args.city}`);
  check(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, `days ${args.days}`);
}

async function toolsPlain() {
  const r = await client.chat.completions.create({ model, messages, tools, tool_choice: "required", max_tokens: MAX_TOKENS, temperature: 0 });
  const c = r.choices[0];
  check(c.finish_reason === "tool_calls", `finish_reason ${c.finish_reason}`);
  const call = c.message.tool_calls[0];
  check(call.id.startsWith("call_") && call.type === "function" && call.function.name === "get_weather", "the call");
  checkWeather(JSON.parse(call.function.arguments));
  done.push("tools");
  return call;
}

async function toolsStream(whole) {
  const stream = await client.chat.completions.create({ model, messages, tools, tool_choice: "required", max_tokens: MAX_TOKENS, temperature: 0, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const tc of c.delta?.tool_calls ?? []) {
        if (!calls[tc.index]) calls[tc.index] = { id: tc.id, name: tc.function?.name, arguments: "" };
        calls[tc.index].arguments += tc.function?.arguments ?? "";
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(finish === "tool_calls", `stream finish_reason ${finish}`);
  check(calls.length === 1 && calls[0].name === whole.function.name, "one streamed call");
  check(calls[0].arguments === whole.function.arguments, "streamed arguments equal the plain ones");
  checkWeather(JSON.parse(calls[0].arguments));
  // the helper that accumulates a stream, as agents use it
  const runner = client.chat.completions.stream({ model, messages, tools, tool_choice: "required", max_tokens: MAX_TOKENS, temperature: 0 });
  const final = await runner.finalChatCompletion();
  check(final.choices[0].message.tool_calls[0].function.arguments === whole.function.arguments, "stream helper's final message");
  done.push("tools-stream");
}

async function toolsHistory(call) {
  const r = await client.chat.completions.create({
    model,
    messages: [...messages, { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: "sunny" }],
    tools, max_tokens: 4, temperature: 0,
  });
  check(typeof r.choices[0].message.content === "string", "an answer after the tool result");
  done.push("tools-history");
}

async function jsonSchema() {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: MAX_TOKENS, temperature: 0,
    response_format: { type: "json_schema", json_schema: { name: "weather", schema: WEATHER, strict: true } },
  });
  check(r.choices[0].finish_reason === "stop", `json_schema finish_reason ${r.choices[0].finish_reason}`);
  checkWeather(JSON.parse(r.choices[0].message.content));
  done.push("json_schema");
}

async function logprobs() {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2 });
  const entries = r.choices[0].logprobs.content;
  check(entries.length === r.usage.completion_tokens, "one entry per token");
  check(entries.every((e) => e.logprob <= 0 && e.top_logprobs.length === 2), "logprob entries");
  check(entries.map((e) => e.token).join("") === r.choices[0].message.content, "the tokens spell the content");
  done.push("logprobs");
}

try {
  const call = await toolsPlain();
  await toolsStream(call);
  await toolsHistory(call);
  await jsonSchema();
  await logprobs();
  console.log(JSON.stringify({ ok: true, checked: done }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, checked: done, error: String(e && e.stack || e) }));
  process.exit(1);
}
