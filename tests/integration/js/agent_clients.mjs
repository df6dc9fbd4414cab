// agent_clients.mjs: drives `sipp serve` with the official clients of the APIs agents speak: openai
// (Responses), @anthropic-ai/sdk (Messages) and ollama, as applications would.
// Usage: node agent_clients.mjs BASE MODEL TOKEN PULL_URL TOOL_MODEL [remote]
// (BASE like http://127.0.0.1:8080, no path; TOOL_MODEL a target with a real tool-calling template). Prints one JSON line with what it checked, and exits 1
// with the reason on the first failure. With "remote" MODEL and TOOL_MODEL are remote targets (another
// sipp as the upstream): the chat checks run, plain and streamed, and what only local targets have
// (count_tokens, list/show/ps, generate, embed, pull) is left out.
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";

const [base, model, token, pullUrl, toolModel, mode] = process.argv.slice(2);
const remote = mode === "remote";
const MAX_TOKENS = 8;
const TIMEOUT_MS = 60000;
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: token, timeout: TIMEOUT_MS, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: token, timeout: TIMEOUT_MS, maxRetries: 0 });
const ollama = new Ollama({ host: base, headers: { Authorization: `Bearer ${token}` } });
const doneList = [];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// Removes consecutive repeats: the documented order names each kind of event once.
function kinds(types) {
  return types.filter((t, i) => i === 0 || types[i - 1] !== t);
}

