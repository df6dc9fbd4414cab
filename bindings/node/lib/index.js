'use strict';
/**
 * sipp for Node.js: a local LLM runtime (libsipp, over llama.cpp) and sipp gateways, one client.
 *
 *   const { SippClient } = require('sipp');
 *   const client = new SippClient();
 *   const ep = await client.add('local-cpu', { kind: 'local', model: 'model.gguf', options: { backend: 'cpu' } });
 *   const q = client.query('Once upon a time', { endpoint: ep, maxTokens: 64 });
 *   for await (const piece of q.tokens) process.stdout.write(piece);
 *   const { text, finishReason, usage, stats } = await q.response;
 *   await client.close();
 *
 *   const wav = await require('sipp').speech('Hello there.', { format: 'wav' });   // flite: no model file
 *
 *   const { store } = require('sipp');
 *   await store.pull('hf://ORG/REPO/model.gguf');         // the local model store: list, pull, info
 *
 * The artifact (which llama.cpp backend modules the process loads) is chosen when this module is
 * loaded, from SIPP_NODE_BACKEND = auto | cpu | vulkan | cuda | metal (SIPP_ARTIFACT names an
 * artifact directory directly). An unknown value, or one that cannot run here, throws a SippError
 * listing the usable values; for an explicit backend the addon is loaded then, to ask libsipp
 * whether the backend can run (compiled and a device visible). With auto the addon is loaded when
 * the first local endpoint is added, so a gateway-only program never needs it.
 *
 * Nothing here blocks the event loop: model loads, embeddings and closes run on libuv's thread
 * pool, and each generation is read by a thread of its own that reports through a thread-safe
 * function (src/addon.c).
 *
 * The client model (add, query, chat, embed, ...; option checks, errors, the gateway endpoint) is
 * shared with the browser package: ES modules in bindings/web/ loaded with require() (lib/shared.js,
 * Node.js >= 20.19). This file adds what only Node has: local endpoints over the addon, the backend
 * selection and the store.
 */
const { shared } = require('./shared');
const { selectBackend, ENV } = require('./artifact');
const native = require('./native');
const { SippError, toSippError, invalid } = require('./errors');
const { Query } = require('./query');
const { ClientCore } = shared('client');
const { NODE_PROFILE } = require('./gateway');
const { LocalEndpoint } = require('./local');

const selection = selectBackend();
selection.decision = null;
if (selection.backend !== 'auto') {
  // An explicit backend must be usable here: fail now, with libsipp's reason and the usable names.
  const addon = (() => {
    try {
      return native.load();
    } catch (e) {
      throw new SippError(`${ENV}=${selection.backend} needs the sipp addon: ${e.message}`, 'backend_error');
    }
  })();
  native.initSync(selection.artifact);
  try {
    selection.decision = addon.backendDecide(selection.backend);
  } catch (e) {
    const names = ['auto', ...addon.backendsList().filter((b) => b.available).map((b) => b.name)];
    throw new SippError(`${ENV}=${selection.backend}: ${e.message}; usable here: ${names.join(', ')}`, 'backend_error');
  }
}

/** What SIPP_NODE_BACKEND chose: {backend, artifact, backends, source, decision}. */
function backendSelection() {
  return { ...selection };
}

/** Loads the addon if needed; resolves to {version, llamaRelease, llamaCommit, artifact, selection}. */
async function runtimeInfo() {
  const rt = await native.init(selection.artifact);
  return { ...rt, selection: backendSelection() };
}

class SippClient extends ClientCore {
  constructor() {
    super('model', NODE_PROFILE);
  }

  /** client.add(name, { kind: 'local', model, options }) loads a model in this process (off the event loop). */
  _openLocal(name, spec) {
    return LocalEndpoint.open(name, spec, selection);
  }

  async [Symbol.asyncDispose]() {
    await this.close();
  }
}

if (!Symbol.asyncDispose) delete SippClient.prototype[Symbol.asyncDispose];

const SPEECH_OPTIONS = ['model', 'voice', 'speed', 'format', 'mmproj', 'speaker', 'seed', 'sampleRate', 'language'];

/**
 * speech(input, { model = 'flite', voice, speed, format = 'wav', mmproj, speaker, seed, sampleRate, language })
 * resolves to a Buffer of encoded audio (wav, pcm: 24 kHz s16le, flac, mp3, opus), the bytes `sipp speak`
 * writes. flite needs no model file; a Qwen3-TTS / Pocket TTS backbone takes its mmproj. The voice is
 * loaded and the audio made on libuv's thread pool.
 */
async function speech(input, options = {}) {
  if (typeof input !== 'string') throw invalid('input must be a string');
  for (const k of Object.keys(options)) {
    if (!SPEECH_OPTIONS.includes(k)) throw invalid(`unknown speech option '${k}' (known: ${SPEECH_OPTIONS.join(', ')})`);
  }
  const { model = 'flite', ...rest } = options;
  try {
    await native.init(selection.artifact);
    return await native.load().speech(model, input, rest);
  } catch (e) {
    throw toSippError(e);
  }
}

/**
 * speech.stream(input, options) is speech() as an async iterator of Buffers: each sentence's encoded
 * audio as soon as it is spoken (a WAV's sizes are placeholders then, as ffmpeg writes one to a pipe).
 * Leaving the loop early (break, return, an exception) stops the speech.
 *
 *   for await (const chunk of speech.stream('Hello there. Goodbye!', { format: 'pcm' })) player.write(chunk);
 */
function speechStream(input, options = {}) {
  if (typeof input !== 'string') throw invalid('input must be a string');
  for (const k of Object.keys(options)) {
    if (!SPEECH_OPTIONS.includes(k)) throw invalid(`unknown speech option '${k}' (known: ${SPEECH_OPTIONS.join(', ')})`);
  }
  const { model = 'flite', ...rest } = options;
  const chunks = [];
  let ended = false;
  let failure = null;
  let wake = null;
  let handle = null;
  const onEvent = (err, chunk) => {
    if (err) failure = toSippError(err);
    if (chunk) chunks.push(chunk);
    else ended = true;
    if (wake) wake();
  };
  const start = async () => {
    await native.init(selection.artifact);
    handle = native.load().speechStream(model, input, rest, onEvent);
  };
  let started = null;
  return {
    [Symbol.asyncIterator]() { return this; },
    async next() {
      try {
        await (started = started || start());
      } catch (e) {
        throw toSippError(e);
      }
      while (!chunks.length && !ended) await new Promise((resolve) => { wake = resolve; });
      wake = null;
      if (chunks.length) return { value: chunks.shift(), done: false };
      if (failure) throw failure;
      return { value: undefined, done: true };
    },
    async return() {
      if (handle && !ended) native.load().speechCancel(handle);
      ended = true;
      chunks.length = 0;
      return { value: undefined, done: true };
    },
  };
}
speech.stream = speechStream;

exports.SippClient = SippClient;
exports.speech = speech;
exports.SippError = SippError;
exports.Query = Query;
exports.backendSelection = backendSelection;
exports.runtimeInfo = runtimeInfo;
exports.store = require('./store');
exports.transcribe = require('./transcribe').transcribe;
