/*
 * voice.js: talking to a model and hearing it, with the gateway's speech routes.
 *
 *   Hold to talk   while the button (or Space/Enter on it) is held, the microphone is recorded
 *                  (MediaRecorder); on release the recording is decoded with the Web Audio API,
 *                  mixed to mono, resampled to 16 kHz (OfflineAudioContext) and encoded here as a
 *                  16-bit WAV, so the gateway's decoder never needs to read WebM or Opus. The WAV
 *                  goes to POST /v1/audio/transcriptions (multipart, OpenAI's shape) and the
 *                  transcript is sent as the next message.
 *   Read aloud     an answer (after it ends, or with its Read aloud button) goes to
 *                  POST /v1/audio/speech ({model, input, response_format: "wav"}) and is played.
 *   Hands-free     after each answer (and its reading) the page listens again: it records until
 *                  SILENCE_MS of quiet after speech (or MAX_TURN_MS), then sends as Hold to talk does;
 *                  a turn whose transcript is empty is listened to again at once, and a turn with no
 *                  speech at all (NO_SPEECH_MS) or a failed transcription pauses it.
 *
 * Which target does what comes from /v1/models: "transcription" in capabilities (a whisper
 * target) transcribes, else a model that takes "audio" (llama-server's way: a chat with the clip);
 * "speech" in capabilities, or recipe "tts" / "flite", speaks. Each control is hidden when no target
 * offers it. Nothing recorded leaves the browser except in the request to this gateway.
 */

const WAV_RATE = 16000;
const RECORD_SLICE_MS = 250;
const SILENCE_MS = 1200;
const MAX_TURN_MS = 20000;
const NO_SPEECH_MS = 8000;
const SPEECH_RMS = 0.02; // the level (of full scale) that counts as someone speaking
const LEVEL_EVERY_MS = 100;

const voice = {
  talk: document.getElementById('talk'),
  state: document.getElementById('voice-state'),
  fields: document.getElementById('voice-fields'),
  readAloud: document.getElementById('read-aloud'),
  handsFreeField: document.getElementById('hands-free-field'),
  handsFree: document.getElementById('hands-free'),
  rec: null,      // the recording in progress: {stream, recorder, chunks, done}
  playing: null,  // the Audio being played
};

function modelsWith(test) {
  return [...state.models.values()].filter(test).map((m) => m.id);
}

/* The target that transcribes: a whisper target, else the selected model if it takes audio, else any that does. */
function transcriber() {
  const whisper = modelsWith((m) => (m.capabilities || []).includes('transcription'));
  if (whisper.length) return whisper[0];
  if (takesAudio(ui.target.value)) return ui.target.value;
  return modelsWith((m) => (m.capabilities || []).includes('audio'))[0] || '';
}

function speaker() {
  const speaks = (m) => (m.capabilities || []).includes('speech') || m.recipe === 'tts' || m.recipe === 'flite' ||
    (m.sipp && (m.sipp.recipe === 'tts' || m.sipp.recipe === 'flite'));
  return modelsWith(speaks)[0] || '';
}

function voiceSays(text) {
  voice.state.textContent = text;
  voice.state.hidden = !text;
}

/* Shows the controls the gateway's targets allow (called when the model list or selection changes). */
function showVoice() {
  const canHear = Boolean(transcriber());
  const canSpeak = Boolean(speaker());
  voice.talk.hidden = !canHear;
  voice.fields.hidden = !canSpeak && !canHear;
  voice.readAloud.parentElement.hidden = !canSpeak;
  voice.handsFreeField.hidden = !canHear;
  for (const b of document.querySelectorAll('button.speak')) b.hidden = !canSpeak;
}

/* ---- recording and WAV --------------------------------------------------------------------- */

async function startRecording() {
  if (voice.rec) return voice.rec;
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const recorder = new MediaRecorder(stream);
  const chunks = [];
  recorder.ondataavailable = (e) => e.data.size && chunks.push(e.data);
  const done = new Promise((resolve) => (recorder.onstop = resolve));
  recorder.start(RECORD_SLICE_MS);
  voice.rec = { stream, recorder, chunks, done };
  voice.talk.setAttribute('aria-pressed', 'true');
  voiceSays('Listening…');
  return voice.rec;
}

