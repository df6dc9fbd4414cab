/**
 * sha256.js: SHA-256 over a stream of chunks (FIPS 180-4).
 *
 * WebCrypto's digest() takes the whole input at once; a model download is hashed while it streams
 * into the cache, one chunk at a time, so that a gigabyte never sits in memory twice. The
 * compression function works on 64-byte blocks; a partial block waits in `tail` for the next chunk.
 */

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const INIT = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
const BLOCK = 64;

export class Sha256 {
  constructor() {
    this.h = new Uint32Array(INIT);
    this.w = new Uint32Array(64);
    this.tail = new Uint8Array(BLOCK);
    this.nTail = 0;
    this.length = 0; // bytes hashed so far
  }

  /** Hashes the next bytes (a Uint8Array). */
  update(bytes) {
    this.length += bytes.length;
    let i = 0;
    if (this.nTail) {
      const take = Math.min(BLOCK - this.nTail, bytes.length);
      this.tail.set(bytes.subarray(0, take), this.nTail);
      this.nTail += take;
      i = take;
      if (this.nTail < BLOCK) return this;
      this._block(this.tail, 0);
      this.nTail = 0;
    }
    for (; i + BLOCK <= bytes.length; i += BLOCK) this._block(bytes, i);
    if (i < bytes.length) {
      this.tail.set(bytes.subarray(i));
      this.nTail = bytes.length - i;
    }
    return this;
  }

  /** The digest as 64 lowercase hex digits; the object is spent afterwards. */
  hex() {
    const bits = this.length * 8;
    const pad = new Uint8Array(((this.nTail + 9 + BLOCK - 1) >> 6) * BLOCK - this.nTail);
    pad[0] = 0x80;
    const view = new DataView(pad.buffer);
    view.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
    view.setUint32(pad.length - 4, bits >>> 0);
    const len = this.length;
    this.update(pad);
    this.length = len;
    return Array.from(this.h, (x) => x.toString(16).padStart(8, '0')).join('');
  }

  _block(p, off) {
    const w = this.w;
    for (let t = 0; t < 16; t++) {
      const j = off + 4 * t;
      w[t] = (p[j] << 24) | (p[j + 1] << 16) | (p[j + 2] << 8) | p[j + 3];
    }
    for (let t = 16; t < 64; t++) {
      const a = w[t - 15], b = w[t - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
    }
    const h = this.h;
    let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const ch = (e & f) ^ (~e & g);
      const t1 = (k + S1 + ch + K[t] + w[t]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (S0 + maj) | 0;
      k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
  }
}
