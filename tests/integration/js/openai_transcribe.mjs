// openai_transcribe.mjs: the official openai npm client's audio.transcriptions and
// audio.translations against `sipp serve` with a whisper.cpp target. Usage:
//   node openai_transcribe.mjs BASE_URL MODEL CLIP_FILE [EXTRA_FIELDS_JSON]
// (EXTRA_FIELDS_JSON: more form fields for every call, e.g. whisper-server's {"beam_size": "1"})
// Prints one JSON line: every response format of both calls as the client returned it, and a
// streamed transcription's events; exits 1 with the reason on the first failure.
import { readFileSync } from "node:fs";
import OpenAI, { toFile } from "openai";

const [base, model, clipFile, extraJson] = process.argv.slice(2);
const extra = extraJson ? JSON.parse(extraJson) : {};
const TIMEOUT_MS = 300000;
const FORMATS = ["json", "text", "srt", "vtt", "verbose_json"];
const clip = readFileSync(clipFile);
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", timeout: TIMEOUT_MS, maxRetries: 0 });
const file = () => toFile(clip, "clip.wav", { type: "audio/wav" });

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function formats(api) {
  const out = {};
  for (const response_format of FORMATS) {
    const r = await openai.audio[api].create({ model, file: await file(), response_format, ...extra });
    check(r !== undefined && r !== null, `${api} ${response_format}: an answer`);
    out[response_format] = r;
  }
  return out;
}

async function streamed() {
  const stream = await openai.audio.transcriptions.create({ model, file: await file(), stream: true, ...extra });
  const deltas = [];
  let done = null;
  for await (const event of stream) {
    if (event.type === "transcript.text.delta") deltas.push(event.delta);
    else if (event.type === "transcript.text.done") done = event;
  }
  check(done !== null, "a transcript.text.done event");
  return { deltas, done };
}

async function badClip() {
  try {
    await openai.audio.transcriptions.create({ model, file: await toFile(Buffer.from("not audio at all"), "x.wav") });
  } catch (e) {
    return { status: e.status, message: e.message };
  }
  throw new Error("check failed: bytes that are not audio were accepted");
}

try {
  const result = {
    transcriptions: await formats("transcriptions"),
    translations: await formats("translations"),
    stream: await streamed(),
    bad: await badClip(),
  };
  console.log(JSON.stringify({ ok: true, ...result }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
}