/* Stops the recording and resolves with its audio (a Blob in the recorder's format), or null. */
async function stopRecording() {
  const rec = voice.rec;
  if (!rec) return null;
  voice.rec = null;
  if (rec.recorder.state !== 'inactive') rec.recorder.stop();
  await rec.done;
  rec.stream.getTracks().forEach((t) => t.stop());
  voice.talk.setAttribute('aria-pressed', 'false');
  return rec.chunks.length ? new Blob(rec.chunks, { type: rec.recorder.mimeType }) : null;
}

/* Mono 16-bit PCM WAV of the samples (-1..1) at rate. */
function encodeWav(samples, rate) {
  const buf = new ArrayBuffer(44 + 2 * samples.length);
  const v = new DataView(buf);
  const text = (at, s) => [...s].forEach((c, i) => v.setUint8(at + i, c.charCodeAt(0)));
  text(0, 'RIFF');
  v.setUint32(4, 36 + 2 * samples.length, true);
  text(8, 'WAVE');
  text(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true); // PCM
  v.setUint16(22, 1, true); // mono
  v.setUint32(24, rate, true);
  v.setUint32(28, 2 * rate, true);
  v.setUint16(32, 2, true);
  v.setUint16(34, 16, true);
  text(36, 'data');
  v.setUint32(40, 2 * samples.length, true);
  for (let i = 0; i < samples.length; i++) v.setInt16(44 + 2 * i, Math.max(-1, Math.min(1, samples[i])) * 0x7fff, true);
  return new Blob([buf], { type: 'audio/wav' });
}

/* A recording (any format the browser decodes) as a 16 kHz mono WAV. */
async function toWav(blob) {
  const ctx = new AudioContext();
  let decoded;
  try {
    decoded = await ctx.decodeAudioData(await blob.arrayBuffer());
  } finally {
    ctx.close();
  }
  const off = new OfflineAudioContext(1, Math.max(1, Math.ceil(decoded.duration * WAV_RATE)), WAV_RATE);
  const src = off.createBufferSource();
  src.buffer = decoded;
  src.connect(off.destination);
  src.start();
  const mono = await off.startRendering();
  return encodeWav(mono.getChannelData(0), WAV_RATE);
}

/* ---- the gateway's speech routes ------------------------------------------------------------ */

async function transcribe(wav) {
  const form = new FormData();
  form.append('file', wav, 'speech.wav');
  form.append('model', transcriber());
  form.append('response_format', 'json');
  const res = await fetch('/v1/audio/transcriptions', { method: 'POST', headers: authHeaders(), body: form });
  if (!res.ok) throw new Error(await errorMessage(res));
  return ((await res.json()).text || '').trim();
}

