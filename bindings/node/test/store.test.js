'use strict';
/**
 * store: the model store through libsipp (list, pull with progress, info), against a real HTTP
 * server on loopback and a store in a temporary directory.
 */
const test = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');

const { model, tmpdir } = require('./support');

const served = model('tiny');
const bytes = fs.readFileSync(served);
const sha = crypto.createHash('sha256').update(bytes).digest('hex');
process.env.SIPP_MODELS_DIR = path.join(tmpdir(), 'store');
process.env.no_proxy = process.env.NO_PROXY = '127.0.0.1';
const { store, SippError } = require('..');

let server;
let url;

test.before(async () => {
  server = http.createServer((req, res) => {
    if (req.url !== '/tiny-model.gguf') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Length': bytes.length, 'Content-Type': 'application/octet-stream' });
    res.end(req.method === 'HEAD' ? undefined : bytes);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${server.address().port}/tiny-model.gguf`;
});

test.after(() => server.close());

/** Empties the store between tests (the binding has no remove: the files and their metadata go). */
async function empty() {
  for (const m of await store.list()) {
    fs.rmSync(m.path, { force: true });
    fs.rmSync(m.path.replace(/\.gguf$/, '.json'), { force: true });
  }
}

test('pull, list and info through libsipp', async () => {
  await empty();
  const seen = [];
  const r = await store.pull(url, { sha256: sha, onProgress: (p) => void seen.push(p) });
  assert.strictEqual(r.name, 'tiny-model');
  assert.strictEqual(r.verified, true);
  assert.strictEqual(r.already, false);
  assert.strictEqual(r.sha256, sha);
  assert.strictEqual(r.size, bytes.length);
  // the last report may still be queued when the promise settles; give the loop one turn
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(seen.length > 0 && seen[seen.length - 1].fileDone, JSON.stringify(seen.slice(-1)));

  const models = await store.list();
  assert.deepStrictEqual(models.map((m) => m.name), ['tiny-model']);
  assert.strictEqual(models[0].path, r.path);
  assert.strictEqual(models[0].source, url);
  assert.strictEqual(models[0].files[0].sha256, sha);
  assert.strictEqual(models[0].verified, true);
  assert.strictEqual(models[0].recipe, 'llamacpp');

  const facts = await store.info('tiny-model');
  assert.strictEqual(facts.path, r.path);
  assert.strictEqual(facts.architecture, 'llama');
  assert.strictEqual(facts.nLayer, 2);
  assert.strictEqual(facts.nEmbd, 64);
  assert.strictEqual(facts.sha256, sha);
  assert.ok(facts.tensorTypes.some((t) => t.type === 'q8_0'));
  assert.strictEqual((await store.info(served, { hash: false })).sha256, null);

  const again = await store.pull(url);
  assert.strictEqual(again.already, true);
});

test('failures reject with the status as code and a message naming the input', async () => {
  await empty();
  await assert.rejects(store.info('no-such-model'), (e) => e instanceof SippError && e.code === 'not_found' &&
    e.message.includes('no-such-model'));
  await assert.rejects(store.info(__filename), (e) => e.code === 'model_error');
  await assert.rejects(store.pull(url, { sha256: '0'.repeat(64) }), (e) => e instanceof SippError &&
    /sha256/i.test(e.message));
  assert.deepStrictEqual(await store.list(), [], 'a failed pull left a model in the store');
  await assert.rejects(store.pull(url, { shaa256: 'x' }), (e) => e.code === 'invalid_argument' &&
    e.message.includes('shaa256'));
  await assert.rejects(store.pull(42), (e) => e.code === 'invalid_argument');
});

test('onProgress returning false stops the pull', async () => {
  await empty();
  await assert.rejects(store.pull(url, { onProgress: () => false }), (e) => e.code === 'cancelled');
  assert.deepStrictEqual(await store.list(), []);
});