function sameList(a, b, what) {
  check(JSON.stringify(a) === JSON.stringify(b), `${what}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
}

// ---- OpenAI Responses ------------------------------------------------------------------------

const RESPONSES_ORDER = [
  "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
  "response.output_text.delta", "response.output_text.done", "response.content_part.done",
  "response.output_item.done", "response.incomplete",
];

async function responsesPlain() {
  const r = await openai.responses.create({
    model, instructions: "Be brief.", input: "Hello!", max_output_tokens: MAX_TOKENS, temperature: 0,
  });
  check(r.object === "response" && r.id.startsWith("resp_"), "response object");
  check(r.status === "incomplete" && r.incomplete_details.reason === "max_output_tokens", `status ${r.status}`);
  check(r.output[0].type === "message" && r.output[0].content[0].type === "output_text", "output item");
  check(typeof r.output_text === "string" && r.output_text === r.output[0].content[0].text, "output_text");
  check(r.usage.output_tokens === MAX_TOKENS, "usage.output_tokens");
  const again = await openai.responses.retrieve(r.id);
  check(again.id === r.id && again.output_text === r.output_text, "responses.retrieve");
  doneList.push("responses");
  return r;
}

async function responsesStream(plain) {
  const stream = await openai.responses.create({
    model, instructions: "Be brief.", input: "Hello!", max_output_tokens: MAX_TOKENS, temperature: 0, stream: true,
  });
  const types = [];
  let text = "";
  let seq = -1;
  let final = null;
  for await (const ev of stream) {
    types.push(ev.type);
    check(ev.sequence_number === seq + 1, `sequence_number ${ev.sequence_number} after ${seq}`);
    seq = ev.sequence_number;
    if (ev.type === "response.output_text.delta") text += ev.delta;
    if (ev.type === "response.incomplete") final = ev.response;
  }
  sameList(kinds(types), RESPONSES_ORDER, "Responses event order");
  check(text === plain.output_text, `streamed text equals the plain one: ${JSON.stringify(text)}`);
  check(final && final.usage.output_tokens === MAX_TOKENS, "final response with usage");
  doneList.push("responses-stream");
}

async function responsesFollowUp(first) {
  const next = await openai.responses.create({
    model, instructions: "Be brief.", input: "And then?", previous_response_id: first.id,
    max_output_tokens: MAX_TOKENS, temperature: 0,
  });
  check(next.previous_response_id === first.id, "previous_response_id echoed");
  // The first turn's prompt is a prefix of this one's, and its KV is reused, not read again.
  check(next.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens,
    `cached_tokens ${next.usage.input_tokens_details.cached_tokens} >= ${first.usage.input_tokens}`);
  check(next.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens, "history included");
  const items = await openai.responses.inputItems.list(next.id);
  check(items.data.length === 1 && items.data[0].content[0].text === "And then?", "input items");
  await openai.responses.delete(next.id);
  let gone = false;
  try {
    await openai.responses.retrieve(next.id);
  } catch (e) {
    gone = e.status === 404;
  }
  check(gone, "a deleted response is 404");
  doneList.push("responses-previous");
}

const WEATHER = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Rome"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
};

// Arguments that obey WEATHER: a random-weight model only writes them under the schema's grammar.
function validWeather(a) {
  return a && Object.keys(a).sort().join() === "city,days" && ["Paris", "Rome"].includes(a.city) &&
    Number.isInteger(a.days) && a.days >= 1 && a.days <= 7;
}

async function responsesTools() {
  const tools = [{ type: "function", name: "get_weather", parameters: WEATHER, strict: true }];
  const r = await openai.responses.create({
    model: toolModel, input: "Weather in Paris?", tools, tool_choice: "required", parallel_tool_calls: false,
    max_output_tokens: 200, temperature: 0,
  });
  const call = r.output.find((o) => o.type === "function_call");
  check(call && call.name === "get_weather" && validWeather(JSON.parse(call.arguments)), `function_call: ${JSON.stringify(r.output)}`);
  const stream = await openai.responses.create({
    model: toolModel, input: "Weather in Paris?", tools, tool_choice: { type: "function", name: "get_weather" },
    parallel_tool_calls: false, max_output_tokens: 200, temperature: 0, stream: true,
  });
  let args = "";
  let done = null;
  for await (const ev of stream) {
    if (ev.type === "response.function_call_arguments.delta") args += ev.delta;
    if (ev.type === "response.function_call_arguments.done") done = ev.arguments;
  }
  check(done === args && validWeather(JSON.parse(args)), `streamed arguments: ${args}`);
  const next = await openai.responses.create({
    model: toolModel, previous_response_id: r.id, tools, tool_choice: "none", max_output_tokens: 8, temperature: 0,
    input: [{ type: "function_call_output", call_id: call.call_id, output: "Sunny" }],
  });
  check(next.output[0].type === "message", "an answer after the tool's output");
  doneList.push("responses-tools");
}

// ---- Anthropic Messages ----------------------------------------------------------------------

const MESSAGES_ORDER = [
  "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop",
];

async function messagesPlain() {
  const m = await anthropic.messages.create({
    model, system: "Be brief.", messages: [{ role: "user", content: "Hello!" }], max_tokens: MAX_TOKENS, temperature: 0,
  });
  check(m.type === "message" && m.role === "assistant", "message object");
  check(m.content[0].type === "text" && typeof m.content[0].text === "string", "text block");
  check(m.stop_reason === "max_tokens" && m.usage.output_tokens === MAX_TOKENS, `stop_reason ${m.stop_reason}`);
  if (remote) {
    doneList.push("messages");
    return m;
  }
  const counted = await anthropic.messages.countTokens({
    model, system: "Be brief.", messages: [{ role: "user", content: "Hello!" }],
  });
  check(counted.input_tokens === m.usage.input_tokens + m.usage.cache_read_input_tokens,
    `countTokens ${counted.input_tokens} equals the prompt ${m.usage.input_tokens} + ${m.usage.cache_read_input_tokens}`);
  doneList.push("messages", "count-tokens");
  return m;
}

async function messagesStream(plain) {
  const stream = await anthropic.messages.create({
    model, system: "Be brief.", messages: [{ role: "user", content: "Hello!" }], max_tokens: MAX_TOKENS, temperature: 0,
    stream: true,
  });
  const types = [];
  let text = "";
  let reason = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
    if (ev.type === "message_delta") reason = ev.delta.stop_reason;
  }
  sameList(kinds(types), MESSAGES_ORDER, "Messages event order");
  check(text === plain.content[0].text, `streamed text equals the plain one: ${JSON.stringify(text)}`);
  check(reason === "max_tokens", "stream stop_reason");
  // The SDK's accumulating helper too.
  const helper = anthropic.messages.stream({
    model, messages: [{ role: "user", content: "Hello!" }], system: "Be brief.", max_tokens: MAX_TOKENS, temperature: 0,
  });
  const final = await helper.finalMessage();
  check(final.content[0].text === plain.content[0].text, "messages.stream().finalMessage()");
  doneList.push("messages-stream");
}

async function messagesTools() {
  const m = await anthropic.messages.create({
    model: toolModel, max_tokens: 200, temperature: 0, messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [{ name: "get_weather", description: "Weather by city", input_schema: WEATHER }],
    tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
  });
  const use = m.content.find((b) => b.type === "tool_use");
  check(m.stop_reason === "tool_use" && use && validWeather(use.input), `tool_use: ${JSON.stringify(m.content)}`);
  const helper = anthropic.messages.stream({
    model: toolModel, max_tokens: 200, temperature: 0, messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [{ name: "get_weather", input_schema: WEATHER }], tool_choice: { type: "tool", name: "get_weather" },
  });
  const final = await helper.finalMessage();
  const streamed = final.content.find((b) => b.type === "tool_use");
  check(streamed && validWeather(streamed.input), `streamed tool_use: ${JSON.stringify(final.content)}`);
  doneList.push("messages-tools");
}

async function messagesErrors() {
  let err = null;
  try {
    await anthropic.messages.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }], max_tokens: 4 });
  } catch (e) {
    err = e;
  }
  check(err instanceof Anthropic.NotFoundError && err.error?.error?.type === "not_found_error", `404 shape: ${err}`);
  doneList.push("messages-errors");
}

// ---- Ollama ----------------------------------------------------------------------------------

async function ollamaModels() {
  const list = await ollama.list();
  check(list.models.some((m) => m.name === `${model}:latest`), `list: ${JSON.stringify(list.models.map((m) => m.name))}`);
  const show = await ollama.show({ model });
  check(show.details.format === "gguf" && show.model_info["general.architecture"], "show");
  const ps = await ollama.ps();
  check(ps.models.some((m) => m.name === `${model}:latest`), "ps");
  doneList.push("ollama-list", "ollama-show", "ollama-ps");
}

async function ollamaChat() {
  const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }];
  const options = { num_predict: MAX_TOKENS, temperature: 0 };
  const r = await ollama.chat({ model: `${model}:latest`, messages, options });
  check(r.done === true && r.done_reason === "length" && r.eval_count === MAX_TOKENS, `chat ${JSON.stringify(r)}`);
  check(r.message.role === "assistant" && typeof r.message.content === "string", "chat message");
  check(r.total_duration > 0 && r.prompt_eval_count > 0, "chat timings");
  let text = "";
  let last = null;
  for await (const part of await ollama.chat({ model, messages, options, stream: true })) {
    text += part.message.content;
    last = part;
  }
  check(last.done === true && text === r.message.content, `streamed chat equals the plain one: ${JSON.stringify(text)}`);
  doneList.push("ollama-chat", "ollama-chat-stream");
}

async function ollamaGenerate() {
  const r = await ollama.generate({ model, prompt: "Once upon a time", options: { num_predict: MAX_TOKENS, temperature: 0 } });
  check(r.done && typeof r.response === "string" && r.eval_count === MAX_TOKENS, "generate");
  const e = await ollama.embed({ model, input: ["hello", "world"] });
  check(e.embeddings.length === 2 && e.embeddings[0].length > 0, "embed");
  const norm = Math.hypot(...e.embeddings[0]);
  check(Math.abs(norm - 1) < 1e-3, `embed returns unit vectors (${norm})`);
  doneList.push("ollama-generate", "ollama-embed");
}

async function ollamaPull() {
  const statuses = [];
  let completed = 0;
  for await (const p of await ollama.pull({ model: pullUrl, stream: true })) {
    statuses.push(p.status);
    if (p.completed) completed = p.completed;
  }
  check(statuses[0] === "pulling manifest" && statuses[statuses.length - 1] === "success", `pull: ${JSON.stringify(statuses)}`);
  check(completed > 0, "pull progress counts bytes");
  const again = await ollama.pull({ model: pullUrl });
  check(again.status === "success", "a second, non-streamed pull");
  doneList.push("ollama-pull");
}

try {
  const first = await responsesPlain();
  await responsesStream(first);
  if (!remote) await responsesFollowUp(first);
  await responsesTools();
  const m = await messagesPlain();
  await messagesStream(m);
  await messagesTools();
  await messagesErrors();
  if (!remote) await ollamaModels();
  await ollamaChat();
  if (!remote) {
    await ollamaGenerate();
    await ollamaPull();
  }
  console.log(JSON.stringify({ ok: true, checked: doneList }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, checked: doneList, error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
}
