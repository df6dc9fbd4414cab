// voice_loop.mjs: the voice loop through the official openai npm client only, against one `sipp serve`:
// flite speaks a question (audio.speech), the whisper kind transcribes it (audio.transcriptions), a chat
// model answers the transcript (chat.completions), and the tts kind speaks the answer (audio.speech).
// Usage: node voice_loop.mjs BASE_URL VOICE_MODEL WHISPER_MODEL CHAT_MODEL [SPEAKER_MODEL]
// Prints one JSON line with each step's result, and exits 1 with the reason on the first failure.
import OpenAI, { toFile } from "openai";

const [baseURL, voice, whisper, chat, speaker = voice] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", timeout: 300000, maxRetries: 0 });
const QUESTION = "What is the capital of France?";

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function wav(model, input) {
  const r = await client.audio.speech.create({ model, voice: "alloy", input, response_format: "wav" });
  const bytes = Buffer.from(await r.arrayBuffer());
  check(bytes.toString("latin1", 0, 4) === "RIFF", `${model} spoke a WAV`);
  check(bytes.length > 44 + 1000, `${model} spoke more than a header: ${bytes.length} bytes`);
  return bytes;
}

try {
  const question = await wav(voice, QUESTION);
  const heard = await client.audio.transcriptions.create({ model: whisper, file: await toFile(question, "question.wav") });
  check(typeof heard.text === "string", "a transcript");
  const reply = await client.chat.completions.create({
    model: chat,
    messages: [{ role: "user", content: heard.text.trim() || QUESTION }],
    max_tokens: 16,
    temperature: 0,
  });
  const answer = reply.choices[0].message.content ?? "";
  check(answer.trim().length > 0, `the chat answered: ${JSON.stringify(answer)}`);
  const spoken = await wav(speaker, answer);
  console.log(JSON.stringify({ ok: true, question: question.length, transcript: heard.text, answer, spoken: spoken.length }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
}
