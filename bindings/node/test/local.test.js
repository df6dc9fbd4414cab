'use strict';
// A local endpoint end to end: query, chat, streaming, cancel, AbortSignal, concurrency, the event
// loop staying free, context keys, embeddings, and closing under running requests.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const S = require('./support');
const { SippClient, SippError } = require('..');

describe('local endpoint', () => {
  let client;
  let ep;

  before(async () => {
    client = new SippClient();
    ep = await client.add('local-cpu', {
      kind: 'local', model: S.model(), options: { backend: 'cpu', threads: S.THREADS, parallel: S.PARALLEL, ctxSize: 2048 },
    });
  });
  after(() => client.close());

  it('answers a query with text, finish reason, usage and stats', async () => {
    const q = client.query('Once upon a time', { endpoint: ep, maxTokens: 8, temperature: 0 });
    assert.equal(typeof q.cancel, 'function');
    const r = await q.response;
    assert.equal(typeof r.text, 'string');
    assert.ok(r.text.length > 0);
    assert.equal(r.finishReason, 'length');
    assert.equal(r.usage.completionTokens, 8);
    assert.ok(r.usage.promptTokens > 0);
    assert.equal(r.usage.totalTokens, r.usage.promptTokens + 8);
    for (const k of ['ttftMs', 'prefillTokensPerS', 'decodeTokensPerS', 'totalMs', 'generatedTokens']) assert.ok(k in r.stats, k);
    assert.equal(r.stats.backend, 'cpu');
    assert.equal(r.endpoint, 'local-cpu');
    assert.equal(ep.backend.backend, 'cpu');
    assert.equal(ep.info.nEmbd, 64);
  });

  it('calls tools under a grammar, streams typed deltas, and enforces a JSON schema', async () => {
    const tmpl = require('path').join(__dirname, '..', '..', '..', 'build', 'llama', 'source', 'models', 'templates',
      'NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja');
    const h = await client.add('hermes', {
      kind: 'local', model: S.model('hermes', ['--chat-template-file', tmpl]),
      options: { backend: 'cpu', threads: S.THREADS, parallel: 1, ctxSize: 4096 },
    });
    try {
      const tools = [{ type: 'function', function: { name: 'pick', parameters: {
        type: 'object', properties: { n: { type: 'integer', minimum: 1, maximum: 3 } }, required: ['n'], additionalProperties: false } } }];
      const msgs = [{ role: 'user', content: 'Pick one.' }];
      const opts = { endpoint: h, tools, toolChoice: 'required', maxTokens: 400, temperature: 0 };
      const r = await client.chat(msgs, opts).response;
      assert.equal(r.finishReason, 'tool_calls');
      assert.equal(r.toolCalls[0].function.name, 'pick');
      assert.ok([1, 2, 3].includes(JSON.parse(r.toolCalls[0].function.arguments).n));
      await S.assertToolCallDeltas(client, msgs, opts, r);
      const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
      const j = await client.chat(msgs, { endpoint: h, responseFormat: { type: 'json_schema', json_schema: { name: 'x', schema } },
        maxTokens: 200, temperature: 0 }).response;
      assert.equal(typeof JSON.parse(j.text).ok, 'boolean');
      await assert.rejects(client.chat(msgs, { ...opts, toolChoice: { type: 'function', function: { name: 'nope' } } }).response,
        (e) => e instanceof SippError && e.message.includes("'nope'"));
    } finally {
      await client.remove(h);
    }
  });

  it('finds the endpoint by name and defaults to the first one', async () => {
    const a = await client.query('Hello', { endpoint: 'local-cpu', maxTokens: 4, temperature: 0 }).response;
    const b = await client.query('Hello', { maxTokens: 4, temperature: 0 }).response;
    assert.equal(a.text, b.text);
  });

  it('streams tokens that add up to the text', async () => {
    const q = client.query('Streaming:', { endpoint: ep, maxTokens: 12, temperature: 0, ignoreEos: true });
    const pieces = [];
    for await (const t of q.tokens) pieces.push(t);
    const r = await q.response;
    // The pieces the engine published (one per token here), however late the reader thread ran: on
    // a loaded machine a reader of whatever had arrived got all 12 tokens as one piece.
    assert.ok(pieces.length > 1 && pieces.length <= 12, `${pieces.length} pieces`);
    assert.ok(pieces.every((p) => typeof p === 'string' && p.length > 0));
    assert.equal(pieces.join(''), r.text);
    assert.equal(r.usage.completionTokens, 12);
  });

  it('cancels when the loop over tokens breaks early', async () => {
    const q = client.query('Long:', { endpoint: ep, maxTokens: 1000, ignoreEos: true });
    let n = 0;
    for await (const _ of q.tokens) if (++n === 3) break;
    const r = await q.response;
    assert.equal(r.finishReason, 'cancelled');
    assert.ok(r.usage.completionTokens < 1000);
    await idle();
  });

  it('cancels with cancel()', async () => {
    const q = client.query('Cancel me:', { endpoint: ep, maxTokens: -1, ignoreEos: true });
    const it = q.tokens[Symbol.asyncIterator]();
    assert.ok((await it.next()).value);
    q.cancel();
    const r = await q.response;
    assert.equal(r.finishReason, 'cancelled');
    q.cancel(); // harmless after the end
    await idle();
  });

  it('cancels with an AbortSignal, also one aborted before the start', async () => {
    const ac = new AbortController();
    const q = client.query('Abort me:', { endpoint: ep, maxTokens: -1, ignoreEos: true, signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    assert.equal((await q.response).finishReason, 'cancelled');
    const early = client.query('Never:', { endpoint: ep, maxTokens: 50, signal: AbortSignal.abort() });
    const r = await early.response;
    assert.equal(r.finishReason, 'cancelled');
    assert.equal(r.usage.completionTokens, 0); // never submitted
    await idle();
  });

  it('ends a request at timeoutMs', async () => {
    const r = await client.query('Slow:', { endpoint: ep, maxTokens: -1, ignoreEos: true, timeoutMs: 200 }).response;
    assert.equal(r.finishReason, 'cancelled');
    assert.ok(r.stats.totalMs < 5000);
  });

  it('stops at a stop string and leaves it out', async () => {
    const full = (await client.query('A list:', { endpoint: ep, maxTokens: 16, temperature: 0, ignoreEos: true }).response).text;
    const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
    if (!stop.trim()) return;
    const r = await client.query('A list:', { endpoint: ep, maxTokens: 16, temperature: 0, ignoreEos: true, stop: [stop] }).response;
    assert.equal(r.finishReason, 'stop');
    assert.equal(r.text, full.slice(0, full.indexOf(stop)));
  });

  it('reproduces a sample with a seed', async () => {
    const opts = { endpoint: ep, maxTokens: 12, temperature: 0.9, seed: 1234 };
    const a = await client.query('The sky', opts).response;
    const b = await client.query('The sky', opts).response;
    assert.equal(a.text, b.text);
  });

  it('chats with the model template or a named one', async () => {
    const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hello!' }];
    const r = await client.chat(messages, { endpoint: ep, maxTokens: 6, temperature: 0 }).response;
    assert.ok(['stop', 'length'].includes(r.finishReason));
    assert.ok(r.usage.promptTokens > 5);
    const r2 = await client.chat([{ role: 'user', content: 'Hi' }], { endpoint: ep, maxTokens: 4, chatTemplate: 'chatml' }).response;
    assert.ok(['stop', 'length'].includes(r2.finishReason));
  });

  it('runs concurrent promises together without blocking the event loop', async () => {
    let results;
    const t0 = performance.now();
    const stall = await S.maxLoopStall(async () => {
      const qs = Array.from({ length: 8 }, (_, i) =>
        client.query(`Promise ${i} says`, { endpoint: ep, maxTokens: 48, temperature: 0, ignoreEos: true }));
      results = await Promise.all(qs.map((q) => q.response));
    });
    const took = performance.now() - t0;
    for (const r of results) {
      assert.equal(r.finishReason, 'length');
      assert.equal(r.usage.completionTokens, 48);
    }
    assertLoopFree(stall, took);
    assert.ok(client.stats(ep).meanBusySlots > 1, 'the requests were not batched together');
  });

  it('reuses the slot of a context key', async () => {
    const key = `conv-${process.hrtime.bigint()}`;
    const messages = [{ role: 'user', content: 'Remember the number seven. '.repeat(4) }];
    const first = await client.chat(messages, { endpoint: ep, maxTokens: 4, temperature: 0, contextKey: key }).response;
    messages.push({ role: 'assistant', content: first.text }, { role: 'user', content: 'Which number?' });
    const second = await client.chat(messages, { endpoint: ep, maxTokens: 4, temperature: 0, contextKey: key }).response;
    assert.ok(second.usage.cachedTokens > 0);
  });

  it('embeds a string or an array of strings', async () => {
    const v = await client.embed('hello world', { endpoint: ep });
    assert.ok(Array.isArray(v));
    assert.equal(v.length, 64);
    assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-4);
    const vs = await client.embed(['hello world', 'something else'], { endpoint: ep });
    assert.equal(vs.length, 2);
    vs[0].forEach((x, i) => assert.ok(Math.abs(x - v[i]) < 1e-5));
    const raw = await client.embed('hello world', { endpoint: ep, normalize: false });
    const n = Math.hypot(...raw);
    raw.forEach((x, i) => assert.ok(Math.abs(x / n - v[i]) < 1e-4));
    assert.deepEqual(await client.embed([], { endpoint: ep }), []);
  });

  it('loads a model without blocking the event loop', async () => {
    const c = new SippClient();
    const t0 = performance.now();
    const stall = await S.maxLoopStall(() =>
      c.add('other', { kind: 'local', model: S.model(), options: { backend: 'cpu', threads: 1, parallel: 1 } }));
    const took = performance.now() - t0;
    await c.close();
    assertLoopFree(stall, took);
  });

  // A 5 ms timer ran during work that took `took` ms. Had the work blocked the loop, the timer
  // would have stalled for about all of it; the shared machine alone causes much shorter stalls.
  function assertLoopFree(stall, took) {
    assert.ok(stall < Math.max(100, took * 0.6), `the event loop stalled for ${stall.toFixed(0)} of ${took.toFixed(0)} ms`);
  }

  async function idle() {
    const deadline = Date.now() + 10000;
    let s;
    while (Date.now() < deadline) {
      s = client.stats(ep);
      if (s.running === 0 && s.queued === 0) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.fail(`requests still run after cancel: ${JSON.stringify(s)}`);
  }
});

describe('lifetime', () => {
  it('ends open streams when the client closes', async () => {
    const c = new SippClient();
    await c.add('m', { kind: 'local', model: S.model(), options: { backend: 'cpu', threads: S.THREADS, parallel: 2 } });
    const q = c.query('Open:', { maxTokens: -1, ignoreEos: true });
    const it = q.tokens[Symbol.asyncIterator]();
    await it.next();
    await c.close(); // frees the engine under the request: it must end, not crash
    assert.equal((await q.response).finishReason, 'cancelled');
    const again = c.query('again');
    await assert.rejects(again.response, (e) => e instanceof SippError && e.code === 'closed');
  });

  it('removes an endpoint', async () => {
    const c = new SippClient();
    const ep = await c.add('m', { kind: 'local', model: S.model(), options: { backend: 'cpu', threads: 1, parallel: 1 } });
    await c.remove(ep);
    assert.deepEqual(c.endpoints, {});
    await assert.rejects(c.query('Hi', { endpoint: ep }).response, (e) => e.code === 'not_found');
    await c.add('m', { kind: 'local', model: S.model(), options: { backend: 'cpu', threads: 1, parallel: 1 } });
    await c.close();
  });
});
