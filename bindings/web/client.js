/**
 * The client model both packages share: endpoints by name, query, chat, embed, stats, remove and
 * close, with the same checks and errors. The browser package's SippClient (bindings/web/index.js)
 * and the Node binding's (bindings/node/lib/index.js, which loads this module with require())
 * extend ClientCore and add what only they have: how a local endpoint opens (a model in a Web
 * Worker, or libsipp in the process) and their own calls (runtime(), backends(), cache; the
 * backend selection, the store). Environment-neutral, no Node or browser API.
 *
 * A subclass gives the constructor its local spec's model key ('model' or 'source', for the hints
 * in errors) and its gateway profile (bindings/web/gateway.js), and implements
 * _openLocal(name, spec), which resolves to a local endpoint.
 */
import { SippError, toSippError, invalid } from './errors.js';
import { Query, failedQuery } from './query.js';
import { generationOptions, checkPrompt, checkMessages, checkEmbedInput } from './options.js';
import { GatewayEndpoint } from './gateway.js';

class ClientCore {
  constructor(modelKey, gatewayProfile) {
    this._modelKey = modelKey;
    this._gatewayProfile = gatewayProfile;
    this._endpoints = new Map(); // name -> endpoint, or null while it is being added
    this._closed = false;
  }

  /**
   * Registers an endpoint: { kind: 'local', ... } (the package's local spec) or { kind: 'gateway',
   * baseUrl, token, target or model } (checks a sipp gateway). Resolves to the endpoint (pass it,
   * or its name, as `endpoint`).
   */
  async add(name, spec) {
    this._checkOpen();
    if (typeof name !== 'string' || !name) throw invalid(`an endpoint name must be a non-empty string, not ${JSON.stringify(name)}`);
    if (!spec || typeof spec !== 'object') {
      throw invalid(`client.add('${name}', spec) needs { kind: 'local', ${this._modelKey} } or { kind: 'gateway', baseUrl }`);
    }
    if (this._endpoints.has(name)) throw invalid(`endpoint '${name}' is already added; choose another name or remove it`);
    this._endpoints.set(name, null);
    let ep;
    try {
      if (spec.kind === 'local') ep = await this._openLocal(name, spec);
      else if (spec.kind === 'gateway') ep = await GatewayEndpoint.open(name, spec, this._gatewayProfile);
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
      if (!ready.length) throw invalid(`no endpoint: add one first with await client.add(name, { kind: 'local', ${this._modelKey} })`);
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
   * Completes a raw prompt. Returns { response, tokens, deltas, cancel } at once; every error,
   * including bad options, arrives as the response's rejection (and is thrown by the tokens
   * iterator). Options: endpoint, maxTokens, temperature, topK, topP, minP, repeatPenalty, seed,
   * stop, contextKey, ignoreEos, timeoutMs, signal (an AbortSignal: aborting cancels).
   */
  query(prompt, options = {}) {
    return this._generate(() => ({ prompt: checkPrompt(prompt) }), options);
  }

  /**
   * Answers a conversation, messages = [{ role, content }] (assistant messages may carry tool_calls,
   * tool messages a tool_call_id); the same options plus chatTemplate ('chatml' or a Jinja file) and
   * tools, toolChoice, parallelToolCalls, responseFormat, grammar, jsonSchema, reasoningFormat,
   * chatTemplateKwargs, thinkingBudgetTokens (OpenAI's and llama.cpp's fields, for an endpoint with
   * llama.cpp's chat library; one without refuses them by name). Its response then has toolCalls
   * and reasoning; query.deltas streams typed pieces.
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

  _checkOpen() {
    if (this._closed) throw new SippError('this SippClient is closed; create a new SippClient() to continue', 'closed');
  }
}

export { ClientCore };
