'use strict';
// Speculative decoding through the Node binding: options.draftModel on a sipp-synth pair (a target
// whose blocks past the first two add nothing, and the draft that is its first two blocks) gives
// the same greedy text as without it, nearly every proposal accepted; bad options are refused.
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const S = require('./support');
const { SippClient } = require('..');

const PAIR = ['--n-layer', '4'];
const HIGH_ACCEPTANCE = 0.9;

describe('speculative decoding', () => {
  it('gives the greedy text of the target with a draft model, counting proposals', async () => {
    const target = S.model('pair-target', [...PAIR, '--active-layers', '2']);
    const draft = S.model('pair-draft', [...PAIR, '--layers', '2']);
    const c = new SippClient();
    try {
      const base = { backend: 'cpu', threads: S.THREADS, parallel: 1 };
      await c.add('plain', { kind: 'local', model: target, options: base });
      await c.add('spec', { kind: 'local', model: target, options: { ...base, draftModel: draft, draftMax: 4, draftPMin: 0, draftCutoff: 'off' } });
      await c.add('auto', { kind: 'local', model: target, options: { ...base, draftModel: draft, draftCutoff: 'auto' } });
      const opts = { maxTokens: 40, temperature: 0, ignoreEos: true };
      const a = await c.query('Hello', { ...opts, endpoint: 'plain' }).response;
      const b = await c.query('Hello', { ...opts, endpoint: 'spec' }).response;
      assert.equal(b.text, a.text);
      assert.equal(a.stats.draftTokens, 0);
      assert.ok(b.stats.draftTokens > 0);
      assert.ok(b.stats.acceptedTokens / b.stats.draftTokens > HIGH_ACCEPTANCE, JSON.stringify(b.stats));
      assert.equal(b.stats.cutoffSteps, 0);
      const d = await c.query('Hello', { ...opts, endpoint: 'auto' }).response;
      assert.equal(d.text, a.text);
      assert.ok(d.stats.draftSteps > 0, JSON.stringify(d.stats)); // the cut-off drafts while it measures
    } finally {
      await c.close();
    }
  });

  it('refuses bad options and a draft without a model', async () => {
    const c = new SippClient();
    try {
      await assert.rejects(c.add('a', { kind: 'local', model: S.model(), options: { speculative: 'medusa' } }),
        /options.speculative must be 'none', 'ngram' or 'draft'/);
      await assert.rejects(c.add('b', { kind: 'local', model: S.model(), options: { draftPMin: 1 } }),
        /options.draftPMin must be a number in \[0, 1\)/);
      await assert.rejects(c.add('d', { kind: 'local', model: S.model(), options: { draftCutoff: 'on' } }),
        /options.draftCutoff must be 'auto' or 'off'/);
      await assert.rejects(c.add('c', { kind: 'local', model: S.model(), options: { backend: 'cpu', speculative: 'draft' } }),
        /speculative 'draft' needs a draft_model/);
    } finally {
      await c.close();
    }
  });
});
