/**
 * sipp for the browser: a GGUF model running inside the page (libsipp and the pinned llama.cpp
 * compiled to WebAssembly, in a Web Worker) and sipp gateways, with the Node binding's client model.
 *
 *   import { SippClient } from './bindings/web/index.js';
 *   const client = new SippClient();
 *   const ep = await client.add('local', { kind: 'local', source: '/models/tiny.gguf', sha256,
 *                                          options: { backend: 'auto', ctxSize: 2048 } });
 *   const run = client.chat([{ role: 'user', content: 'Hi' }], { endpoint: ep, maxTokens: 64, signal });
 *   for await (const piece of run.tokens) ...
 *   const { text, usage, timings, finishReason, backend, threads } = await run.response;
 *
 * ES modules, no bundler. The WebAssembly runtime (make web: build/web/sipp-mt.* and sipp-st.*) is
 * found at runtimeUrl, by default build/web/ of the repository this file sits in. The pthread
 * build runs when the page is cross-origin isolated, else the single-thread build; client.runtime()
 * says which and why. Models given by URL are cached in the origin private file system by their
 * SHA-256 (client.cache: list, delete, clear).
 */
import { SippError, toSippError, invalid } from './errors.js';
import { Query, failedQuery } from './query.js';
import { generationOptions, checkPrompt, checkMessages, checkEmbedInput } from './options.js';
import { LocalEndpoint, RuntimeHost, probeWebGpu, describeWebGpu, chatCapabilities, LOG_LEVELS } from './local.js';
import { GatewayEndpoint } from './gateway.js';
import { ModelCache } from './cache.js';

const BUILDS = ['auto', 'pthreads', 'single'];
const CLIENT_OPTIONS = ['runtimeUrl', 'workerUrl', 'build', 'threads', 'logLevel'];

export class SippClient {
  /**
   * options: runtimeUrl (where sipp-mt.js / sipp-st.js are), workerUrl (worker.js), build
   * ('auto' | 'pthreads' | 'single'), threads (WebAssembly threads of the pthread build; default
   * navigator.hardwareConcurrency), logLevel (llama.cpp's logging in the console: 'quiet' (default),
   * 'error', 'warn', 'info', 'debug').
   */
  constructor(options = {}) {
    for (const k of Object.keys(options || {})) {
      if (!CLIENT_OPTIONS.includes(k)) throw invalid(`unknown SippClient option '${k}' (known: ${CLIENT_OPTIONS.join(', ')})`);
    }
    const { runtimeUrl = new URL('../../build/web/', import.meta.url).href,
      workerUrl = new URL('./worker.js', import.meta.url).href, build = 'auto', threads, logLevel = 'quiet' } = options || {};
    if (!LOG_LEVELS.includes(logLevel)) throw invalid(`logLevel must be one of ${LOG_LEVELS.join(', ')}, not ${JSON.stringify(logLevel)}`);
    if (!BUILDS.includes(build)) throw invalid(`build must be one of ${BUILDS.join(', ')}, not ${JSON.stringify(build)}`);
    if (threads !== undefined && (!Number.isInteger(threads) || threads < 1)) {
      throw invalid(`threads must be a positive integer, not ${JSON.stringify(threads)}`);
    }
    this._options = { runtimeUrl: runtimeUrl.endsWith('/') ? runtimeUrl : `${runtimeUrl}/`, workerUrl, build, threads, logLevel };
    this._host = null;
    this._endpoints = new Map();
    this._closed = false;
    /** The model cache (OPFS): list(), delete(key), clear(). */
    this.cache = new ModelCache();
  }

  _runtimeHost() {
    if (!this._host) this._host = new RuntimeHost(this._options);
    return this._host;
  }

  /** The WebAssembly build in use: { build, variant, threads, reason, version, llamaRelease, llamaCommit }. */
  async runtime() {
    this._checkOpen();
    return this._runtimeHost().start();
  }

