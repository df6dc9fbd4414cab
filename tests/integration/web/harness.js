/**
 * harness.js: the scenarios the browser tests run in the page, each an async function of a JSON
 * argument that resolves to JSON for the Python side to check (../test_web.py). They use only the
 * public package, exactly as a page would.
 */
import { SippClient } from '/bindings/web/index.js';

const log = (line) => { document.getElementById('log').textContent += `${line}\n`; };

const errorOf = (e) => ({ message: e.message, code: e.code, name: e.name });

// Progress a driver can watch (drive.mjs reads window.sippProgress): a scenario that still makes
// progress on a slow machine is let run; one that stops making any is cut.
window.sippProgress = 0;
const tick = () => { window.sippProgress++; };

async function collect(run) {
  const pieces = [];
  const times = [];
  for await (const p of run.tokens) {
    pieces.push(p);
    times.push(performance.now());
    tick();
  }
  const response = await run.response;
  return { pieces, times, response };
}

async function localClient(args, clientOptions = {}) {
  const client = new SippClient(clientOptions);
  const ep = await client.add('local', {
    kind: 'local', source: args.model, sha256: args.sha256,
    options: { backend: args.backend || 'cpu', ctxSize: args.ctxSize || 512, threads: args.threads },
  });
  tick();
  return { client, ep };
}

const greedy = { temperature: 0, maxTokens: 0 };

