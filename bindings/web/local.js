/**
 * local.js: local endpoints, a model running in this page's Web Worker (worker.js).
 *
 * RuntimeHost owns the worker and the WebAssembly build in it: the pthread build (sipp-mt) when
 * the page is cross-origin isolated, since only then does the browser give SharedArrayBuffer,
 * else the single-thread build (sipp-st); the choice and its reason are reported. Calls are
 * messages with an id; a generation is a stream of {piece} messages and one {end}.
 *
 * Backends, honestly: this runtime is libsipp's CPU path in WebAssembly. 'webgpu' fails with the
 * missing half named (ggml's WebGPU backend is not compiled in: Debian's Emscripten 3.1.6 cannot
 * build it, it needs Emscripten >= 4.0.10 with the emdawnwebgpu port) and with what the browser
 * itself offers (an adapter or none, shader-f16 or not), so a user knows which half to fix.
 * 'auto' asks libsipp's own policy, which picks cpu and says why.
 */
import { SippError, toSippError, invalid } from './errors.js';
import { Query } from './query.js';
import { chatLibraryOption, toolMessage } from './options.js';

const BROWSER_BACKENDS = ['auto', 'cpu', 'webgpu'];
/** llama.cpp's logging in the browser console: sipp_log_level's names, in its order. */
export const LOG_LEVELS = ['quiet', 'error', 'warn', 'info', 'debug'];
const LOCAL_OPTIONS = ['backend', 'ctxSize', 'parallel', 'threads', 'batchSize', 'embeddings', 'runtime'];
/* What the runtime's chat layer is, from the module itself (sw_runtime_json's chatLibrary). */
export function chatCapabilities(rt) {
  return rt.chatLibrary
    ? { library: true, templates: 'jinja (llama.cpp common chat)', tools: true, responseFormat: true, grammar: true }
    : { library: false, templates: "built-in (llama_chat_apply_template: the model's template if llama.cpp knows it)",
      tools: false, responseFormat: false, grammar: false,
      detail: "this browser runtime is built without llama.cpp's chat library (it has no WebAssembly build here): chats are "
        + 'rendered with the built-in templates, and tools, response_format, JSON schemas, grammars and reasoning '
        + 'options are refused' };
}

const WEBGPU_BUILD = 'ggml-webgpu is not compiled into this browser runtime: it was built with Debian\'s Emscripten '
  + '3.1.6, and ggml\'s WebGPU backend needs Emscripten >= 4.0.10 with the emdawnwebgpu port (see bindings/web/README.md, '
  + '"WebGPU build"); use backend \'cpu\' or \'auto\'';

/** What the browser offers for WebGPU: { adapter, isFallbackAdapter, shaderF16, description }. */
export async function probeWebGpu() {
  const out = { adapter: false, isFallbackAdapter: null, shaderF16: false, description: null };
  if (!globalThis.navigator || !navigator.gpu) return { ...out, description: 'navigator.gpu is absent' };
  try {
    const a = await navigator.gpu.requestAdapter();
    if (!a) return { ...out, description: 'requestAdapter() returned no adapter' };
    const info = a.info || {};
    out.adapter = true;
    out.isFallbackAdapter = info.isFallbackAdapter ?? a.isFallbackAdapter ?? null;
    out.shaderF16 = a.features.has('shader-f16');
    out.description = [info.vendor, info.architecture, info.description].filter(Boolean).join(' ') || 'unnamed adapter';
  } catch (e) {
    out.description = `requestAdapter() failed: ${e.message}`;
  }
  return out;
}

export function describeWebGpu(gpu) {
  if (!gpu.adapter) return `this browser exposes no WebGPU adapter (${gpu.description})`;
  return `this browser exposes a WebGPU adapter (${gpu.description}${gpu.isFallbackAdapter ? ', a fallback adapter' : ''}) `
    + `${gpu.shaderF16 ? 'with' : 'without'} shader-f16${gpu.shaderF16 ? '' : ', which ggml-webgpu requires'}`;
}

