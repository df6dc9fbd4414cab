/**
 * A gateway endpoint: a sipp gateway (`sipp serve`) reached with the global fetch, in Node (the
 * Node binding's lib/gateway.js re-exports this module with require()) and in a page (the gateway
 * must allow the page's origin, [server] allowed_origins, unless it served the page).
 *
 * It uses the gateway's OpenAI-compatible routes: /v1/models when added (to find and check the
 * model), /v1/completions for query, /v1/chat/completions for chat, both streamed as server-sent
 * events with the usage in the last chunk (stream_options.include_usage), and /v1/embeddings.
 * Options without an OpenAI name ride along as sipp's extension fields (context_key, top_k, min_p,
 * repeat_penalty, ignore_eos). Cancelling aborts the fetch, which closes the connection; the
 * gateway cancels the request when its client goes away.
 *
 * Where the packages differ on purpose, open() takes the package's profile (NODE_PROFILE or
 * BROWSER_PROFILE, both here so the differences are read in one place):
 *   headers       extra request headers (Node names itself in User-Agent; a page may not)
 *   chatOptions   true: the chat-library options (tools, responseFormat, ...) go to the gateway by
 *                 their wire names, and a chat's stream is read as typed deltas (content,
 *                 reasoning, tool calls: query.deltas, and the response's toolCalls and
 *                 reasoning, as a local chat through libsipp gives them); false: they are refused
 *                 by name and a chat's stream is read as text (the browser package)
 *   result(r, s)  the response's fields from the shared ones r ({finishReason, usage, stats}) and
 *                 the gateway's own stats s, so a gateway's result has the shape of the package's
 *                 local one (the browser's has timings, backend and threads)
 */
import { SippError, invalid, STATUS_NAMES as STATUS_NAMES_ALL } from './errors.js';
import { CHAT_FIELDS, chatLibraryOption } from './options.js';
import { chatResult } from './query.js';

const NODE_PROFILE = { headers: { 'User-Agent': 'sipp-node' }, chatOptions: true, result: (r) => r };
const BROWSER_PROFILE = {
  headers: {},
  chatOptions: false,
  result: (r, stats) => ({ ...r, timings: { ...stats }, backend: 'gateway', threads: null }),
};

const STATUS_NAMES = new Set(STATUS_NAMES_ALL.filter((name) => name !== 'ok'));
const BY_HTTP = { 400: 'invalid_argument', 404: 'not_found', 429: 'busy', 503: 'busy' };

async function httpError(res, url) {
  let message = null;
  let code = null;
  const body = await res.text().catch(() => '');
  try {
    const e = JSON.parse(body).error;
    if (e && typeof e === 'object') ({ message, code } = { message: e.message, code: e.code || e.type });
    else if (typeof e === 'string') message = e;
  } catch {}
  let text = `gateway ${url} answered ${res.status}: ${message || body.slice(0, 200) || res.statusText}`;
  if (res.status === 401 || res.status === 403) text += '; check the token given to { kind: "gateway", token }';
  const kind = STATUS_NAMES.has(code) ? code : BY_HTTP[res.status] || 'gateway';
  return new SippError(text, kind, { httpStatus: res.status, gatewayCode: code });
}

function unreachable(url, e) {
  const why = (e.cause && (e.cause.code || e.cause.message)) || e.message;
  return new SippError(`cannot reach gateway ${url}: ${why}; is \`sipp serve\` running there?`, 'gateway', { httpStatus: null });
}

/** Yields the data of each server-sent event of a fetch Response body. */
async function* sseEvents(body) {
  const decoder = new TextDecoder();
  let buf = '';
  let data = [];
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        if (data.length) yield data.join('\n');
        data = [];
      } else if (line.startsWith('data:')) {
        data.push(line.slice(5).replace(/^ /, ''));
      } // comments and other fields carry nothing for us
    }
  }
  if (data.length) yield data.join('\n');
}

/** A streamed chat's message, put together from its deltas: content, reasoning, tool calls by index. */
class ChatMessage {
  constructor() {
    this.content = '';
    this.reasoning = '';
    this.calls = []; // by the delta's index: {id, type, function: {name, arguments}}
  }

