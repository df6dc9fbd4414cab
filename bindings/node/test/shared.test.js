'use strict';
// One source for the client rules: the Node binding's errors, options, query, gateway and client are
// the browser package's ES modules (bindings/web), loaded with require(), not copies of them. A copy
// pasted back into bindings/node/lib fails the identity checks here. Also: the Node.js version check
// that comes before the first require() of an ES module, and the two gateway profiles (the browser
// package's SippClient runs in Node too, for its gateway endpoint).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const S = require('./support');
const sipp = require('..');

const WEB = path.join(S.REPO, 'bindings', 'web');
const web = (name) => require(path.join(WEB, `${name}.js`));
const lib = (name) => require(path.join(S.PKG, 'lib', name));
const MODEL = 'fake-model';

describe('the shared modules', () => {
  for (const name of ['errors', 'options', 'query', 'gateway']) {
    it(`lib/${name}.js exports the very objects of bindings/web/${name}.js`, () => {
      const mine = lib(name);
      const theirs = web(name);
      assert.ok(Object.keys(theirs).length > 0);
      assert.deepEqual(Object.keys(mine).sort(), Object.keys(theirs).sort());
      for (const k of Object.keys(theirs)) assert.equal(mine[k], theirs[k], `lib/${name}.js's ${k} is not the shared one`);
    });
  }

  it('the package exports the shared SippError and Query, and its SippClient extends the shared ClientCore', () => {
    assert.equal(sipp.SippError, web('errors').SippError);
    assert.equal(sipp.Query, web('query').Query);
    assert.equal(Object.getPrototypeOf(sipp.SippClient), web('client').ClientCore);
    assert.equal(Object.getPrototypeOf(web('index').SippClient), web('client').ClientCore);
    for (const m of ['add', 'endpoint', 'query', 'chat', 'embed', 'stats', 'remove']) {
      assert.ok(!Object.hasOwn(sipp.SippClient.prototype, m), `the Node SippClient defines its own ${m}`);
    }
  });

  it('an error of the shared rules is a SippError of this package', async () => {
    const q = new sipp.SippClient().query('x', { max_tokens: 3 });
    await assert.rejects(q.response, (e) => e instanceof sipp.SippError && e.code === 'invalid_argument'
      && /unknown option 'max_tokens'; did you mean maxTokens\?/.test(e.message));
  });
});

describe('the shared Query', () => {
  const { Query } = web('query');

  it('a delta that adds nothing to the list being read (a tool call while tokens is read) wakes nothing', async () => {
    const q = new Query('e');
    const seen = [];
    const loop = (async () => { for await (const t of q.tokens) seen.push(t); })();
    await new Promise((r) => setImmediate(r));
    q._delta([{ role: 'assistant' }, { tool_calls: [{ index: 0, id: 'call_1', function: { name: 'f', arguments: '{' } }] }]);
    q._delta([{ content: 'x' }]);
    q._end({ finishReason: 'tool_calls' });
    await loop;
    assert.deepEqual(seen, ['x']);
    assert.equal((await q.response).text, 'x');
  });
});

describe('the Node.js version check', () => {
  const { canRequireEsm, checkNode } = lib('shared');

  it('knows which Node.js lines can require() an ES module', () => {
    for (const v of ['20.19.0', '20.20.2', '22.12.0', '22.20.1', '23.0.0', '24.1.0']) assert.ok(canRequireEsm(v), v);
    for (const v of ['18.20.4', '20.0.0', '20.18.3', '21.7.3', '22.0.0', '22.11.0']) assert.ok(!canRequireEsm(v), v);
    assert.ok(canRequireEsm(process.versions.node), 'the Node.js running these tests');
  });

  it('fails with one line naming the version needed', () => {
    assert.throws(() => checkNode('20.18.3'), /^Error: sipp's Node binding needs Node\.js >= 20\.19 .*this is Node\.js 20\.18\.3: upgrade Node\.js$/);
  });

  it('loading the package on an older Node.js fails before any ES module is loaded', () => {
    // process.versions.node made to read 20.18.3: the check, not require() itself, must refuse
    const fake = "Object.defineProperty(process.versions, 'node', { value: '20.18.3' });";
    const r = spawnSync(process.execPath, ['-e', `${fake} try { require(${JSON.stringify(S.PKG)}); } catch (e) { `
      + 'console.error(e.message); process.exit(3); }'], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 3, r.stderr);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], /needs Node\.js >= 20\.19 .*this is Node\.js 20\.18\.3/);
  });
});

describe('the gateway profiles (stand-in server)', () => {
  let gw;
  let state;
  before(async () => {
    gw = await S.startFakeGateway();
    state = async () => (await fetch(`${gw.url}/debug/state`)).json();
  });
  after(() => gw.stop());

  it('both packages take the target as target or model, and refuse two different names', async () => {
    const { SippClient: WebClient } = web('index');
    for (const Client of [sipp.SippClient, WebClient]) {
      const c = new Client();
      const ep = await c.add('t', { kind: 'gateway', baseUrl: gw.url, target: MODEL });
      assert.equal(ep.model, MODEL);
      await assert.rejects(c.add('u', { kind: 'gateway', baseUrl: gw.url, target: MODEL, model: 'other' }),
        (e) => e.code === 'invalid_argument' && /target or as model, not two different names/.test(e.message));
      await c.close();
    }
  });

  it('Node passes the chat-library options to the gateway; its chat deltas are the content', async () => {
    const c = new sipp.SippClient();
    await c.add('gw', { kind: 'gateway', baseUrl: gw.url });
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
    const q = c.chat([{ role: 'user', content: 'a b' }], { tools, toolChoice: 'auto' });
    const deltas = [];
    for await (const d of q.deltas) deltas.push(d);
    assert.deepEqual(deltas, ['echo:', ' a', ' b'].map((text) => ({ type: 'content', text })));
    const r = await q.response;
    assert.equal(r.text, 'echo: a b');
    assert.equal(r.stats.backend, 'gateway');
    assert.ok(!('timings' in r), 'the Node result has stats, not the browser package\'s timings');
    const body = (await state()).last_body;
    assert.deepEqual(body.tools, tools);
    assert.equal(body.tool_choice, 'auto');
    await c.close();
  });

  it('the browser package refuses them by name and gives its result shape', async () => {
    const { SippClient: WebClient } = web('index');
    const c = new WebClient();
    await c.add('gw', { kind: 'gateway', baseUrl: gw.url });
    await assert.rejects(c.chat([{ role: 'user', content: 'a' }], { responseFormat: { type: 'json_object' } }).response,
      (e) => e.code === 'invalid_argument' && /option responseFormat \(response_format\) is not supported by the browser package's gateway/.test(e.message));
    const r = await c.chat([{ role: 'user', content: 'a b' }]).response;
    assert.equal(r.text, 'echo: a b');
    assert.equal(r.backend, 'gateway');
    assert.equal(r.threads, null);
    assert.equal(typeof r.timings, 'object');
    await c.close();
  });
});