/** The worker and the WebAssembly build it runs; one per client, started by the first local add. */
export class RuntimeHost {
  constructor({ runtimeUrl, workerUrl, build, threads, logLevel }) {
    this.logLevel = LOG_LEVELS.indexOf(logLevel || 'quiet');
    const isolated = globalThis.crossOriginIsolated === true;
    if (build === 'pthreads' && !isolated) {
      throw invalid("build 'pthreads' needs a cross-origin-isolated page (headers Cross-Origin-Opener-Policy: same-origin "
        + "and Cross-Origin-Embedder-Policy: require-corp), which this one is not; use build 'auto' or 'single'");
    }
    const mt = build === 'pthreads' || (build === 'auto' && isolated);
    this.variant = mt ? 'mt' : 'st';
    this.reason = build !== 'auto' ? `requested ${build}`
      : isolated ? 'the page is cross-origin isolated, so SharedArrayBuffer and WebAssembly threads are available'
        : 'the page is not cross-origin isolated (no COOP/COEP headers), so there is no SharedArrayBuffer';
    const cores = (globalThis.navigator && navigator.hardwareConcurrency) || 1;
    this.threads = mt ? (threads || cores) : 1;
    this.runtimeUrl = runtimeUrl;
    this.workerUrl = workerUrl;
    this._calls = new Map();
    this._streams = new Map();
    this._nextId = 1;
    this._ready = null;
  }

  /** { build: 'pthreads' | 'single', variant, threads, reason, version, llamaRelease, llamaCommit } */
  start() {
    if (!this._ready) {
      this._worker = new Worker(this.workerUrl);
      this._worker.onmessage = (ev) => this._onMessage(ev.data);
      this._worker.onerror = (ev) => {
        const err = new SippError(`the sipp worker failed: ${ev.message || 'it could not be loaded'} (${this.workerUrl})`, 'internal_error');
        for (const c of this._calls.values()) c.reject(err);
        this._calls.clear();
      };
      this._ready = this.call('init', { runtimeUrl: this.runtimeUrl, variant: this.variant, threads: this.threads,
        logLevel: this.logLevel })
        .then((rt) => ({ ...rt, build: this.variant === 'mt' ? 'pthreads' : 'single', reason: this.reason }));
    }
    return this._ready;
  }

  call(op, args = {}, transfer = []) {
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      this._calls.set(id, { resolve, reject });
      this._worker.postMessage({ id, op, ...args }, transfer);
    });
  }

  stream(handler) {
    const id = `s${this._nextId++}`;
    this._streams.set(id, handler);
    return id;
  }

  _onMessage(msg) {
    if (msg.stream !== undefined) {
      const h = this._streams.get(msg.stream);
      if (!h) return;
      if (msg.end) {
        this._streams.delete(msg.stream);
        h.end(msg.end);
      } else {
        h.piece(msg.piece);
      }
      return;
    }
    const c = this._calls.get(msg.id);
    if (!c) return;
    this._calls.delete(msg.id);
    if (msg.ok) c.resolve(msg.result);
    else c.reject(new SippError(msg.error.message, msg.error.code));
  }

  terminate() {
    if (this._worker) this._worker.terminate();
    const err = new SippError('the client was closed', 'closed');
    for (const c of this._calls.values()) c.reject(err);
    this._calls.clear();
    for (const h of this._streams.values()) h.fail(err);
    this._streams.clear();
  }
}

