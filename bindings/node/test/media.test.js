'use strict';
// Images in chats through the Node binding: a local endpoint opened with options.mmproj (a synthetic
// projector that llama.cpp's libmtmd loads) answers a chat with an image_url part, counts its image
// tokens, and does not encode the same image again in the next turn; a model without a projector
// refuses the image by name.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const zlib = require('node:zlib');
const S = require('./support');
const { SippClient, SippError } = require('..');

const IMAGE_TOKENS = 36; // sipp-synth's llava: 48 px images in 8 px patches

function crc32(buf) {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xEDB88320 & -(c & 1));
  }
  return ~c >>> 0;
}

function png(width, height) {
  const chunk = (type, body) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(body.length);
    const tb = Buffer.concat([Buffer.from(type), body]);
    const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(tb));
    return Buffer.concat([len, tb, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0); ihdr.writeUInt32BE(height, 4); ihdr.set([8, 2, 0, 0, 0], 8);
  const rows = [];
  for (let y = 0; y < height; y++) rows.push(Buffer.from([0, ...Array.from({ length: width * 3 }, (_, x) => (x * 40 + y * 7) % 256)]));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(Buffer.concat(rows))), chunk('IEND', Buffer.alloc(0))]);
}

const imagePart = () => ({ type: 'image_url', image_url: { url: `data:image/png;base64,${png(32, 24).toString('base64')}` } });

describe('images through a local endpoint', () => {
  let client;
  let mmproj;

  before(() => {
    mmproj = path.join(S.tmpdir(), 'mmproj-node.gguf');
    execFileSync(S.SYNTH, ['--out', mmproj, '--projector', 'llava', '--n-embd', '64'], { stdio: 'pipe' });
    client = new SippClient();
  });
  after(() => client.close());

  it('answers a chat with an image and reuses it in the next turn', async () => {
    const ep = await client.add('vision', {
      kind: 'local', model: S.model(), options: { backend: 'cpu', threads: S.THREADS, parallel: 2, ctxSize: 1024, mmproj },
    });
    const msgs = [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, imagePart()] }];
    const first = await client.chat(msgs, { endpoint: ep, maxTokens: 4, temperature: 0 }).response;
    assert.ok(first.text.length > 0);
    assert.equal(first.stats.mediaTokens, IMAGE_TOKENS);
    assert.equal(first.stats.mediaEncoded, 1);
    const again = await client.chat(msgs, { endpoint: ep, maxTokens: 4, temperature: 0 }).response;
    assert.equal(again.text, first.text);
    assert.equal(again.stats.mediaEncoded, 0);
  });

  it('refuses an image for a model without a projector, and a bad mmproj option', async () => {
    const ep = await client.add('plain', { kind: 'local', model: S.model(), options: { backend: 'cpu', threads: S.THREADS, parallel: 1 } });
    const msgs = [{ role: 'user', content: [{ type: 'text', text: 'hi' }, imagePart()] }];
    await assert.rejects(client.chat(msgs, { endpoint: ep, maxTokens: 2 }).response,
      (e) => e instanceof SippError && /loaded without a projector/.test(e.message));
    await assert.rejects(client.add('bad', { kind: 'local', model: S.model(), options: { mmproj: 3 } }),
      (e) => e instanceof SippError && /options.mmproj must be the path/.test(e.message));
  });
});
