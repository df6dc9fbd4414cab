// openai_hello.mjs: asks `sipp serve` "Hello!" with the official openai npm client, greedy, plain and
// streamed, as an application in a cluster would. Usage: node openai_hello.mjs BASE_URL MODEL API_KEY
// Prints one JSON line {"ok", "content", "streamed"}, or {"ok": false, "error"} and exits 1.
import OpenAI from "openai";

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, timeout: 60000, maxRetries: 0 });
const ask = { model, messages: [{ role: "user", content: "Hello!" }], temperature: 0, max_tokens: 16 };

try {
  const r = await client.chat.completions.create(ask);
  let streamed = "";
  for await (const chunk of await client.chat.completions.create({ ...ask, stream: true }))
    streamed += chunk.choices[0]?.delta?.content ?? "";
  console.log(JSON.stringify({ ok: true, content: r.choices[0].message.content, streamed }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e) }));
  process.exit(1);
}
