'use strict';
/**
 * Shared by the Node binding's tests: paths, tiny synthetic models, subprocess helpers.
 *
 * Models are made once per test file by build/bin/sipp-synth in a temporary directory: llama
 * architecture, random weights, the llama-spm tokenizer, two blocks of width 64. Their text is
 * meaningless; loading, tokenizing, scheduling and streaming are real.
 */
const assert = require('node:assert/strict');
const { execFileSync, spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const PKG = path.resolve(__dirname, '..');
const REPO = path.resolve(PKG, '..', '..');
const BUILD = (() => {
  const b = process.env.SIPP_BUILD || 'build';
  return path.isAbsolute(b) ? b : path.join(REPO, b);
})();
const SYNTH = path.join(BUILD, 'bin', 'sipp-synth');
const SIPP = path.join(BUILD, 'bin', 'sipp');
const VOCAB = path.join(REPO, 'build', 'llama', 'vocab', 'ggml-vocab-llama-spm.gguf');
const TINY = ['--n-embd', '64', '--n-layer', '2', '--n-head', '4', '--n-head-kv', '2', '--n-ff', '128', '--type', 'q8_0'];
const FAKE_GATEWAY = path.join(REPO, 'bindings', 'python', 'tests', 'fake_gateway.py');

// the machine is shared: one thread per engine, few slots
const THREADS = 1;
const PARALLEL = 4;

let tmp = null;
const models = new Map();

function tmpdir() {
  if (!tmp) {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sipp-nodetest-'));
    process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));
  }
  return tmp;
}

/** The path of a tiny synthetic model, made on first use. */
function model(name = 'tiny', extra = []) {
  if (models.has(name)) return models.get(name);
  for (const p of [SYNTH, VOCAB]) if (!fs.existsSync(p)) throw new Error(`${p} is missing; build with make -j2 all`);
  const out = path.join(tmpdir(), `${name}.gguf`);
  execFileSync(SYNTH, ['--out', out, '--vocab', VOCAB, ...TINY, ...extra], { stdio: 'pipe' });
  models.set(name, out);
  return out;
}

/** Runs a script in a fresh node with the given environment changes (null removes a variable). */
function runNode(code, envChanges = {}) {
  const env = { ...process.env };
  for (const [k, v] of Object.entries(envChanges)) {
    if (v === null) delete env[k];
    else env[k] = v;
  }
  return spawnSync(process.execPath, ['-e', code], { cwd: PKG, env, encoding: 'utf8', timeout: 120000 });
}

/** Starts the stand-in gateway (bindings/python/tests/fake_gateway.py); resolves to {url, stop()}. */
function startFakeGateway(token) {
  return new Promise((resolve, reject) => {
    const args = [FAKE_GATEWAY, ...(token ? ['--token', token] : [])];
    const proc = spawn('python3', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.on('error', reject);
    proc.on('exit', (code) => reject(new Error(`fake gateway exited with ${code}`)));
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/PORT (\d+)/);
      if (m) resolve({ url: `http://127.0.0.1:${m[1]}`, stop: () => proc.kill() });
    });
  });
}

/** Why `sipp serve` cannot be tested, or null when it can. */
function gatewayMissingReason() {
  if (!fs.existsSync(SIPP)) return `${SIPP} is not built`;
  const r = spawnSync(SIPP, ['serve', '--help'], { encoding: 'utf8', timeout: 30000 });
  if (`${r.stdout}${r.stderr}`.includes('not implemented')) {
    return '`sipp serve` is not implemented in this build yet (the gateway is being built)';
  }
  return null;
}

/** Measures the event loop's longest stall while fn runs: a timer that should fire every 5 ms. */
async function maxLoopStall(fn) {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  try {
    await fn();
  } finally {
    clearInterval(timer);
  }
  return worst;
}

/** A chat that must stream the tool call r (a finished reply of the same chat) as toolCall deltas:
 * the name once, the arguments in pieces that join to r's. */
async function assertToolCallDeltas(client, msgs, opts, r) {
  let args = '';
  let name = null;
  for await (const d of client.chat(msgs, opts).deltas) {
    if (d.type === 'toolCall') {
      args += d.arguments;
      if (d.name) name = d.name;
    }
  }
  assert.equal(name, r.toolCalls[0].function.name);
  assert.equal(args, r.toolCalls[0].function.arguments);
}

module.exports = {
  PKG, REPO, BUILD, SIPP, SYNTH, THREADS, PARALLEL, tmpdir, model, runNode, startFakeGateway, gatewayMissingReason,
  maxLoopStall, assertToolCallDeltas,
};
