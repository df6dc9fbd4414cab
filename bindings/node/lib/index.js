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
 */
const { selectBackend, ENV } = require('./artifact');
const native = require('./native');
const { SippError, toSippError, invalid } = require('./errors');
const { Query, failedQuery } = require('./query');
const { generationOptions, checkPrompt, checkMessages, checkEmbedInput } = require('./options');
const { LocalEndpoint } = require('./local');
const { GatewayEndpoint } = require('./gateway');

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

class SippClient {
  constructor() {
    this._endpoints = new Map(); // name -> endpoint, or null while it is being added
    this._closed = false;
  }

  /**
   * Registers an endpoint: { kind: 'local', model, options } loads a model in this process (off
   * the event loop); { kind: 'gateway', baseUrl, token, model } checks a sipp gateway.
   * Resolves to the endpoint (pass it, or its name, as `endpoint`).
   */
  async add(name, spec) {
    this._checkOpen();
    if (typeof name !== 'string' || !name) throw invalid(`an endpoint name must be a non-empty string, not ${JSON.stringify(name)}`);
    if (!spec || typeof spec !== 'object') throw invalid(`client.add('${name}', spec) needs { kind: 'local', model } or { kind: 'gateway', baseUrl }`);
    if (this._endpoints.has(name)) throw invalid(`endpoint '${name}' is already added; choose another name or remove it`);
    this._endpoints.set(name, null);
    let ep;
    try {
      if (spec.kind === 'local') ep = await LocalEndpoint.open(name, spec, selection);
      else if (spec.kind === 'gateway') ep = await GatewayEndpoint.open(name, spec);
      else throw invalid(`endpoint kind must be 'local' or 'gateway', not ${JSON.stringify(spec.kind)}`);
    } catch (e) {
      this._endpoints.delete(name);
      throw toSippError(e);
    }
    if (this._closed) {
      await ep.close();
      this._checkOpen();
    }
    this._endpoints.set(name, ep);
    return ep;
  }

  /** The endpoint for a name, an endpoint, or undefined (the first one added). */
  endpoint(which) {
    this._checkOpen();
    const ready = [...this._endpoints.entries()].filter(([, ep]) => ep);
    if (which === undefined || which === null) {
      if (!ready.length) throw invalid("no endpoint: add one first with await client.add(name, { kind: 'local', model })");
      return ready[0][1];
    }
    const name = typeof which === 'string' ? which : which && which.name;
    const ep = this._endpoints.get(name);
    if (!ep || (typeof which !== 'string' && ep !== which)) {
      throw new SippError(`no endpoint '${name}' in this client (endpoints: ${ready.map(([n]) => n).join(', ') || 'none'})`, 'not_found');
    }
    return ep;
  }

  /** The endpoints by name. */
  get endpoints() {
    return Object.fromEntries([...this._endpoints.entries()].filter(([, ep]) => ep));
  }

  /**
   * Completes a raw prompt. Returns { response, tokens, cancel } at once; every error, including
   * bad options, arrives as the response's rejection (and is thrown by the tokens iterator).
   * Options: endpoint, maxTokens, temperature, topK, topP, minP, repeatPenalty, seed, stop,
   * contextKey, ignoreEos, timeoutMs, signal (an AbortSignal: aborting cancels).
   */
  query(prompt, options = {}) {
    return this._generate(() => ({ prompt: checkPrompt(prompt) }), options);
  }

  /**
   * Answers a conversation, messages = [{ role, content }] (assistant messages may carry tool_calls,
   * tool messages a tool_call_id); the same options plus chatTemplate ('chatml' or a Jinja file) and
   * tools, toolChoice, parallelToolCalls, responseFormat, grammar, jsonSchema, reasoningFormat,
   * chatTemplateKwargs, thinkingBudgetTokens (OpenAI's and llama.cpp's fields). Its response has
   * toolCalls and reasoning; query.deltas streams typed pieces.
   */
  chat(messages, options = {}) {
    return this._generate(() => ({ messages: checkMessages(messages) }), options);
  }

  _generate(what, options) {
    let ep = null;
    try {
      const opts = generationOptions(options);
      this._checkOpen();
      ep = this.endpoint(opts.endpoint);
      const q = new Query(ep.name, opts.signal);
      if (!q._done) ep.submit(what(), opts, q);
      return q;
    } catch (e) {
      return failedQuery(ep ? ep.name : undefined, toSippError(e));
    }
  }

  /**
   * Embeds a string (resolves to number[]) or an array of strings (number[][]). With normalize
   * (the default) every vector has unit length, so a dot product is the cosine similarity.
   */
  async embed(input, options = {}) {
    const { endpoint, normalize = true, ...rest } = options || {};
    const extra = Object.keys(rest);
    if (extra.length) throw invalid(`unknown embed option '${extra[0]}' (known: endpoint, normalize)`);
    if (typeof normalize !== 'boolean') throw invalid('normalize must be true or false');
    const { texts, single } = checkEmbedInput(input);
    const ep = this.endpoint(endpoint);
    if (!texts.length) return [];
    const vectors = await ep.embed(texts, normalize);
    return single ? vectors[0] : vectors;
  }

  /** The endpoint's counters (local: slots, running, queued, requestsDone, tokensIn, tokensOut, ...). */
  stats(endpoint) {
    return this.endpoint(endpoint).stats();
  }

  /** Closes an endpoint and forgets it; its running requests end as cancelled. */
  async remove(endpoint) {
    const ep = this.endpoint(endpoint);
    this._endpoints.delete(ep.name);
    await ep.close();
  }

  /** Cancels running requests and frees every model. Later calls fail with code 'closed'. */
  async close() {
    this._closed = true;
    const eps = [...this._endpoints.values()].filter(Boolean);
    this._endpoints.clear();
    await Promise.all(eps.map((ep) => ep.close()));
  }

  get closed() {
    return this._closed;
  }

  async [Symbol.asyncDispose]() {
    await this.close();
  }

  _checkOpen() {
    if (this._closed) throw new SippError('this SippClient is closed; create a new SippClient() to continue', 'closed');
  }
}

if (!Symbol.asyncDispose) delete SippClient.prototype[Symbol.asyncDispose];

exports.SippClient = SippClient;
exports.SippError = SippError;
exports.Query = Query;
exports.backendSelection = backendSelection;
exports.runtimeInfo = runtimeInfo;
exports.store = require('./store');