function checkLocalOptions(options, host) {
  const o = options || {};
  if (typeof o !== 'object') throw invalid(`options must be an object such as { backend: 'cpu' }, not ${typeof o}`);
  for (const [k, v] of Object.entries(o)) {
    if (!LOCAL_OPTIONS.includes(k)) throw invalid(`unknown local option '${k}' (known: ${LOCAL_OPTIONS.join(', ')})`);
    if (v === undefined || v === null) continue;
    if (k === 'backend') {
      if (!BROWSER_BACKENDS.includes(v)) {
        throw invalid(`backend ${JSON.stringify(v)} is not a browser backend; use one of ${BROWSER_BACKENDS.join(', ')}`);
      }
    } else if (k === 'embeddings') {
      if (typeof v !== 'boolean') throw invalid('options.embeddings must be true or false');
    } else if (k === 'runtime') {
      // The shape of the example, { runtime: { context: { n_ctx } } }: another name for ctxSize.
      const keys = Object.keys(v || {});
      const ctx = v && v.context;
      if (keys.some((x) => x !== 'context') || !ctx || Object.keys(ctx).some((x) => x !== 'n_ctx')) {
        throw invalid('options.runtime takes only { context: { n_ctx } }; every other setting has its own option');
      }
    } else if (!Number.isInteger(v) || v < 0) {
      throw invalid(`options.${k} must be an integer >= 0, not ${JSON.stringify(v)}`);
    }
  }
  let ctxSize = o.ctxSize;
  if (o.runtime) {
    const n = o.runtime.context.n_ctx;
    if (!Number.isInteger(n) || n < 0) throw invalid(`options.runtime.context.n_ctx must be an integer >= 0, not ${JSON.stringify(n)}`);
    if (ctxSize !== undefined && ctxSize !== n) throw invalid(`options.ctxSize ${ctxSize} and runtime.context.n_ctx ${n} disagree; give one`);
    ctxSize = n;
  }
  if (o.threads !== undefined && o.threads > host.threads) {
    throw invalid(host.variant === 'st'
      ? `options.threads ${o.threads} needs the pthread build, and this page runs the single-thread one (${host.reason})`
      : `options.threads ${o.threads} is above the ${host.threads} threads this client's runtime was started with; pass new SippClient({ threads })`);
  }
  return { ...o, ctxSize, backend: o.backend || 'auto' };
}

/** A model's bytes from a URL (cached in OPFS), a File or a Blob: { blob, fileName, cacheKey }. */
async function openSource(spec, cache) {
  const src = spec.source;
  if (typeof Blob !== 'undefined' && src instanceof Blob) {
    if (spec.sha256 !== undefined) throw invalid('sha256 checks a download; a File or Blob source is used as it is');
    return { blob: src, fileName: (src.name || 'model.gguf').replace(/[/\\]/g, '_'), cacheKey: null };
  }
  if (typeof src !== 'string' || !src) {
    throw invalid(`a local endpoint needs source: a URL, a File or a Blob of a .gguf model, got ${JSON.stringify(src)}`);
  }
  const url = new URL(src, globalThis.location ? location.href : undefined).href;
  const headers = spec.token ? { Authorization: `Bearer ${spec.token}` } : undefined;
  const got = await cache.open(url, { sha256: spec.sha256, onProgress: spec.onProgress, headers });
  return { blob: got.file, fileName: `${got.key}.gguf`, cacheKey: got.key, fromCache: got.cached };
}

export class LocalEndpoint {
  constructor(name, host, loaded, source, runtime) {
    this.name = name;
    this.kind = 'local';
    /** What the load decided: { backend, reason, devices, gpuLayers }. */
    this.backend = loaded.backend;
    /** The model's shape: { architecture, description, nParams, nEmbd, nLayer, nVocab, ... }. */
    this.info = loaded.info;
    /** The WebAssembly build and threads this endpoint runs on. */
    this.runtime = { build: runtime.build, threads: loaded.threads, reason: runtime.reason, chatLibrary: !!runtime.chatLibrary };
    /** Where the model came from: { cacheKey, fromCache } (cacheKey null for a File or Blob). */
    this.source = source;
    this._host = host;
    this._h = { model: loaded.model, engine: loaded.engine, dir: loaded.dir };
    this._closed = false;
  }

  static async open(name, spec, host, cache) {
    const options = checkLocalOptions(spec.options, host);
    if (options.backend === 'webgpu') {
      const gpu = await probeWebGpu();
      throw new SippError(`backend 'webgpu': ${WEBGPU_BUILD}. ${describeWebGpu(gpu)}`, 'backend_error', { webgpu: gpu });
    }
    const runtime = await host.start();
    const { blob, fileName, cacheKey, fromCache } = await openSource(spec, cache);
    const threads = options.threads || host.threads;
    const loaded = await host.call('load', {
      blob, fileName, backend: options.backend, ctxSize: options.ctxSize || 0, parallel: options.parallel || 0,
      threads, batchSize: options.batchSize || 0, embeddings: !!options.embeddings,
    });
    return new LocalEndpoint(name, host, { ...loaded, threads }, { cacheKey, fromCache: !!fromCache }, runtime);
  }

