// openai_client.mjs: drives `sipp serve` with the official openai npm client, as an application
// would. Usage: node openai_client.mjs BASE_URL MODEL [API_KEY]
// (BASE_URL like http://127.0.0.1:8080/v1). Prints one JSON line with what it checked, and exits 1
// with the reason on the first failure.
import OpenAI from "openai";

const [baseURL, model, apiKey = "unused"] = process.argv.slice(2);
const MAX_TOKENS = 8;
const TIMEOUT_MS = 60000;
const client = new OpenAI({ baseURL, apiKey, timeout: TIMEOUT_MS, maxRetries: 0 });
const done = [];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function models() {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  check(ids.includes(model), `models.list() includes ${model}: ${JSON.stringify(ids)}`);
  const one = await client.models.retrieve(model);
  check(one.id === model, "models.retrieve()");
  done.push("models");
}

async function chatPlain() {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }],
    max_tokens: MAX_TOKENS,
    temperature: 0,
  });
  check(r.object === "chat.completion", "chat object");
  check(typeof r.choices[0].message.content === "string", "chat content");
  check(["stop", "length"].includes(r.choices[0].finish_reason), "chat finish_reason");
  check(r.usage.completion_tokens <= MAX_TOKENS, "chat usage");
  done.push("chat");
  return r.choices[0].message.content;
}

async function chatStream(expected) {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }],
    max_tokens: MAX_TOKENS,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(text === expected, `streamed text equals the plain one: ${JSON.stringify(text)} vs ${JSON.stringify(expected)}`);
  check(finish !== null, "stream finish_reason");
  check(usage && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens, "stream usage");
  done.push("chat-stream");
}

async function completions() {
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: MAX_TOKENS, temperature: 0 });
  check(r.object === "text_completion", "completion object");
  const stream = await client.completions.create({
    model, prompt: "Once upon a time", max_tokens: MAX_TOKENS, temperature: 0, stream: true,
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
  check(text === r.choices[0].text, "streamed completion equals the plain one");
  done.push("completions");
}

async function embeddings() {
  const r = await client.embeddings.create({ model, input: ["hello", "world"] });
  check(r.data.length === 2, "two embeddings");
  const v = r.data[0].embedding;
  check(Array.isArray(v) && v.length > 0, "embedding vector");
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  check(Math.abs(norm - 1) < 1e-3, `unit norm (${norm})`);
  done.push("embeddings");
}

async function errors() {
  try {
    await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] });
    check(false, "an unknown model is an error");
  } catch (e) {
    check(e instanceof OpenAI.APIError, `APIError, got ${e}`);
    check(e.status === 404, `status 404, got ${e.status}`);
    check(e.code === "model_not_found", `code model_not_found, got ${e.code}`);
  }
  try {
    await client.chat.completions.create({ model, messages: "not an array" });
    check(false, "a bad field is an error");
  } catch (e) {
    check(e.status === 400 && /messages/.test(e.message), `400 naming the field, got ${e.status} ${e.message}`);
  }
  done.push("errors");
}

try {
  await models();
  const text = await chatPlain();
  await chatStream(text);
  await completions();
  await embeddings();
  await errors();
  console.log(JSON.stringify({ ok: true, checked: done }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, checked: done, error: String(e?.stack ?? e) }));
  process.exit(1);
}
