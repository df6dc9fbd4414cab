'use strict';
// SIPP_NODE_BACKEND and SIPP_ARTIFACT choose the artifact and backend when the package loads. Each
// case runs in a fresh node, since the choice is made once per process. Vulkan runs on lavapipe,
// which ggml uses only when GGML_VK_VISIBLE_DEVICES names it; there is one Vulkan generation.
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const S = require('./support');

const probe = (load) => `
const sipp = require('.');
(async () => {
  const out = { selection: sipp.backendSelection() };
  if (${load}) {
    const c = new sipp.SippClient();
    const ep = await c.add('m', { kind: 'local', model: ${JSON.stringify(S.model())}, options: { threads: 1, parallel: 1, ctxSize: 256 } });
    const r = await c.query('Hello', { maxTokens: 4, temperature: 0 }).response;
    Object.assign(out, { backend: ep.backend, finish: r.finishReason, statsBackend: r.stats.backend, runtime: await sipp.runtimeInfo() });
    await c.close();
  }
  console.log('RESULT ' + JSON.stringify(out));
})().catch((e) => { console.error(e.code, e.message); process.exit(1); });`;

function artifactsWith(backend) {
  const root = path.join(S.BUILD, 'artifacts');
  if (!fs.existsSync(root)) return [];
  return fs.readdirSync(root).map((n) => path.join(root, n)).filter((d) => {
    try {
      return JSON.parse(fs.readFileSync(path.join(d, 'manifest.json'), 'utf8')).backends.includes(backend);
    } catch {
      return false;
    }
  }).map((d) => fs.realpathSync(d));
}

function result(r) {
  assert.equal(r.status, 0, r.stderr);
  const line = r.stdout.split('\n').filter((l) => l.startsWith('RESULT ')).pop();
  return JSON.parse(line.slice('RESULT '.length));
}

describe('backend selection by SIPP_NODE_BACKEND', () => {
  it('cpu', () => {
    const out = result(S.runNode(probe(true), { SIPP_NODE_BACKEND: 'cpu', SIPP_ARTIFACT: null }));
    assert.equal(out.selection.backend, 'cpu');
    assert.equal(out.selection.decision.backend, 'cpu');
    assert.equal(out.backend.backend, 'cpu');
    assert.equal(out.backend.devices, 'CPU');
    assert.equal(out.statsBackend, 'cpu');
    assert.equal(out.finish, 'length');
  });

  it('auto by default, on the default artifact', () => {
    const out = result(S.runNode(probe(false), { SIPP_NODE_BACKEND: null, SIPP_ARTIFACT: null }));
    assert.equal(out.selection.backend, 'auto');
    assert.equal(out.selection.artifact, fs.realpathSync(path.join(S.BUILD, 'artifact')));
  });

  it('vulkan through lavapipe', (t) => {
    if (!artifactsWith('vulkan').length) return t.skip('no artifact with the vulkan backend (make BACKENDS="cpu vulkan")');
    // lavapipe is software: a private lease directory keeps other sipp processes on this machine
    // (other test suites) from holding "the GPU" while this runs
    const r = S.runNode(probe(true), {
      SIPP_NODE_BACKEND: 'vulkan', GGML_VK_VISIBLE_DEVICES: '0', SIPP_ARTIFACT: null, SIPP_LEASE_DIR: path.join(S.tmpdir(), 'leases'),
    });
    if (r.status !== 0 && r.stderr.includes('not available')) {
      return t.skip(`no Vulkan device even with GGML_VK_VISIBLE_DEVICES=0: ${r.stderr.trim()}`);
    }
    const out = result(r);
    assert.equal(out.backend.backend, 'vulkan');
    assert.match(out.backend.devices, /Vulkan/);
    assert.ok(out.backend.gpuLayers > 0);
    assert.equal(out.finish, 'length');
    assert.ok(artifactsWith('vulkan').includes(fs.realpathSync(out.runtime.artifact)));
  });

  it('vulkan without a visible device fails at load, saying why', (t) => {
    if (!artifactsWith('vulkan').length) return t.skip('no artifact with the vulkan backend');
    const r = S.runNode(probe(false), { SIPP_NODE_BACKEND: 'vulkan', GGML_VK_VISIBLE_DEVICES: null, SIPP_ARTIFACT: null });
    if (r.status === 0) return t.skip('this machine has a real Vulkan device; the failure cannot be shown');
    assert.match(r.stderr, /GGML_VK_VISIBLE_DEVICES/);
    assert.match(r.stderr, /usable here: auto, cpu/);
  });

  it('an unknown name lists the usable ones', () => {
    const r = S.runNode(probe(false), { SIPP_NODE_BACKEND: 'quantum' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /SIPP_NODE_BACKEND='quantum' is not a backend sipp knows; usable here: auto, cpu/);
  });

  it('a backend no artifact has', (t) => {
    const missing = ['cuda', 'metal'].filter((b) => !artifactsWith(b).length);
    if (!missing.length) return t.skip('every backend has an artifact here');
    const r = S.runNode(probe(false), { SIPP_NODE_BACKEND: missing[0], SIPP_ARTIFACT: null });
    assert.notEqual(r.status, 0);
    assert.ok(r.stderr.includes(`no artifact has the ${missing[0]} backend`), r.stderr);
    assert.ok(r.stderr.includes(`make BACKENDS="cpu ${missing[0]}"`), r.stderr);
  });

  it('SIPP_ARTIFACT overrides', (t) => {
    const vk = artifactsWith('vulkan');
    const cpuOnly = artifactsWith('cpu').filter((d) => !vk.includes(d));
    if (!cpuOnly.length) return t.skip('no cpu-only artifact (make BACKENDS=cpu)');
    const out = result(S.runNode(probe(true), { SIPP_NODE_BACKEND: 'cpu', SIPP_ARTIFACT: cpuOnly[0] }));
    assert.equal(fs.realpathSync(out.runtime.artifact), cpuOnly[0]);
    const r = S.runNode(probe(false), { SIPP_NODE_BACKEND: 'vulkan', SIPP_ARTIFACT: cpuOnly[0] });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /has only cpu/);
  });
});
