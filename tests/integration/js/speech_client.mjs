// speech_client.mjs: drives `sipp serve`'s /v1/audio/speech with the official openai npm client
// (audio.speech.create), as an application would: every response_format, and both stream formats.
// Usage: node speech_client.mjs BASE_URL MODEL [API_KEY]. Prints one JSON line with what it checked
// and the sizes it got, and exits 1 with the reason on the first failure.
import OpenAI from "openai";

const [baseURL, model, apiKey = "unused"] = process.argv.slice(2);
const TIMEOUT_MS = 120000;
const INPUT = "Hello from the speech route. This is the second sentence.";
const client = new OpenAI({ baseURL, apiKey, timeout: TIMEOUT_MS, maxRetries: 0 });
const done = [];
const sizes = {};

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

function ascii(bytes, start, n) {
  return Buffer.from(bytes.subarray(start, start + n)).toString("latin1");
}

// What each format's bytes start with.
const MAGIC = {
  wav: (b) => ascii(b, 0, 4) === "RIFF" && ascii(b, 8, 4) === "WAVE",
  flac: (b) => ascii(b, 0, 4) === "fLaC",
  mp3: (b) => ascii(b, 0, 3) === "ID3" || (b[0] === 0xff && (b[1] & 0xe0) === 0xe0),
  opus: (b) => ascii(b, 0, 4) === "OggS" && ascii(b, 28, 8) === "OpusHead",
  pcm: (b) => b.length % 2 === 0 && b.some((x) => x !== 0),
};

async function oneFormat(format) {
  const r = await client.audio.speech.create({ model, voice: "alloy", input: INPUT, response_format: format });
  const bytes = new Uint8Array(await r.arrayBuffer());
  check(bytes.length > 100, `${format}: ${bytes.length} bytes`);
  check(MAGIC[format](bytes), `${format}: the bytes start as ${format} does`);
  sizes[format] = bytes.length;
  done.push(format);
}

async function streamedAudio() {
  const r = await client.audio.speech.create({
    model, voice: "alloy", input: INPUT, response_format: "pcm", stream_format: "audio",
  });
  let n = 0;
  let chunks = 0;
  for await (const chunk of r.body) {
    n += chunk.length;
    chunks++;
  }
  check(n === sizes.pcm, `streamed pcm has the plain one's ${sizes.pcm} bytes: ${n}`);
  done.push("stream-audio");
  return chunks;
}

async function streamedSse() {
  const r = await client.audio.speech.create({
    model, voice: "alloy", input: INPUT, response_format: "pcm", stream_format: "sse",
  });
  const text = await r.text();
  const events = text.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => JSON.parse(e.slice(6)));
  check(events.length >= 2, `sse events: ${events.length}`);
  check(events.at(-1).type === "speech.audio.done", `the last event is speech.audio.done: ${events.at(-1).type}`);
  const deltas = events.slice(0, -1);
  check(deltas.every((e) => e.type === "speech.audio.delta"), "the others are speech.audio.delta");
  const n = deltas.reduce((sum, e) => sum + Buffer.from(e.audio, "base64").length, 0);
  check(n === sizes.pcm, `sse deltas decode to the plain pcm's ${sizes.pcm} bytes: ${n}`);
  done.push("stream-sse");
}

async function refusal() {
  try {
    await client.audio.speech.create({ model, voice: "nobody-here", input: INPUT });
    check(false, "an unknown voice is refused");
  } catch (e) {
    check(e.status === 400, `an unknown voice is a 400: ${e.status}`);
    check(String(e.message).includes("nobody-here"), `the refusal names the voice: ${e.message}`);
  }
  done.push("errors");
}

try {
  for (const f of ["wav", "pcm", "flac", "mp3", "opus"]) await oneFormat(f);
  const chunks = await streamedAudio();
  await streamedSse();
  await refusal();
  console.log(JSON.stringify({ ok: true, checked: done, sizes, chunks }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, checked: done, error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
}
