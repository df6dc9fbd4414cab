'use strict';
// Failure paths: every error is a SippError whose code is libsipp's status name and whose message
// names the input, the problem and the next step.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const S = require('./support');
const { SippClient, SippError } = require('..');

const isCode = (code, ...words) => (e) => {
  assert.ok(e instanceof SippError, `not a SippError: ${e}`);
  assert.equal(e.code, code, e.message);
  for (const w of words) assert.ok(e.message.includes(w), `'${w}' not in: ${e.message}`);
  return true;
};

describe('errors', () => {
  let client;
  before(async () => {
    client = new SippClient();
    await client.add('m', { kind: 'local', model: S.model(), options: { backend: 'cpu', ctxSize: 256, parallel: 1, threads: S.THREADS } });
  });
  after(() => client.close());

  it('rejects a missing model file, naming it', async () => {
    const missing = path.join(S.tmpdir(), 'no-such-model.gguf');
    const c = new SippClient();
    await assert.rejects(c.add('x', { kind: 'local', model: missing, options: { backend: 'cpu' } }), isCode('not_found', missing));
    assert.deepEqual(c.endpoints, {}); // a failed add leaves nothing behind
    await assert.rejects(c.query('Hi').response, isCode('invalid_argument', 'no endpoint'));
    await c.close();
  });

  it('rejects a file that is not a GGUF model', async () => {
    const garbage = path.join(S.tmpdir(), 'garbage.gguf');
    fs.writeFileSync(garbage, 'this is not a model'.repeat(100));
    const c = new SippClient();
    await assert.rejects(c.add('x', { kind: 'local', model: garbage, options: { backend: 'cpu' } }), isCode('model_error', 'GGUF'));
    await c.close();
  });

  it('rejects bad endpoint options', async () => {
    const c = new SippClient();
    const add = (spec) => c.add('x', spec);
    await assert.rejects(add({ kind: 'local', model: S.model(), options: { backend: 'quantum' } }), isCode('invalid_argument', 'quantum', 'vulkan'));
    await assert.rejects(add({ kind: 'local', model: S.model(), options: { threads: 'two' } }), isCode('invalid_argument', 'threads'));
    await assert.rejects(add({ kind: 'local', model: S.model(), options: { ctx_size: 5 } }), isCode('invalid_argument', 'ctx_size'));
    await assert.rejects(add({ kind: 'local' }), isCode('invalid_argument', 'model'));
    await assert.rejects(add({ kind: 'remote' }), isCode('invalid_argument', 'kind'));
    await assert.rejects(add({ kind: 'gateway', baseUrl: '127.0.0.1:8080' }), isCode('invalid_argument', 'baseUrl'));
    await assert.rejects(c.add('', { kind: 'local', model: S.model() }), isCode('invalid_argument', 'name'));
    await c.close();
  });

  it('rejects bad request options, from JavaScript and from libsipp', async () => {
    const cases = [
      [{ temperature: -1 }, 'temperature'], // checked by libsipp
      [{ maxTokens: 0 }, 'max_tokens'],
      [{ topP: 2 }, 'top_p'],
      [{ temperature: 'hot' }, 'temperature'], // checked here
      [{ seed: -5 }, 'seed'],
      [{ stop: [''] }, 'stop'],
      [{ timeoutMs: 0 }, 'timeoutMs'],
      [{ max_tokens: 3 }, 'maxTokens'], // a snake_case name gets a hint
      [{ signal: 'abort' }, 'AbortSignal'],
    ];
    for (const [opts, word] of cases) {
      const q = client.query('Hi', opts);
      await assert.rejects(q.response, isCode('invalid_argument', word));
      await assert.rejects(async () => { for await (const _ of q.tokens); }, isCode('invalid_argument')); // the iterator throws it too
    }
    await assert.rejects(client.query('').response, isCode('invalid_argument', 'empty'));
    await assert.rejects(client.query(42).response, isCode('invalid_argument', 'prompt'));
  });

  it('rejects bad messages', async () => {
    for (const m of [[], 'hello', [{ role: 'user' }], [{ role: 'user', content: 3 }], [42]]) {
      await assert.rejects(client.chat(m).response, isCode('invalid_argument', 'message'));
    }
  });

  it('rejects a prompt longer than the context', async () => {
    await assert.rejects(client.query('word '.repeat(400), { maxTokens: 4 }).response, isCode('context_full', 'context'));
  });

  it('rejects unknown and duplicate endpoints', async () => {
    await assert.rejects(client.query('Hi', { endpoint: 'nope' }).response, isCode('not_found', 'nope', 'm'));
    await assert.rejects(client.add('m', { kind: 'local', model: S.model() }), isCode('invalid_argument', 'already'));
    await assert.rejects(client.embed(42), isCode('invalid_argument', 'embed'));
  });

  it('takes cacheTypeK and cacheTypeV and refuses what cannot run', async () => {
    const wide = S.model('wide-heads', ['--n-embd', '128', '--n-head', '4', '--n-ff', '256']); // 32-wide heads
    const c = new SippClient();
    await c.add('q8', { kind: 'local', model: wide, options: { cacheTypeK: 'q8_0', cacheTypeV: 'q8_0', ctxSize: 512, parallel: 1, threads: S.THREADS } });
    const r = await c.query('Hello', { endpoint: 'q8', maxTokens: 4, temperature: 0 }).response;
    assert.ok(r.text.length > 0);
    await assert.rejects(c.add('bad', { kind: 'local', model: wide, options: { cacheTypeK: 'q5_1' } }),
      /options.cacheTypeK must be 'f16', 'q8_0' or 'q4_0'/);
    await assert.rejects(c.add('nofa', { kind: 'local', model: wide, options: { backend: 'cpu', cacheTypeV: 'q8_0', parallel: 1, threads: S.THREADS } }),
      isCode('invalid_argument', "cache_type_v 'q8_0' needs flash attention"));
    await c.close();
  });

  it('takes flashAttn and refuses a bad one', async () => {
    const c = new SippClient();
    const ep = await c.add('fa', { kind: 'local', model: S.model(), options: { backend: 'cpu', flashAttn: 'on', parallel: 1, threads: S.THREADS } });
    assert.ok(ep.backend.reason.includes('flash attention on (asked)'), ep.backend.reason);
    await assert.rejects(c.add('bad', { kind: 'local', model: S.model(), options: { flashAttn: 'fast' } }), isCode('invalid_argument', 'flashAttn'));
    await c.close();
  });

  it('refuses everything once closed', async () => {
    const c = new SippClient();
    const ep = await c.add('m', { kind: 'local', model: S.model(), options: { backend: 'cpu', parallel: 1, threads: S.THREADS } });
    await c.close();
    await c.close(); // idempotent
    await assert.rejects(c.query('Hi').response, isCode('closed', 'closed'));
    await assert.rejects(c.chat([{ role: 'user', content: 'Hi' }]).response, isCode('closed'));
    await assert.rejects(c.embed('Hi'), isCode('closed'));
    await assert.rejects(c.add('n', { kind: 'local', model: S.model() }), isCode('closed'));
    assert.throws(() => c.stats(), isCode('closed'));
    await assert.rejects(c.query('Hi', { endpoint: ep }).response, isCode('closed'));
  });
});
