/*
 * worker.js: the Web Worker that runs sipp's browser runtime (build/web/sipp-mt.js or sipp-st.js).
 *
 * A classic worker (Emscripten 3.1.6's pthread build loads its own workers with importScripts, so
 * the runtime cannot be an ES module). The page's SippClient talks to it with messages:
 *
 *   {id, op, ...}                  a call; answered by {id, ok: true, result} or {id, ok: false, error}
 *   {stream, piece}                text of a running request, as each engine step releases it
 *   {stream, end}                  its end: finish reason, status, error and stats
 *
 * The engines are stepped (sipp_engine_new_stepped): this worker runs a step, posts the text that
 * step released, and yields to its event loop before the next one, so a cancel message is handled
 * between two steps and a cancelled request ends within one token. One module serves every local
 * endpoint of a client; each endpoint has its own model and engine in it.
 */
'use strict';

const READ_CAP = 1 << 16;
const READ_WINDOW = 1 << 20; // bytes a model file is read ahead by (see bufferModelReads)

let M = null;          // the Emscripten module
let api = null;        // cwrap'ed functions
let runtime = null;    // what init reported
const streams = new Map(); // stream id -> {req, engine}
let nextMount = 0;
let looping = false;

// A zero-delay yield: setTimeout is clamped to 4 ms when nested, a MessageChannel is not.
const tick = new MessageChannel();
tick.port1.onmessage = () => loop();
const yieldThen = () => tick.port2.postMessage(0);

function wrap(Module) {
  const f = (name, ret, args) => Module.cwrap(name, ret, args);
  return {
    error: f('sw_error', 'string', []),
    init: f('sw_init', 'number', ['number']),
    runtimeJson: f('sw_runtime_json', 'string', []),
    decide: f('sw_backend_decide', 'string', ['string']),
    modelLoad: f('sw_model_load', 'number', ['string', 'string']),
    modelFree: f('sw_model_free', null, ['number']),
    modelJson: f('sw_model_json', 'string', ['number']),
    engineNew: f('sw_engine_new', 'number', ['number', 'number', 'number', 'number', 'number', 'number']),
    engineFree: f('sw_engine_free', null, ['number']),
    step: f('sw_step', 'number', ['number']),
    reqBegin: f('sw_req_begin', null, []),
    reqPrompt: f('sw_req_prompt', null, ['string']),
    reqMessage: f('sw_req_message', 'number', ['string', 'string']),
    reqStop: f('sw_req_stop', 'number', ['string']),
    reqSampling: f('sw_req_sampling', null, ['number', 'number', 'number', 'number', 'number', 'number']),
    reqLimits: f('sw_req_limits', null, ['number', 'number', 'number']),
    reqContextKey: f('sw_req_context_key', null, ['string']),
    reqTemplate: f('sw_req_template', null, ['string']),
    reqSubmit: f('sw_req_submit', 'number', ['number']),
    reqRead: f('sw_req_read', 'number', ['number', 'number', 'number', 'number']),
    reqCancel: f('sw_req_cancel', null, ['number']),
    reqFree: f('sw_req_free', null, ['number']),
    reqResult: f('sw_req_result_json', 'string', ['number']),
    embedText: f('sw_embed_text', 'number', ['string']),
    embedRun: f('sw_embed_run', 'number', ['number', 'number']),
    embedDim: f('sw_embed_dim', 'number', []),
    embedTokens: f('sw_embed_tokens', 'number', []),
    evalLogits: f('sw_eval_logits', 'number', ['number', 'number', 'number', 'number', 'number']),
    reqTokens: f('sw_req_tokens', 'number', ['number', 'number']),
    free: f('sw_free', null, ['number']),
  };
}

class CallError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}

const fail = (message, code = 'internal_error') => { throw new CallError(message, code); };

// The status name of a failed sipp call, from the message's own words where the C API gives no code.
function codeOf(message) {
  if (/not a GGUF|architecture|tensor|model '.*'/.test(message)) return 'model_error';
  if (/no such file|not found/i.test(message)) return 'not_found';
  if (/context/.test(message) && /holds|full/.test(message)) return 'context_full';
  if (/queue is full/.test(message)) return 'busy';
  return 'invalid_argument';
}

