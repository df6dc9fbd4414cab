/**
 * bench.js: decode tokens/s of sipp's browser runtime and of @wllama/wllama (a llama.cpp-in-WASM
 * peer, pinned in tests/integration/web/package.json) on one model, in one page, with the same
 * thread count, prompt and greedy sampling; every run generates exactly `tokens` tokens (end of
 * generation ignored). Decode speed counts the tokens after the first, over the time after the
 * first, as sipp's own stats do; wllama's figure is computed the same way from its stream.
 */
import { SippClient } from '/bindings/web/index.js';
import { Wllama } from '/tests/integration/web/node_modules/@wllama/wllama/esm/index.js';

const log = (l) => { document.getElementById('log').textContent += `${l}\n`; };

async function sippRun(args) {
  const client = new SippClient({ threads: args.threads });
  const ep = await client.add('m', { kind: 'local', source: args.model,
    options: { backend: 'cpu', ctxSize: 1024, threads: args.threads } });
  const runs = [];
  for (let i = 0; i < args.reps + 1; i++) {
    const run = client.query(args.prompt, { temperature: 0, maxTokens: args.tokens, ignoreEos: true });
    const r = await run.response;
    if (i > 0) runs.push(r.timings.decodeTokensPerS); // the first run warms up
  }
  await client.close();
  return { decodeTokensPerS: runs, threads: ep.runtime.threads, build: ep.runtime.build };
}

async function wllamaRun(args) {
  const base = '/tests/integration/web/node_modules/@wllama/wllama/esm/wasm/wllama.wasm';
  const w = new Wllama({ default: base, 'single-thread/wllama.wasm': base, 'multi-thread/wllama.wasm': base },
    { suppressNativeLog: true });
  await w.loadModelFromUrl(args.model, { n_threads: args.threads, n_ctx: 1024, useCache: false });
  const runs = [];
  for (let i = 0; i < args.reps + 1; i++) {
    let first = 0;
    let n = 0;
    const stream = await w.createCompletion({ prompt: args.prompt, max_tokens: args.tokens, temperature: 0,
      ignore_eos: true, stream: true });
    for await (const chunk of stream) {
      if (!chunk.choices || !chunk.choices.length) continue;
      n++;
      if (n === 1) first = performance.now();
    }
    const s = (performance.now() - first) / 1000;
    if (i > 0) runs.push(n > 1 ? (n - 1) / s : 0);
  }
  const threads = await w.getNumThreads?.();
  await w.exit();
  return { decodeTokensPerS: runs, threads: threads ?? args.threads };
}

window.scenarios = {
  async bench(args) {
    const out = { crossOriginIsolated };
    out.sipp = await sippRun(args);
    log(`sipp ${JSON.stringify(out.sipp)}`);
    try {
      out.wllama = await wllamaRun(args);
    } catch (e) {
      out.wllama = { error: e.message };
    }
    log(`wllama ${JSON.stringify(out.wllama)}`);
    return out;
  },
};
window.harnessReady = true;
