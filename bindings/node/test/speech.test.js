'use strict';
/**
 * speech: flite's voice through libsipp, encoded by libsipp, off the event loop.
 */
const test = require('node:test');
const assert = require('node:assert');

const { speech, SippError } = require('..');

const TEXT = 'Hello there. This is a test. Goodbye!';

test('a WAV of flite at 16 kHz, and kal at 8 kHz', async () => {
  for (const [voice, rate] of [['slt', 16000], ['kal', 8000]]) {
    const wav = await speech(TEXT, { voice });
    assert.strictEqual(wav.toString('latin1', 0, 4), 'RIFF');
    assert.strictEqual(wav.readUInt32LE(24), rate);
    assert.strictEqual(wav.readUInt32LE(40), wav.length - 44); // exact sizes: not streamed
    assert.ok(wav.length - 44 > rate * 2, `${voice}: more than a second of speech`);
  }
});

test('pcm is 24 kHz, and speed 2 halves it', async () => {
  const normal = await speech(TEXT, { format: 'pcm' });
  const fast = await speech(TEXT, { format: 'pcm', speed: 2 });
  assert.ok(Math.abs(fast.length / normal.length - 0.5) < 0.12, `${fast.length} / ${normal.length}`);
});

test('every format has its signature', async () => {
  assert.strictEqual((await speech('Hi.', { format: 'flac' })).toString('latin1', 0, 4), 'fLaC');
  assert.strictEqual((await speech('Hi.', { format: 'opus' })).toString('latin1', 0, 4), 'OggS');
  const mp3 = await speech('Hi.', { format: 'mp3' });
  assert.ok(mp3.toString('latin1', 0, 3) === 'ID3' || (mp3[0] === 0xff && (mp3[1] & 0xe0) === 0xe0));
});

test('two at once give what one alone gives', async () => {
  const [a, b] = await Promise.all([speech(TEXT), speech(TEXT)]);
  assert.ok(a.equals(b));
  assert.ok(a.equals(await speech(TEXT)));
});

test('bad input is a SippError naming it', async () => {
  const cases = [[{ voice: 'alloy' }, /alloy/], [{ format: 'aac' }, /aac/], [{ speed: 9 }, /speed/], [{ colour: 1 }, /colour/]];
  for (const [options, re] of cases) {
    await assert.rejects(speech('Hi.', options), (e) => e instanceof SippError && e.code === 'invalid_argument' && re.test(e.message));
  }
  await assert.rejects(speech('   '), (e) => e instanceof SippError && /empty/.test(e.message));
});

test('speech.stream gives the same audio a sentence at a time', async () => {
  const whole = await speech(TEXT, { format: 'pcm' });
  const chunks = [];
  for await (const chunk of speech.stream(TEXT, { format: 'pcm' })) chunks.push(chunk);
  assert.ok(chunks.length >= 3, `one chunk a sentence at least: ${chunks.length}`);
  assert.ok(Buffer.concat(chunks).equals(whole));
  const wav = [];
  for await (const chunk of speech.stream(TEXT)) wav.push(chunk);
  const streamed = Buffer.concat(wav);
  assert.strictEqual(streamed.readUInt32LE(40), 0xffffffff); // placeholder sizes, as a pipe's WAV
  assert.ok(streamed.subarray(44).equals((await speech(TEXT)).subarray(44)));
});

test('leaving a speech.stream early stops it, and errors reach the loop', async () => {
  const long = Array(40).fill('This sentence is one of many.').join(' ');
  let n = 0;
  for await (const chunk of speech.stream(long, { format: 'pcm' })) {
    assert.ok(chunk.length > 0);
    if (++n === 1) break;
  }
  assert.strictEqual(n, 1);
  await assert.rejects(async () => {
    for await (const chunk of speech.stream('Hi.', { voice: 'nobody' })) assert.fail(`a chunk: ${chunk.length}`);
  }, (e) => e instanceof SippError && e.code === 'invalid_argument' && /nobody/.test(e.message));
  assert.throws(() => speech.stream('Hi.', { colour: 1 }), (e) => e instanceof SippError && /colour/.test(e.message));
});