// A model file is a Blob mounted with WORKERFS, whose every read is one FileReaderSync call on a
// slice: tens of microseconds each. Reading a GGUF header is hundreds of thousands of small reads
// (a 150k-token vocabulary is two per token), which took 25 s for a model native sipp loads in
// 0.4 s. Small reads are served from a window of READ_WINDOW bytes read ahead in one call; large
// ones (the tensors) go straight to the Blob as before. Each open file has its window.
function bufferModelReads(fs) {
  const plainRead = fs.stream_ops.read;
  const windows = new WeakMap(); // stream -> { start, bytes }
  fs.stream_ops.read = (stream, buffer, offset, length, position) => {
    const size = stream.node.size;
    if (length >= READ_WINDOW || position >= size) return plainRead(stream, buffer, offset, length, position);
    let w = windows.get(stream);
    if (!w || position < w.start || position + length > w.start + w.bytes.length) {
      const end = Math.min(size, position + READ_WINDOW);
      w = { start: position, bytes: new Uint8Array(fs.reader.readAsArrayBuffer(stream.node.contents.slice(position, end))) };
      windows.set(stream, w);
    }
    const n = Math.min(length, w.start + w.bytes.length - position);
    buffer.set(w.bytes.subarray(position - w.start, position - w.start + n), offset);
    return n;
  };
}

const ops = {
  async init({ runtimeUrl, variant, threads, logLevel }) {
    const script = `${runtimeUrl}sipp-${variant}.js`;
    importScripts(script);
    M = await self.createSippRuntime({
      sippPoolSize: variant === 'mt' ? Math.max(2, 2 * threads) : 0,
      locateFile: (p) => runtimeUrl + p,
      mainScriptUrlOrBlob: script,
      print: logLevel ? (t) => console.log(t) : () => {},
      printErr: logLevel ? (t) => console.warn(t) : () => {},
    });
    bufferModelReads(M.WORKERFS);
    api = wrap(M);
    if (api.init(logLevel || 0) !== 0) fail(api.error(), 'backend_error');
    runtime = { ...JSON.parse(api.runtimeJson()), variant, threads };
    return runtime;
  },

  decide({ backend }) {
    const d = api.decide(backend);
    if (d === null) fail(api.error(), 'backend_error');
    return JSON.parse(d);
  },

  load({ blob, fileName, backend, ctxSize, parallel, threads, batchSize, embeddings }) {
    const dir = `/models/${nextMount++}`;
    M.FS.mkdirTree(dir);
    M.FS.mount(M.WORKERFS, { blobs: [{ name: fileName, data: blob }] }, dir);
    const path = `${dir}/${fileName}`;
    const model = api.modelLoad(path, backend);
    if (!model) {
      const msg = api.error();
      M.FS.unmount(dir);
      fail(msg, codeOf(msg));
    }
    const engine = api.engineNew(model, ctxSize, parallel, threads, batchSize, embeddings ? 1 : 0);
    if (!engine) {
      const msg = api.error();
      api.modelFree(model);
      M.FS.unmount(dir);
      fail(msg, /memory|context/.test(msg) ? 'no_memory' : codeOf(msg));
    }
    const desc = JSON.parse(api.modelJson(model));
    return { model, engine, dir, ...desc };
  },

  unload({ model, engine, dir }) {
    for (const [id, s] of streams) {
      if (s.engine !== engine) continue;
      api.reqCancel(s.req);
    }
    finishStreams(engine);
    api.engineFree(engine);
    api.modelFree(model);
    try { M.FS.unmount(dir); } catch {}
    return true;
  },

  submit({ stream, engine, prompt, messages, tokens, o }) {
    api.reqBegin();
    if (tokens) {
      withInts(tokens, (ptr) => { if (!api.reqTokens(ptr, tokens.length)) fail(api.error(), 'no_memory'); });
    } else if (messages) {
      for (const m of messages) if (!api.reqMessage(m.role, m.content)) fail(api.error(), 'invalid_argument');
    } else {
      api.reqPrompt(prompt);
    }
    for (const s of o.stop || []) if (!api.reqStop(s)) fail(api.error(), 'invalid_argument');
    const n = (v) => (v === undefined ? NaN : v); // NaN: libsipp's default
    api.reqSampling(n(o.temperature), n(o.topK), n(o.topP), n(o.minP), n(o.repeatPenalty), n(o.seed));
    api.reqLimits(n(o.maxTokens), o.ignoreEos ? 1 : 0, o.timeoutMs || 0);
    if (o.contextKey !== undefined) api.reqContextKey(o.contextKey);
    if (o.chatTemplate !== undefined) api.reqTemplate(o.chatTemplate);
    const req = api.reqSubmit(engine);
    if (!req) {
      const msg = api.error();
      fail(msg, codeOf(msg));
    }
    // posted/postedAtCancel: how many pieces went out, and how many had when a cancel came in, so
    // that the end can say how many steps the cancel took to act (piecesAfterCancel).
    streams.set(stream, { req, engine, posted: 0, postedAtCancel: null });
    if (!looping) {
      looping = true;
      yieldThen();
    }
    return true;
  },

  cancel({ stream }) {
    const s = streams.get(stream);
    if (s) {
      if (s.postedAtCancel === null) s.postedAtCancel = s.posted;
      api.reqCancel(s.req);
    }
    return true;
  },

  embed({ engine, texts, normalize }) {
    for (const t of texts) if (!api.embedText(t)) fail(api.error(), 'invalid_argument');
    const ptr = api.embedRun(engine, normalize ? 1 : 0);
    if (!ptr) {
      const msg = api.error();
      fail(msg, /pooling|embedding/.test(msg) ? 'model_error' : codeOf(msg));
    }
    const dim = api.embedDim();
    const flat = new Float32Array(M.HEAPF32.buffer, ptr, dim * texts.length).slice();
    const vectors = [];
    for (let i = 0; i < texts.length; i++) vectors.push(Array.from(flat.subarray(i * dim, (i + 1) * dim)));
    return { vectors, tokens: api.embedTokens() };
  },

  // Teacher-forced logits of token ids (sipp verify): n rows of nVocab floats, batched or incremental.
  logits({ model, tokens, incremental, threads, nVocab }) {
    return withInts(tokens, (ptr) => {
      const lp = api.evalLogits(model, ptr, tokens.length, incremental ? 1 : 0, threads);
      if (!lp) fail(api.error(), 'internal_error');
      const logits = new Float32Array(M.HEAPF32.buffer, lp, tokens.length * nVocab).slice();
      api.free(lp);
      return logits;
    });
  },
};