window.scenarios = {
  async runtime() {
    const client = new SippClient();
    const rt = await client.runtime();
    await client.close();
    return { ...rt, crossOriginIsolated };
  },

  // Greedy generation on the build the page picks (or args.build), with its stats.
  async greedy(args) {
    const { client, ep } = await localClient(args, { ...(args.build ? { build: args.build } : {}), ...(args.logLevel ? { logLevel: args.logLevel } : {}) });
    const run = client.query(args.prompt, { ...greedy, maxTokens: args.maxTokens, endpoint: ep });
    const out = await collect(run);
    const chat = await collect(client.chat([{ role: 'user', content: args.prompt }], { ...greedy, maxTokens: args.maxTokens }));
    await client.close();
    log(`greedy ${out.response.text.length} chars`);
    return { text: out.response.text, pieces: out.pieces, times: out.times, response: out.response, chatText: chat.response.text,
      endpoint: { backend: ep.backend, runtime: ep.runtime, info: ep.info } };
  },

  // Abort after a few pieces: the request ends within one token, and the next one works.
  async abort(args) {
    const { client, ep } = await localClient(args);
    const ctl = new AbortController();
    const run = client.query(args.prompt, { ...greedy, maxTokens: 200, ignoreEos: true, signal: ctl.signal, endpoint: ep });
    let n = 0;
    let afterAbort = 0;
    for await (const p of run.tokens) {
      tick();
      if (ctl.signal.aborted) afterAbort++;
      if (++n === args.abortAfter) ctl.abort();
    }
    const r = await run.response;
    const next = await collect(client.query(args.prompt, { ...greedy, maxTokens: 8, endpoint: ep }));
    await client.close();
    return { finishReason: r.finishReason, generated: r.usage.completionTokens, piecesAfterAbort: afterAbort,
      piecesAfterCancel: r.stats.piecesAfterCancel, next: next.response };
  },

  async embed(args) {
    const { client } = await localClient(args);
    const vectors = await client.embed(args.texts);
    await client.close();
    return { vectors };
  },

  async webgpu(args) {
    const client = new SippClient();
    let error = null;
    try {
      await client.add('gpu', { kind: 'local', source: args.model, options: { backend: 'webgpu' } });
    } catch (e) {
      error = { ...errorOf(e), webgpu: e.webgpu };
    }
    const auto = await client.add('auto', { kind: 'local', source: args.model, options: { backend: 'auto', ctxSize: 256 } });
    const backends = await client.backends();
    await client.close();
    return { error, auto: auto.backend, backends };
  },

  // Errors a user can act on, for options the Node binding refuses the same way.
  async badOptions(args) {
    const { client, ep } = await localClient(args);
    const results = {};
    const tryRun = async (name, fn) => {
      try {
        await fn();
        results[name] = null;
      } catch (e) {
        results[name] = errorOf(e);
      }
    };
    await tryRun('snake', () => client.query('x', { max_tokens: 4 }).response);
    await tryRun('topP', () => client.query('x', { topP: 2, maxTokens: 4 }).response);
    await tryRun('backend', () => client.add('v', { kind: 'local', source: args.model, options: { backend: 'vulkan' } }));
    await tryRun('missing', () => client.add('m', { kind: 'local', source: '/models/none.gguf' }));
    await tryRun('notGguf', () => client.add('n', { kind: 'local', source: new Blob(['not a model']) }));
    await tryRun('threads', () => client.add('t', { kind: 'local', source: args.model, options: { threads: 4096 } }));
    // What needs llama.cpp's chat library, which this runtime lacks: refused by name, and the
    // endpoint still answers afterwards.
    const tool = { type: 'function', function: { name: 'f', parameters: { type: 'object' } } };
    const hi = [{ role: 'user', content: 'Hi' }];
    await tryRun('tools', () => client.chat(hi, { tools: [tool], maxTokens: 4 }).response);
    await tryRun('responseFormat', () => client.chat(hi, { responseFormat: { type: 'json_object' }, maxTokens: 4 }).response);
    await tryRun('grammar', () => client.query('x', { grammar: 'root ::= "a"', maxTokens: 4 }).response);
    const call = { id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } };
    await tryRun('toolMessage', () => client.chat([...hi, { role: 'tool', tool_call_id: 'c1', content: '42' }],
      { maxTokens: 4 }).response);
    await tryRun('toolCalls', () => client.chat([...hi, { role: 'assistant', content: null, tool_calls: [call] }],
      { maxTokens: 4 }).response);
    results.chat = (await client.backends()).chat;
    results.afterRefusals = (await client.chat(hi, { ...greedy, maxTokens: 4, ignoreEos: true }).response).usage.completionTokens;
    await client.close();
    await tryRun('closed', () => client.query('x').response);
    return results;
  },

  // A download, then the same model again (network blocked by the driver between the two).
  async cacheLoad(args) {
    const client = new SippClient();
    if (args.clear) await client.cache.clear();
    const progress = [];
    const ep = await client.add('m', { kind: 'local', source: args.model, sha256: args.sha256,
      onProgress: (p) => progress.push(p.loaded), options: { backend: 'cpu', ctxSize: 256 } });
    const out = await collect(client.query(args.prompt, { ...greedy, maxTokens: 4 }));
    const list = await client.cache.list();
    await client.close();
    return { source: ep.source, progress, list, text: out.response.text };
  },

  // A download whose bytes do not match the sha256 given: refused, and nothing is cached.
  async cacheCorrupt(args) {
    const client = new SippClient();
    await client.cache.clear();
    let error = null;
    try {
      await client.add('m', { kind: 'local', source: args.model, sha256: args.sha256, options: { backend: 'cpu' } });
    } catch (e) {
      error = errorOf(e);
    }
    const list = await client.cache.list();
    const root = await navigator.storage.getDirectory();
    const files = [];
    for await (const [name, h] of root.entries()) {
      if (h.kind === 'directory') for await (const [inner] of h.entries()) files.push(`${name}/${inner}`);
      else files.push(name);
    }
    await client.close();
    return { error, list, files };
  },

  async cacheManage() {
    const client = new SippClient();
    const before = await client.cache.list();
    const deleted = before.length ? await client.cache.delete(before[0].key) : null;
    const after = await client.cache.list();
    let badKey = null;
    try {
      await client.cache.delete('nope');
    } catch (e) {
      badKey = errorOf(e);
    }
    await client.cache.clear();
    const cleared = await client.cache.list();
    await client.close();
    return { before, deleted, after, badKey, cleared };
  },

  // A gateway endpoint: the same calls over HTTP.
  async gateway(args) {
    const client = new SippClient();
    const ep = await client.add('gw', { kind: 'gateway', baseUrl: args.baseUrl, target: args.target, token: args.token });
    const out = await collect(client.query(args.prompt, { ...greedy, maxTokens: args.maxTokens }));
    let tools = null;
    try {
      await client.chat([{ role: 'user', content: 'Hi' }], { tools: [], maxTokens: 4 }).response;
    } catch (e) {
      tools = errorOf(e);
    }
    await client.close();
    return { text: out.response.text, pieces: out.pieces.length, response: out.response, kind: ep.kind, tools };
  },

  // sipp verify --backends ...,browser: per prompt (token ids) the batched and the incremental
  // logits, uploaded as raw float32 to the driver's server, and the greedy continuation.
  async verify(args) {
    const { client, ep } = await localClient({ ...args, ctxSize: args.ctxSize });
    const greedy = [];
    for (let p = 0; p < args.prompts.length; p++) {
      for (const incremental of [false, true]) {
        const logits = await ep.logits(args.prompts[p], { incremental });
        const res = await fetch(`${args.upload}/p${p}.${incremental ? 'inc' : 'batched'}.f32`, { method: 'PUT', body: logits });
        if (!res.ok) throw new Error(`upload of prompt ${p} failed: HTTP ${res.status}`);
        tick();
      }
      greedy.push(await ep.continueTokens(args.prompts[p], args.greedyTokens));
      tick();
    }
    await client.close();
    return { nVocab: ep.info.nVocab, greedy, runtime: ep.runtime, backend: ep.backend, userAgent: navigator.userAgent };
  },
};
window.harnessReady = true;