  /**
   * Registers an endpoint. { kind: 'local', source, sha256, onProgress, options } loads a model in
   * this page's worker (source: a URL, a File or a Blob); { kind: 'gateway', baseUrl, target, token }
   * checks a sipp gateway. Resolves to the endpoint.
   */
  async add(name, spec) {
    this._checkOpen();
    if (typeof name !== 'string' || !name) throw invalid(`an endpoint name must be a non-empty string, not ${JSON.stringify(name)}`);
    if (!spec || typeof spec !== 'object') throw invalid(`client.add('${name}', spec) needs { kind: 'local', source } or { kind: 'gateway', baseUrl }`);
    if (this._endpoints.has(name)) throw invalid(`endpoint '${name}' is already added; choose another name or remove it`);
    this._endpoints.set(name, null);
    let ep;
    try {
      if (spec.kind === 'local') ep = await LocalEndpoint.open(name, spec, this._runtimeHost(), this.cache);
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
      if (!ready.length) throw invalid("no endpoint: add one first with await client.add(name, { kind: 'local', source })");
      return ready[0][1];
    }
    const name = typeof which === 'string' ? which : which && which.name;
    const ep = this._endpoints.get(name);
    if (!ep || (typeof which !== 'string' && ep !== which)) {
      throw new SippError(`no endpoint '${name}' in this client (endpoints: ${ready.map(([n]) => n).join(', ') || 'none'})`, 'not_found');
    }
    return ep;
  }

  get endpoints() {
    return Object.fromEntries([...this._endpoints.entries()].filter(([, ep]) => ep));
  }

  /** Completes a raw prompt; the Node binding's options (maxTokens, temperature, topK, ..., signal). */
  query(prompt, options = {}) {
    return this._generate(() => ({ prompt: checkPrompt(prompt) }), options);
  }

  /** Answers a conversation, messages = [{ role, content }]; the same options plus chatTemplate. */
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

  /** Embeds a string (number[]) or an array of strings (number[][]); unit length unless normalize: false. */
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

  /**
   * The backends of this browser runtime, honestly: cpu (compiled, available), webgpu (not
   * compiled in; whether the browser has an adapter and shader-f16 is reported beside it), and
   * what auto picks, with libsipp's reason; and chat: whether llama.cpp's chat library is compiled
   * in (it is not: built-in templates only, so tools, responseFormat, grammars are refused).
   */
  async backends() {
    this._checkOpen();
    const host = this._runtimeHost();
    const rt = await host.start();
    const gpu = await probeWebGpu();
    const auto = await host.call('decide', { backend: 'auto' });
    return {
      runtime: rt,
      backends: [
        { name: 'cpu', compiled: true, available: true, detail: `wasm ${rt.build}, ${rt.threads} thread${rt.threads === 1 ? '' : 's'}` },
        { name: 'webgpu', compiled: false, available: false, adapter: gpu.adapter, isFallbackAdapter: gpu.isFallbackAdapter,
          shaderF16: gpu.shaderF16, detail: `not compiled into this browser runtime (needs Emscripten >= 4.0.10); ${describeWebGpu(gpu)}` },
      ],
      auto,
      chat: chatCapabilities(rt),
    };
  }

  stats(endpoint) {
    return this.endpoint(endpoint).stats();
  }

  async remove(endpoint) {
    const ep = this.endpoint(endpoint);
    this._endpoints.delete(ep.name);
    await ep.close();
  }

  /** Cancels running requests, frees every model and stops the worker. Later calls fail with 'closed'. */
  async close() {
    if (this._closed) return;
    this._closed = true;
    const eps = [...this._endpoints.values()].filter(Boolean);
    this._endpoints.clear();
    await Promise.all(eps.map((ep) => ep.close()));
    if (this._host) this._host.terminate();
  }

  get closed() {
    return this._closed;
  }

  _checkOpen() {
    if (this._closed) throw new SippError('this SippClient is closed; create a new SippClient() to continue', 'closed');
  }
}

export { SippError, Query, ModelCache };