// Calls fn with the ints copied into the module's memory, and frees them after.
function withInts(ints, fn) {
  const ptr = M._malloc(Math.max(1, ints.length) * 4);
  try {
    M.HEAP32.set(ints, ptr >> 2);
    return fn(ptr);
  } finally {
    M._free(ptr);
  }
}

// Posts what each running request has released; ends those that finished.
function drain(id, s, buf, finPtr) {
  for (;;) {
    const n = api.reqRead(s.req, buf, READ_CAP, finPtr);
    if (n > 0) {
      s.posted++;
      self.postMessage({ stream: id, piece: M.UTF8ToString(buf, n) });
    }
    if (M.HEAP32[finPtr >> 2]) {
      const end = JSON.parse(api.reqResult(s.req));
      end.stats.piecesAfterCancel = s.postedAtCancel === null ? null : s.posted - s.postedAtCancel;
      api.reqFree(s.req);
      streams.delete(id);
      self.postMessage({ stream: id, end });
      return;
    }
    if (n === 0) return;
  }
}

function finishStreams(onlyEngine) {
  const buf = M._malloc(READ_CAP + 4);
  const finPtr = buf + READ_CAP;
  try {
    for (const [id, s] of [...streams]) {
      if (onlyEngine !== undefined && s.engine !== onlyEngine) continue;
      drain(id, s, buf, finPtr);
    }
  } finally {
    M._free(buf);
  }
}

function loop() {
  const engines = new Set([...streams.values()].map((s) => s.engine));
  for (const e of engines) api.step(e);
  finishStreams();
  if (streams.size) yieldThen();
  else looping = false;
}

self.onmessage = async (ev) => {
  const { id, op, ...args } = ev.data;
  try {
    if (!ops[op]) fail(`unknown worker call '${op}'`);
    if (op !== 'init' && !api) fail('the runtime is not initialised', 'closed');
    const result = await ops[op](args);
    self.postMessage({ id, ok: true, result });
  } catch (e) {
    self.postMessage({ id, ok: false, error: { message: e.message || String(e), code: e.code || 'internal_error' } });
  }
};