  add(delta) {
    this.content += delta.content || '';
    this.reasoning += delta.reasoning_content || '';
    for (const tc of delta.tool_calls || []) {
      const i = Number.isInteger(tc.index) ? tc.index : this.calls.length;
      const call = this.calls[i] || (this.calls[i] = { id: '', type: 'function', function: { name: '', arguments: '' } });
      const fn = tc.function || {};
      if (tc.id) call.id = tc.id;
      if (fn.name) call.function.name = fn.name;
      call.function.arguments += fn.arguments || '';
    }
  }

  /** The fields of the response, as chatResult gives them for a local chat. */
  result(finishReason) {
    const calls = this.calls.filter(Boolean);
    return chatResult({ content: this.content, reasoning_content: this.reasoning, ...(calls.length ? { tool_calls: calls } : {}) },
      finishReason);
  }
}

function normalizeL2(v) {
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return n > 0 ? v.map((x) => x / n) : v;
}

class GatewayEndpoint {
  constructor(name, spec, model, profile) {
    this.name = name;
    this.kind = 'gateway';
    this.baseUrl = spec.baseUrl.replace(/\/+$/, '');
    this.model = model;
    this.backend = { backend: 'gateway', reason: `${this.baseUrl} model ${model}`, devices: '', gpuLayers: 0 };
    this.info = { model, url: this.baseUrl };
    this._token = spec.token;
    this._profile = profile;
    this._closed = false;
    this._inflight = new Set(); // AbortControllers of running requests, aborted by close()
  }

  static async open(name, spec, profile) {
    if (typeof spec.baseUrl !== 'string' || !/^https?:\/\//.test(spec.baseUrl)) {
      throw invalid(`a gateway endpoint needs baseUrl: an http:// or https:// URL, got ${JSON.stringify(spec.baseUrl)}`);
    }
    if (spec.target !== undefined && spec.model !== undefined && spec.target !== spec.model) {
      throw invalid(`give the gateway's target as target or as model, not two different names ('${spec.target}', '${spec.model}')`);
    }
    const wanted = spec.target ?? spec.model;
    const probe = new GatewayEndpoint(name, spec, wanted || null, profile);
    const models = await probe._json('GET', '/v1/models');
    const ids = (models.data || []).map((m) => m && m.id).filter(Boolean);
    let model = wanted;
    if (model) {
      if (ids.length && !ids.includes(model)) {
        throw new SippError(`gateway ${probe.baseUrl} does not serve model '${model}'; it serves: ${ids.join(', ')}`, 'not_found');
      }
    } else if (ids.length === 1) {
      model = ids[0];
    } else if (!ids.length) {
      throw new SippError(`gateway ${probe.baseUrl} serves no model (/v1/models is empty)`, 'not_found');
    } else {
      throw invalid(`gateway ${probe.baseUrl} serves several models (${ids.join(', ')}); choose one with { model }`);
    }
    return new GatewayEndpoint(name, spec, model, profile);
  }

  get closed() {
    return this._closed;
  }

  async _fetch(method, path, body, signal, stream = false) {
    if (this._closed) throw new SippError(`endpoint '${this.name}' is closed`, 'closed');
    const url = this.baseUrl + path;
    const headers = { ...this._profile.headers, Accept: stream ? 'text/event-stream' : 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (this._token) headers.Authorization = `Bearer ${this._token}`;
    let res;
    try {
      res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    } catch (e) {
      if (signal && signal.aborted) throw e;
      throw unreachable(url, e);
    }
    if (!res.ok) throw await httpError(res, url);
    return res;
  }

  async _json(method, path, body) {
    const res = await this._fetch(method, path, body, AbortSignal.timeout(30000));
    const text = await res.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new SippError(`gateway ${this.baseUrl}${path} answered with something that is not JSON: ${text.slice(0, 200)}`, 'gateway');
    }
  }