/* What a person would read out of Markdown: no code blocks, no markup characters. */
function speakable(text) {
  return text.replace(/```[\s\S]*?```/g, ' (code) ').replace(/[*_`#>|]+/g, ' ').replace(/\s+/g, ' ').trim();
}

/* Speaks text with the speaking target; resolves when it has been played (or failed, said so). */
async function speak(text) {
  const model = speaker();
  const input = speakable(text);
  if (!model || !input) return;
  if (voice.playing) voice.playing.pause();
  try {
    const res = await sendJson('/v1/audio/speech', { model, input, response_format: 'wav' });
    if (!res.ok) throw new Error(await errorMessage(res));
    const url = URL.createObjectURL(await res.blob());
    const audio = new Audio(url);
    voice.playing = audio;
    await new Promise((resolve) => {
      audio.onended = audio.onerror = audio.onpause = resolve;
      audio.play().catch(resolve);
    });
    URL.revokeObjectURL(url);
  } catch (err) {
    voiceSays(`Cannot read aloud: ${err.message}`);
  }
}

function speakButton(msg) {
  const b = button('Read aloud', 'speak', () => speak(msg.content || ''));
  b.classList.add('speak');
  b.hidden = !speaker();
  return b;
}

/* ---- turns ---------------------------------------------------------------------------------- */

/* A finished recording: transcribed and sent as the next message. Resolves with what happened:
 * "sent", "empty" (nothing heard in it) or "failed". */
async function sendRecording(blob) {
  if (!blob) {
    voiceSays('Nothing was recorded.');
    return 'empty';
  }
  voiceSays('Transcribing…');
  try {
    const text = await transcribe(await toWav(blob));
    if (!text) {
      voiceSays('The transcript is empty.');
      return 'empty';
    }
    voiceSays(`Heard: ${text}`);
    if (state.controller) return 'failed';
    send(text);
    return 'sent';
  } catch (err) {
    voiceSays(`Cannot transcribe: ${err.message}`);
    return 'failed';
  }
}

async function talkStart(event) {
  if (event.type === 'keydown' && (event.repeat || (event.key !== ' ' && event.key !== 'Enter'))) return;
  event.preventDefault();
  try {
    await startRecording();
  } catch (err) {
    voiceSays(`Cannot record: ${err.message}`);
  }
}

async function talkEnd(event) {
  if (event.type === 'keyup' && event.key !== ' ' && event.key !== 'Enter') return;
  if (!voice.rec) return;
  event.preventDefault();
  sendRecording(await stopRecording());
}

/* Hands-free: records one turn, ended by quiet after speech, and sends it. */
async function listenTurn() {
  let rec;
  try {
    rec = await startRecording();
  } catch (err) {
    voiceSays(`Cannot record: ${err.message}`);
    return;
  }
  const ctx = new AudioContext();
  const analyser = ctx.createAnalyser();
  ctx.createMediaStreamSource(rec.stream).connect(analyser);
  const samples = new Float32Array(analyser.fftSize);
  const t0 = performance.now();
  let spoke = 0;
  let quietSince = t0;
  await new Promise((resolve) => {
    const timer = setInterval(() => {
      analyser.getFloatTimeDomainData(samples);
      const rms = Math.sqrt(samples.reduce((s, x) => s + x * x, 0) / samples.length);
      const now = performance.now();
      if (rms > SPEECH_RMS) {
        spoke = spoke || now;
        quietSince = now;
      }
      const over = (spoke && now - quietSince > SILENCE_MS) || now - t0 > MAX_TURN_MS ||
        (!spoke && now - t0 > NO_SPEECH_MS) || !voice.handsFree.checked || voice.rec !== rec;
      if (over) {
        clearInterval(timer);
        resolve();
      }
    }, LEVEL_EVERY_MS);
  });
  ctx.close();
  const blob = await stopRecording();
  if (!spoke || !voice.handsFree.checked) {
    voiceSays(voice.handsFree.checked ? 'Heard nothing; hands-free is paused.' : '');
    return;
  }
  // A sent turn listens again when its answer ends (answered); a turn with no words in it at once.
  if ((await sendRecording(blob)) === 'empty' && voice.handsFree.checked) listenTurn();
}

/* Called by chat.js when an answer has ended: read it aloud, then listen again when hands-free. */
async function answered(answer) {
  if (voice.readAloud.checked && speaker()) await speak(answer.content || '');
  if (voice.handsFree.checked && transcriber()) listenTurn();
}

function wireVoice() {
  voice.talk.addEventListener('pointerdown', talkStart);
  voice.talk.addEventListener('pointerup', talkEnd);
  voice.talk.addEventListener('pointerleave', talkEnd);
  voice.talk.addEventListener('keydown', talkStart);
  voice.talk.addEventListener('keyup', talkEnd);
  voice.talk.addEventListener('click', (e) => e.preventDefault()); // a form button must not submit
  voice.handsFree.addEventListener('change', () => {
    if (voice.handsFree.checked && !state.controller) listenTurn();
  });
}
