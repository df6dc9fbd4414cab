'use strict';
// Gateway endpoints: the fetch client against the stand-in server (bindings/python/tests/
// fake_gateway.py, which checks the protocol exactly), and against a real `sipp serve` on loopback,
// skipped with the reason while the gateway is not built.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const { spawn } = require('node:child_process');
const S = require('./support');
const { SippClient, SippError } = require('..');

const MODEL = 'fake-model';

async function state(url) {
  return (await fetch(`${url}/debug/state`)).json();
}

describe('gateway endpoint (stand-in server)', () => {
  let gw;
  let client;
  let ep;
  before(async () => {
    gw = await S.startFakeGateway('s3cret');
    client = new SippClient();
    ep = await client.add('gw', { kind: 'gateway', baseUrl: gw.url, token: 's3cret' });
  });
  after(async () => {
    await client.close();
    gw.stop();
  });

  it('finds the model through /v1/models and sends the token', async () => {
    assert.equal(ep.model, MODEL);
    assert.equal(ep.kind, 'gateway');
    assert.equal((await state(gw.url)).last_auth, 'Bearer s3cret');
  });

  it('queries with the OpenAI field names', async () => {
    const q = client.query('Hello', { endpoint: ep, maxTokens: 3, temperature: 0, seed: 7, stop: ['x'], contextKey: 'k1' });
    const pieces = [];
    for await (const t of q.tokens) pieces.push(t);
    const r = await q.response;
    assert.deepEqual(pieces, [' w0', ' w1', ' w2']);
    assert.equal(r.text, ' w0 w1 w2');
    assert.equal(r.finishReason, 'length');
    assert.equal(r.usage.completionTokens, 3);
    assert.equal(r.stats.ttft_ms, 1);
    const body = (await state(gw.url)).last_body;
    assert.deepEqual(body, {
      model: MODEL, prompt: 'Hello', stream: true, stream_options: { include_usage: true }, max_tokens: 3,
      temperature: 0, seed: 7, stop: ['x'], context_key: 'k1',
    });
  });

  it('closes the connection when the loop breaks early', async () => {
    const before = (await state(gw.url)).disconnects;
    const q = client.query('slow please', { endpoint: ep });
    for await (const t of q.tokens) {
      assert.equal(t, ' w0');
      break;
    }
    assert.equal((await q.response).finishReason, 'cancelled');
    const deadline = Date.now() + 5000;
    while ((await state(gw.url)).disconnects === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.ok((await state(gw.url)).disconnects > before);
  });

  it('cancels with an AbortSignal', async () => {
    const ac = new AbortController();
    const q = client.query('slow please', { endpoint: ep, signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    const r = await q.response;
    assert.equal(r.finishReason, 'cancelled');
    assert.ok(r.text.startsWith(' w0'));
  });

  it('chats', async () => {
    const q = client.chat([{ role: 'user', content: 'a b' }], { endpoint: ep });
    const pieces = [];
    for await (const t of q.tokens) pieces.push(t);
    assert.deepEqual(pieces, ['echo:', ' a', ' b']);
    assert.equal((await q.response).finishReason, 'stop');
    assert.deepEqual((await state(gw.url)).last_body.messages, [{ role: 'user', content: 'a b' }]);
  });

  it('embeds, normalising on the client', async () => {
    const v = await client.embed('abc', { endpoint: ep });
    const raw = [3, 1, 2, 3, 4, 5, 6, 7];
    const n = Math.hypot(...raw);
    v.forEach((x, i) => assert.ok(Math.abs(x - raw[i] / n) < 1e-9));
    assert.equal((await client.embed(['abc', 'de'], { endpoint: ep, normalize: false }))[1][0], 2);
  });

  it('maps gateway errors to SippErrors', async () => {
    await assert.rejects(client.query('fail', { endpoint: ep }).response,
      (e) => e instanceof SippError && e.code === 'internal_error' && e.httpStatus === 500 && /the engine failed/.test(e.message));
    await assert.rejects(client.query('midfail', { endpoint: ep }).response, (e) => e.code === 'internal_error');
    await assert.rejects(client.query('Hello', { endpoint: ep, maxTokens: 0 }).response,
      (e) => e.code === 'invalid_argument' && /max_tokens/.test(e.message));
  });

  it('rejects a wrong token, an unknown model, an unreachable gateway', async () => {
    const c = new SippClient();
    await assert.rejects(c.add('a', { kind: 'gateway', baseUrl: gw.url, token: 'wrong' }),
      (e) => e.code === 'gateway' && e.httpStatus === 401 && /token/.test(e.message));
    await assert.rejects(c.add('b', { kind: 'gateway', baseUrl: gw.url, token: 's3cret', model: 'other' }),
      (e) => e.code === 'not_found' && e.message.includes(MODEL));
    const port = await new Promise((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const p = srv.address().port;
        srv.close(() => resolve(p));
      });
    });
    await assert.rejects(c.add('c', { kind: 'gateway', baseUrl: `http://127.0.0.1:${port}` }),
      (e) => e.code === 'gateway' && /cannot reach/.test(e.message));
    await c.close();
  });
});

/** Starts `sipp serve MODEL` on a free loopback port; resolves to { proc, url } once it is ready. */
async function startServe(model, args) {
  const port = await new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const p = srv.address().port;
      srv.close(() => resolve(p));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  const proc = spawn(S.SIPP, ['serve', model, '--port', String(port), '--threads', '1', ...args, '--backend', 'cpu'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const deadline = Date.now() + 60000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`sipp serve exited with ${proc.exitCode}: ${stderr}`);
    try {
      if ((await fetch(`${url}/ready`)).ok) break;
    } catch {}
    if (Date.now() > deadline) {
      proc.kill();
      throw new Error(`sipp serve did not become ready: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, url };
}

describe('gateway endpoint (sipp serve)', () => {
  const reason = S.gatewayMissingReason();
  let proc;
  let url;
  let client;
  let ep;
  before(async () => {
    if (reason) return;
    ({ proc, url } = await startServe(S.model(), ['--parallel', '2', '--ctx-size', '1024']));
    client = new SippClient();
    ep = await client.add('gw', { kind: 'gateway', baseUrl: url });
  });
  after(async () => {
    if (client) await client.close();
    if (proc) proc.kill();
  });

  it('streams a query and a chat, and embeds', { skip: reason || false }, async () => {
    const q = client.query('Hello', { endpoint: ep, maxTokens: 6, temperature: 0, ignoreEos: true });
    const pieces = [];
    for await (const t of q.tokens) pieces.push(t);
    const r = await q.response;
    assert.equal(r.finishReason, 'length');
    assert.equal(pieces.join(''), r.text);
    assert.equal(r.usage.completionTokens, 6);
    assert.equal(typeof r.usage.cachedTokens, 'number'); // from usage.prompt_tokens_details
    const c = await client.chat([{ role: 'user', content: 'Hi' }], { endpoint: ep, maxTokens: 4 }).response;
    assert.ok(['stop', 'length'].includes(c.finishReason));
    const v = await client.embed('hello', { endpoint: ep });
    assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-4);
  });

  it('gives the same greedy text as a local endpoint', { skip: reason || false }, async () => {
    const local = new SippClient();
    await local.add('l', { kind: 'local', model: S.model(), options: { backend: 'cpu', threads: 1, parallel: 1, ctxSize: 1024 } });
    const want = (await local.query('Compare', { maxTokens: 6, temperature: 0, ignoreEos: true }).response).text;
    await local.close();
    const got = (await client.query('Compare', { endpoint: ep, maxTokens: 6, temperature: 0, ignoreEos: true }).response).text;
    assert.equal(got, want);
  });

  it('cancels when the loop breaks early', { skip: reason || false }, async () => {
    const q = client.query('Long', { endpoint: ep, maxTokens: 500, ignoreEos: true });
    for await (const _ of q.tokens) break;
    assert.equal((await q.response).finishReason, 'cancelled');
  });
});

describe('gateway endpoint (sipp serve, a tool-calling chat template)', () => {
  const reason = S.gatewayMissingReason();
  let proc;
  let client;
  let ep;
  before(async () => {
    if (reason) return;
    const tmpl = require('node:path').join(S.REPO, 'build', 'llama', 'source', 'models', 'templates',
      'NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja');
    let url;
    ({ proc, url } = await startServe(S.model('hermes', ['--chat-template-file', tmpl]), ['--parallel', '1', '--ctx-size', '4096']));
    client = new SippClient();
    ep = await client.add('gw', { kind: 'gateway', baseUrl: url });
  });
  after(async () => {
    if (client) await client.close();
    if (proc) proc.kill();
  });

  // The tools go to the gateway, and its tool call comes back as the response's toolCalls and as
  // typed deltas, as from a local endpoint: passed on and then lost would be a silent half.
  it('returns the tool calls of a chat with tools', { skip: reason || false }, async () => {
    const tools = [{ type: 'function', function: { name: 'pick', parameters: {
      type: 'object', properties: { n: { type: 'integer', minimum: 1, maximum: 3 } }, required: ['n'], additionalProperties: false } } }];
    const msgs = [{ role: 'user', content: 'Pick one.' }];
    const opts = { endpoint: ep, tools, toolChoice: 'required', maxTokens: 400, temperature: 0 };
    const r = await client.chat(msgs, opts).response;
    assert.equal(r.finishReason, 'tool_calls');
    assert.equal(r.toolCalls.length, 1);
    assert.equal(r.toolCalls[0].function.name, 'pick');
    assert.match(r.toolCalls[0].id, /^call_/);
    assert.ok([1, 2, 3].includes(JSON.parse(r.toolCalls[0].function.arguments).n));
    await S.assertToolCallDeltas(client, msgs, opts, r);
    // tokens (the content) of a reply that is only a tool call: none, and the loop ends
    const pieces = [];
    for await (const t of client.chat(msgs, opts).tokens) pieces.push(t);
    assert.equal(pieces.join(''), r.text);
  });
});