  get closed() {
    return this._closed;
  }

  /** Starts a generation into query q; what = { prompt } or { messages }; opts checked already. */
  submit(what, opts, q) {
    if (this._closed) throw new SippError(`endpoint '${this.name}' is closed; add it again`, 'closed');
    const needs = chatLibraryOption(opts);
    if (needs && !this.runtime.chatLibrary) {
      throw invalid(`option ${needs[0]} (${needs[1]}) needs llama.cpp's chat library, which is not compiled into this browser `
        + 'runtime (it renders chats with llama.cpp\'s built-in templates only; see client.backends().chat); leave it out, or '
        + "use a native sipp: a gateway's /v1/chat/completions or the Node or Python binding");
    }
    const tool = what.messages && !this.runtime.chatLibrary ? toolMessage(what.messages) : -1;
    if (tool >= 0) {
      throw invalid(`messages[${tool}] is a tool message or carries tool_calls, which needs llama.cpp's chat library, not `
        + "compiled into this browser runtime (see client.backends().chat); leave it out, or use a native sipp: a gateway's "
        + '/v1/chat/completions or the Node or Python binding');
    }
    if (q.cancelRequested) return q._endUnsent(this.backend.backend);
    const o = { ...opts };
    delete o.endpoint;
    delete o.signal;
    const backend = this.backend.backend;
    const threads = this.runtime.threads;
    const stream = this._host.stream({
      piece: (text) => q._piece(text),
      fail: (e) => q._fail(e),
      end: (data) => {
        if (data.finishReason === 'error') {
          q._fail(new SippError(data.error || 'the request failed', data.status));
          return;
        }
        const s = data.stats;
        const { promptTokens, cachedTokens, generatedTokens, piecesAfterCancel, ...timings } = s;
        q._end({
          finishReason: data.finishReason,
          usage: { promptTokens, completionTokens: generatedTokens, totalTokens: promptTokens + generatedTokens, cachedTokens },
          timings,
          backend,
          threads,
          build: this.runtime.build,
          stats: { ...s, backend, threads },
          ...(data.error && data.status !== 'cancelled' ? { error: data.error } : {}),
        });
      },
    });
    this._host.call('submit', { stream, engine: this._h.engine, ...what, o }).catch((e) => {
      this._host._streams.delete(stream);
      q._fail(toSippError(e));
    });
    q._bindCancel(() => this._host.call('cancel', { stream }).catch(() => {}));
  }

  async embed(texts, normalize) {
    if (this._closed) throw new SippError(`endpoint '${this.name}' is closed`, 'closed');
    const r = await this._host.call('embed', { engine: this._h.engine, texts, normalize });
    return r.vectors;
  }

  /**
   * For sipp verify: the logits of every position of a prompt of token ids (a Float32Array of
   * tokens.length rows of info.nVocab), in one batch or, with incremental, one token at a time
   * through the KV cache.
   */
  async logits(tokens, { incremental = false } = {}) {
    if (this._closed) throw new SippError(`endpoint '${this.name}' is closed`, 'closed');
    return this._host.call('logits', { model: this._h.model, tokens, incremental, threads: this.runtime.threads,
      nVocab: this.info.nVocab });
  }

  /** For sipp verify: the greedy continuation of token ids, end of generation ignored. */
  async continueTokens(tokens, maxTokens) {
    const q = new Query(this.name);
    this.submit({ tokens }, { temperature: 0, maxTokens, ignoreEos: true }, q);
    return (await q.response).text;
  }

  stats() {
    return { backend: this.backend.backend, build: this.runtime.build, threads: this.runtime.threads };
  }

  async close() {
    if (this._closed) return;
    this._closed = true;
    await this._host.call('unload', this._h).catch(() => {});
  }
}