  submit(what, opts, q) {
    if (this._closed) throw new SippError(`endpoint '${this.name}' is closed`, 'closed');
    // The gateway has the chat library, but a client that reads only text from its stream would
    // lose a tool call or a parsed reply, so such a profile refuses those options rather than half
    // serve them.
    const needs = this._profile.chatOptions ? null : chatLibraryOption(opts);
    if (needs) {
      throw invalid(`option ${needs[0]} (${needs[1]}) is not supported by the browser package's gateway endpoint (it reads `
        + `only the text of the stream); send ${needs[1]} to the gateway's /v1/chat/completions yourself`);
    }
    if (q.cancelRequested) return q._endUnsent('gateway'); // an AbortSignal aborted already
    const chat = 'messages' in what;
    const body = { model: this.model, ...what, stream: true, stream_options: { include_usage: true } };
    const map = {
      maxTokens: 'max_tokens', temperature: 'temperature', topK: 'top_k', topP: 'top_p', minP: 'min_p',
      repeatPenalty: 'repeat_penalty', seed: 'seed', stop: 'stop', contextKey: 'context_key',
      chatTemplate: 'chat_template', ignoreEos: 'ignore_eos',
    };
    for (const [k, wire] of Object.entries(map)) if (opts[k] !== undefined) body[wire] = opts[k];
    if (chat) for (const [k, wire] of Object.entries(CHAT_FIELDS)) if (opts[k] !== undefined) body[wire] = opts[k];
    if (body.max_tokens === -1) delete body.max_tokens; // "until the context is full" is the default there
    const controller = new AbortController();
    const signal = opts.timeoutMs ? AbortSignal.any([controller.signal, AbortSignal.timeout(opts.timeoutMs)]) : controller.signal;
    this._inflight.add(controller);
    q._bindCancel(() => controller.abort());
    this._run(chat ? '/v1/chat/completions' : '/v1/completions', body, chat, signal, q)
      .finally(() => this._inflight.delete(controller));
  }

  async _run(path, body, chat, signal, q) {
    let finish = null;
    let usage = {};
    let stats = {};
    const message = chat && this._profile.chatOptions ? new ChatMessage() : null; // typed deltas
    try {
      const res = await this._fetch('POST', path, body, signal, true);
      for await (const data of sseEvents(res.body)) {
        if (data.trim() === '[DONE]') break;
        let chunk;
        try {
          chunk = JSON.parse(data);
        } catch {
          continue;
        }
        if (chunk.error) {
          const e = chunk.error;
          const code = typeof e === 'object' ? e.code : null;
          throw new SippError(`gateway ${this.baseUrl}: ${typeof e === 'object' ? e.message : e}`,
            STATUS_NAMES.has(code) ? code : 'gateway');
        }
        for (const c of chunk.choices || []) {
          if (message && c.delta) {
            message.add(c.delta);
            q._delta([c.delta]);
          } else {
            const piece = chat ? (c.delta && c.delta.content) || '' : c.text || '';
            if (piece) q._piece(piece);
          }
          if (c.finish_reason) finish = c.finish_reason;
        }
        if (chunk.usage) usage = chunk.usage;
        if (chunk.stats || chunk.timings) stats = chunk.stats || chunk.timings;
      }
      q._end(this._result(q.cancelRequested ? 'cancelled' : finish || 'stop', usage, stats, message));
    } catch (e) {
      if (signal.aborted) {
        q._end(this._result('cancelled', usage, stats, message));
      } else {
        q._fail(e instanceof SippError ? e : new SippError(`gateway ${this.baseUrl}: the stream broke: ${e.message}`, 'gateway'));
      }
    }
  }

  /** The response's fields; a chat read as typed deltas adds text, reasoning and toolCalls. */
  _result(finishReason, usage, stats, message) {
    return this._profile.result({
      finishReason,
      usage: {
        promptTokens: usage.prompt_tokens,
        completionTokens: usage.completion_tokens,
        totalTokens: usage.total_tokens,
        cachedTokens: usage.cached_tokens ?? (usage.prompt_tokens_details || {}).cached_tokens,
      },
      stats: { ...stats, backend: 'gateway' },
      ...(message ? message.result(finishReason) : {}),
    }, stats);
  }

  async embed(texts, normalize) {
    const out = await this._json('POST', '/v1/embeddings', { model: this.model, input: texts });
    const rows = (out.data || []).slice().sort((a, b) => (a.index || 0) - (b.index || 0));
    const vectors = rows.map((r) => (r.embedding || []).map(Number));
    if (vectors.length !== texts.length) {
      throw new SippError(`gateway ${this.baseUrl} returned ${vectors.length} embeddings for ${texts.length} inputs`, 'gateway');
    }
    return normalize ? vectors.map(normalizeL2) : vectors;
  }

  stats() {
    return { url: this.baseUrl, model: this.model };
  }

  async close() {
    this._closed = true;
    for (const c of this._inflight) c.abort();
  }
}

export { GatewayEndpoint, sseEvents, NODE_PROFILE, BROWSER_PROFILE };
