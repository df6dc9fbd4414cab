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
 *
 * The client model (add, query, chat, embed, ...; option checks, errors, the gateway endpoint) is
 * client.js, options.js, query.js, errors.js and gateway.js, which the Node binding loads too: one
 * source for both packages. This file adds the browser's own: the runtime, backends() and cache.
 */
import { SippError, invalid } from './errors.js';
import { Query } from './query.js';
import { ClientCore } from './client.js';
import { BROWSER_PROFILE } from './gateway.js';
import { LocalEndpoint, RuntimeHost, probeWebGpu, describeWebGpu, chatCapabilities, LOG_LEVELS } from './local.js';
import { ModelCache } from './cache.js';

const BUILDS = ['auto', 'pthreads', 'single'];
const CLIENT_OPTIONS = ['runtimeUrl', 'workerUrl', 'build', 'threads', 'logLevel'];

export class SippClient extends ClientCore {
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
    super('source', BROWSER_PROFILE);
    this._options = { runtimeUrl: runtimeUrl.endsWith('/') ? runtimeUrl : `${runtimeUrl}/`, workerUrl, build, threads, logLevel };
    this._host = null;
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
   * client.add(name, { kind: 'local', source, sha256, onProgress, options }) loads a model in this
   * page's worker (source: a URL, a File or a Blob); { kind: 'gateway', baseUrl, target, token }
   * checks a sipp gateway (ClientCore.add).
   */
  _openLocal(name, spec) {
    return LocalEndpoint.open(name, spec, this._runtimeHost(), this.cache);
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

  /** Cancels running requests, frees every model and stops the worker. Later calls fail with 'closed'. */
  async close() {
    if (this._closed) return;
    await super.close();
    if (this._host) this._host.terminate();
  }
}

export { SippError, Query, ModelCache };
