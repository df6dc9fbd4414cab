// media_clients.mjs: images and audio through the official npm clients against `sipp serve`, as an
// application would send them. Usage:
//   node media_clients.mjs BASE_URL VISION_MODEL AUDIO_MODEL PNG_FILE WAV_FILE
// (BASE_URL like http://127.0.0.1:8080). Each call must get an answer whose prompt count is larger
// than the same call's without the image (the media is in the prompt, not dropped). Prints one JSON
// line with what it checked, and exits 1 with the reason on the first failure.
import Anthropic from "@anthropic-ai/sdk";
import { readFileSync } from "node:fs";
import { Ollama } from "ollama";
import OpenAI, { toFile } from "openai";

const [base, vision, audio, pngFile, wavFile] = process.argv.slice(2);
const TIMEOUT_MS = 120000;
const MAX_TOKENS = 4;
const QUESTION = "What is in this picture?";
const png = readFileSync(pngFile);
const wav = readFileSync(wavFile);
const pngB64 = png.toString("base64");
const dataUrl = `data:image/png;base64,${pngB64}`;

const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", timeout: TIMEOUT_MS, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: "unused", timeout: TIMEOUT_MS, maxRetries: 0 });
const ollama = new Ollama({ host: base });
const done = {};

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// An answer, and more prompt tokens with the media than without it.
function record(name, text, withMedia, without) {
  check(typeof text === "string", `${name}: an answer (${JSON.stringify(text)})`);
  check(withMedia > without, `${name}: prompt tokens with the media (${withMedia}) > without (${without})`);
  done[name] = { prompt_tokens: withMedia, text_only: without };
}

async function openaiChat() {
  const ask = (content) =>
    openai.chat.completions.create({
      model: vision,
      messages: [{ role: "user", content }],
      max_tokens: MAX_TOKENS,
      temperature: 0,
    });
  const r = await ask([
    { type: "text", text: QUESTION },
    { type: "image_url", image_url: { url: dataUrl } },
  ]);
  const plain = await ask([{ type: "text", text: QUESTION }]);
  record("openai-chat-image_url", r.choices[0].message.content, r.usage.prompt_tokens, plain.usage.prompt_tokens);
}

async function openaiResponses() {
  const ask = (content) =>
    openai.responses.create({
      model: vision,
      input: [{ role: "user", content }],
      max_output_tokens: MAX_TOKENS,
      temperature: 0,
    });
  const r = await ask([
    { type: "input_text", text: QUESTION },
    { type: "input_image", image_url: dataUrl },
  ]);
  const plain = await ask([{ type: "input_text", text: QUESTION }]);
  record("openai-responses-input_image", r.output_text, r.usage.input_tokens, plain.usage.input_tokens);
}

async function anthropicMessages() {
  const ask = (content) =>
    anthropic.messages.create({
      model: vision,
      max_tokens: MAX_TOKENS,
      temperature: 0,
      messages: [{ role: "user", content }],
    });
  const r = await ask([
    { type: "image", source: { type: "base64", media_type: "image/png", data: pngB64 } },
    { type: "text", text: QUESTION },
  ]);
  const plain = await ask([{ type: "text", text: QUESTION }]);
  const text = r.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  record("anthropic-messages-image", text, r.usage.input_tokens, plain.usage.input_tokens);
}

async function ollamaChat() {
  const ask = (images) =>
    ollama.chat({
      model: vision,
      messages: [{ role: "user", content: QUESTION, ...(images ? { images } : {}) }],
      options: { num_predict: MAX_TOKENS, temperature: 0 },
    });
  const r = await ask([new Uint8Array(png)]);
  const plain = await ask(null);
  record("ollama-chat-images", r.message.content, r.prompt_eval_count, plain.prompt_eval_count);
}

async function ollamaGenerate() {
  const ask = (images) =>
    ollama.generate({
      model: vision,
      prompt: QUESTION,
      ...(images ? { images } : {}),
      options: { num_predict: MAX_TOKENS, temperature: 0 },
    });
  const r = await ask([pngB64]);
  const plain = await ask(null);
  record("ollama-generate-images", r.response, r.prompt_eval_count, plain.prompt_eval_count);
}

async function openaiTranscription() {
  const r = await openai.audio.transcriptions.create({
    model: audio,
    file: await toFile(wav, "clip.wav", { type: "audio/wav" }),
  });
  const u = r.usage;
  check(u && u.type === "tokens", `transcription usage: ${JSON.stringify(u)}`);
  check(u.input_token_details.audio_tokens > 0, "transcription: audio tokens");
  record("openai-audio-transcriptions", r.text, u.input_tokens, u.input_token_details.text_tokens);
}

try {
  for (const step of [openaiChat, openaiResponses, anthropicMessages, ollamaChat, ollamaGenerate, openaiTranscription])
    await step();
  console.log(JSON.stringify({ ok: true, checked: done }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e?.stack ?? e), checked: done }));
  process.exit(1);
}
