'use strict';
const { CHAT_FIELDS } = require('./options');
const { chatResult } = require('./query');
/**
 * A local endpoint: a model loaded by libsipp in this process and the engine serving it, through
 * the addon. Every wait happens off the event loop (see src/addon.c); this file turns the addon's
 * events into Queries and its numbers into the binding's camelCase shapes.
 */
const native = require('./native');
const { SippError, toSippError, invalid } = require('./errors');

const LOCAL_OPTIONS = ['backend', 'flashAttn', 'ctxSize', 'parallel', 'threads', 'gpuLayers', 'batchSize', 'maxQueued', 'embeddings',
  'speculative', 'draftModel', 'draftMax', 'draftMin', 'draftPMin', 'draftCutoff', 'cacheTypeK', 'cacheTypeV', 'mmproj', 'mmprojOffload'];
const STRING_OPTIONS = ['backend', 'flashAttn', 'speculative', 'draftModel', 'draftCutoff', 'cacheTypeK', 'cacheTypeV', 'mmproj'];
const CACHE_TYPES = ['f16', 'q8_0', 'q4_0'];

function checkLocalOptions(options) {
  const o = options || {};
  if (typeof o !== 'object') throw invalid(`options must be an object such as { backend: 'cpu' }, not ${typeof o}`);
  for (const [k, v] of Object.entries(o)) {
    if (!LOCAL_OPTIONS.includes(k)) throw invalid(`unknown local option '${k}' (known: ${LOCAL_OPTIONS.join(', ')})`);
    if (v === undefined || v === null) continue;
    if (k === 'backend' && typeof v !== 'string') throw invalid(`options.backend must be a string such as 'cpu', not ${JSON.stringify(v)}`);
    if (k === 'flashAttn' && !['auto', 'on', 'off'].includes(v)) {
      throw invalid(`options.flashAttn must be 'auto', 'on' or 'off', not ${JSON.stringify(v)}`);
    }
    if ((k === 'embeddings' || k === 'mmprojOffload') && typeof v !== 'boolean') throw invalid(`options.${k} must be true or false`);
    if (k === 'mmproj' && (typeof v !== 'string' || !v)) throw invalid(`options.mmproj must be the path of a projector .gguf file, not ${JSON.stringify(v)}`);
    if (k === 'speculative' && !['none', 'ngram', 'draft'].includes(v)) {
      throw invalid(`options.speculative must be 'none', 'ngram' or 'draft', not ${JSON.stringify(v)}`);
    }
    if (k === 'draftCutoff' && !['auto', 'off'].includes(v)) {
      throw invalid(`options.draftCutoff must be 'auto' or 'off', not ${JSON.stringify(v)}`);
    }
    if ((k === 'cacheTypeK' || k === 'cacheTypeV') && !CACHE_TYPES.includes(v)) {
      throw invalid(`options.${k} must be 'f16', 'q8_0' or 'q4_0', not ${JSON.stringify(v)}`);
    }
    if (k === 'draftModel' && (typeof v !== 'string' || !v)) throw invalid(`options.draftModel must be the path of a .gguf file, not ${JSON.stringify(v)}`);
    if (k === 'draftPMin') {
      if (typeof v !== 'number' || !(v >= 0 && v < 1)) throw invalid(`options.draftPMin must be a number in [0, 1), not ${JSON.stringify(v)}`);
      continue;
    }
    if (![...STRING_OPTIONS, 'embeddings', 'mmprojOffload'].includes(k) && (!Number.isInteger(v) || (v < 0 && k !== 'gpuLayers'))) {
      throw invalid(`options.${k} must be an integer >= 0, not ${JSON.stringify(v)}`);
    }
  }
  return o;
}

class LocalEndpoint {
  constructor(name, model, opened) {
    this.name = name;
    this.kind = 'local';
    this.model = model;
    /** What the load decided: {backend, reason, devices, gpuLayers}. */
    this.backend = opened.backend;
    /** The model's shape: {architecture, description, nParams, nEmbd, nLayer, nVocab, ...}. */
    this.info = opened.info;
    this._handle = opened.handle;
    this._closed = false;
  }

  static async open(name, spec, selection) {
    if (typeof spec.model !== 'string' || !spec.model) {
      throw invalid(`a local endpoint needs model: the path of a .gguf file, got ${JSON.stringify(spec.model)}`);
    }
    const options = checkLocalOptions(spec.options);
    await native.init(selection.artifact);
    const backend = options.backend || selection.backend;
    try {
      const opened = await native.load().open(spec.model, { ...options, backend });
      return new LocalEndpoint(name, spec.model, opened);
    } catch (e) {
      throw toSippError(e);
    }
  }

  get closed() {
    return this._closed;
  }

  /** Starts a generation into query q; what = {prompt} or {messages}; opts checked already. */
  submit(what, opts, q) {
    if (this._closed) throw new SippError(`endpoint '${this.name}' is closed; create a new SippClient and add it again`, 'closed');
    if (q.cancelRequested) return q._endUnsent(this.backend.backend); // an AbortSignal aborted already
    const params = { ...opts, ...what };
    delete params.endpoint;
    delete params.signal;
    if (what.messages) {
      // a chat goes to libsipp as OpenAI JSON, with its tools, schema and reasoning options
      const chat = { messages: what.messages };
      for (const [k, wire] of Object.entries(CHAT_FIELDS)) {
        if (opts[k] !== undefined) chat[wire] = opts[k];
        delete params[k];
      }
      params.chatJson = JSON.stringify(chat);
      delete params.messages;
    }
    const backend = this.backend.backend;
    const onEvent = (kind, data) => {
      try {
        if (kind === 'piece') {
          q._piece(data);
        } else if (kind === 'delta') {
          q._delta(JSON.parse(data));
        } else if (kind === 'error') {
          q._fail(toSippError(data));
        } else if (data.finishReason === 'error') {
          q._fail(new SippError(data.error || 'the request failed', data.status));
        } else {
          const s = data.stats;
          q._end({
            finishReason: data.finishReason,
            usage: {
              promptTokens: s.promptTokens,
              completionTokens: s.generatedTokens,
              totalTokens: s.promptTokens + s.generatedTokens,
              cachedTokens: s.cachedTokens,
            },
            stats: { ...s, backend },
            ...(data.error && data.status !== 'cancelled' ? { error: data.error } : {}),
            ...(data.message ? chatResult(JSON.parse(data.message), data.finishReason) : {}),
          });
        }
      } catch (e) {
        q._fail(toSippError(e));
      }
    };
    let req;
    try {
      req = native.load().submit(this._handle, params, onEvent);
    } catch (e) {
      throw toSippError(e);
    }
    q._bindCancel(() => native.load().cancel(req));
  }

  async embed(texts, normalize) {
    if (this._closed) throw new SippError(`endpoint '${this.name}' is closed`, 'closed');
    try {
      const r = await native.load().embed(this._handle, texts, normalize);
      return r.vectors.map((v) => Array.from(v));
    } catch (e) {
      throw toSippError(e);
    }
  }

  stats() {
    try {
      return native.load().stats(this._handle);
    } catch (e) {
      throw toSippError(e);
    }
  }

  async close() {
    if (this._closed) return;
    this._closed = true;
    await native.load().close(this._handle);
  }
}

module.exports = { LocalEndpoint };
