/**
 * cache.js: models fetched by URL, kept in the origin private file system (OPFS) by SHA-256.
 *
 *   sipp-models/<sha256>.gguf   a model, named by the SHA-256 of its bytes
 *   sipp-models/index.json      { "<sha256>": { url, size, name, added } }: where each came from
 *
 * A download streams into a temporary file while its SHA-256 is computed chunk by chunk
 * (sha256.js); only a complete download whose digest equals the expected one (when one is given)
 * is renamed to its key, so a failed, cut or corrupted download leaves nothing behind. A later load
 * of the same model, named by its sha256 or by the URL it came from, opens the cached file and
 * makes no network request.
 */
import { SippError, invalid } from './errors.js';
import { Sha256 } from './sha256.js';

const DIR = 'sipp-models';
const INDEX = 'index.json';
const SHA256_RE = /^[0-9a-f]{64}$/;

function unsupported() {
  return new SippError('this browser has no origin private file system (navigator.storage.getDirectory), so models '
    + 'cannot be cached; pass a File or Blob as source instead', 'io_error');
}

export class ModelCache {
  async _dir() {
    if (!globalThis.navigator || !navigator.storage || !navigator.storage.getDirectory) throw unsupported();
    const root = await navigator.storage.getDirectory();
    return root.getDirectoryHandle(DIR, { create: true });
  }

  async _readIndex(dir) {
    try {
      const f = await (await dir.getFileHandle(INDEX)).getFile();
      const index = JSON.parse(await f.text());
      return index && typeof index === 'object' ? index : {};
    } catch {
      return {};
    }
  }

  async _writeIndex(dir, index) {
    const w = await (await dir.getFileHandle(INDEX, { create: true })).createWritable();
    await w.write(JSON.stringify(index));
    await w.close();
  }

  /** The cached models: [{ key, url, size, name, added }]. */
  async list() {
    const dir = await this._dir();
    const index = await this._readIndex(dir);
    const out = [];
    for await (const [name, handle] of dir.entries()) {
      const m = /^([0-9a-f]{64})\.gguf$/.exec(name);
      if (!m || handle.kind !== 'file') continue;
      const file = await handle.getFile();
      out.push({ key: m[1], size: file.size, url: null, name: null, added: null, ...index[m[1]] });
    }
    return out.sort((a, b) => a.key.localeCompare(b.key));
  }

  /** Removes one model by its key (its sha256); resolves to whether it was there. */
  async delete(key) {
    if (typeof key !== 'string' || !SHA256_RE.test(key)) throw invalid(`a cache key is a sha256 of 64 hex digits, not ${JSON.stringify(key)}`);
    const dir = await this._dir();
    let found = true;
    try {
      await dir.removeEntry(`${key}.gguf`);
    } catch {
      found = false;
    }
    const index = await this._readIndex(dir);
    if (index[key]) {
      delete index[key];
      await this._writeIndex(dir, index);
    }
    return found;
  }

  /** Removes every cached model. */
  async clear() {
    const root = await navigator.storage.getDirectory();
    try {
      await root.removeEntry(DIR, { recursive: true });
    } catch {}
  }

  /** A cached model's File, or null. */
  async _get(dir, key) {
    try {
      return await (await dir.getFileHandle(`${key}.gguf`)).getFile();
    } catch {
      return null;
    }
  }

  /**
   * The model at url as a File: from the cache when it holds it (by sha256, else by the URL it was
   * fetched from), else downloaded, hashed and cached. Resolves to { file, key, cached }.
   * onProgress({ url, loaded, total }) is called as bytes arrive (total is null when unknown).
   */
  async open(url, { sha256, onProgress, headers } = {}) {
    if (sha256 !== undefined && (typeof sha256 !== 'string' || !SHA256_RE.test(sha256.toLowerCase()))) {
      throw invalid(`sha256 must be 64 hex digits, not ${JSON.stringify(sha256)}`);
    }
    const want = sha256 && sha256.toLowerCase();
    const dir = await this._dir();
    const index = await this._readIndex(dir);
    const key = want || Object.keys(index).find((k) => index[k].url === url);
    if (key) {
      const file = await this._get(dir, key);
      if (file) return { file, key, cached: true };
    }
    return this._download(dir, url, want, onProgress, headers);
  }

  async _download(dir, url, want, onProgress, headers) {
    const tmpName = `download-${Date.now()}-${Math.random().toString(36).slice(2)}.part`;
    const discard = async () => {
      try {
        await dir.removeEntry(tmpName);
      } catch {}
    };
    let res;
    try {
      res = await fetch(url, { headers });
    } catch (e) {
      throw new SippError(`cannot fetch model ${url}: ${e.message}; check the URL and that the server allows this page`, 'io_error');
    }
    if (!res.ok) throw new SippError(`cannot fetch model ${url}: HTTP ${res.status} ${res.statusText}`, res.status === 404 ? 'not_found' : 'io_error');
    const total = Number(res.headers.get('Content-Length')) || null;
    const handle = await dir.getFileHandle(tmpName, { create: true });
    const out = await handle.createWritable();
    const hash = new Sha256();
    let loaded = 0;
    try {
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        hash.update(value);
        await out.write(value);
        loaded += value.length;
        if (onProgress) onProgress({ url, loaded, total });
      }
      await out.close();
    } catch (e) {
      try { await out.abort(); } catch {}
      await discard();
      throw new SippError(`download of ${url} failed after ${loaded} bytes: ${e.message}; nothing was cached`, 'io_error');
    }
    const got = hash.hex();
    if (total !== null && loaded !== total) {
      await discard();
      throw new SippError(`download of ${url} ended at ${loaded} of ${total} bytes; nothing was cached`, 'io_error');
    }
    if (want && got !== want) {
      await discard();
      throw new SippError(`model ${url} has sha256 ${got}, not the expected ${want}: the download is corrupt or the `
        + 'file changed; nothing was cached', 'model_error');
    }
    const final = `${got}.gguf`;
    await this._replace(dir, final);
    await handle.move(final);
    const index = await this._readIndex(dir);
    index[got] = { url, size: loaded, name: url.split('/').pop().split('?')[0] || null, added: new Date().toISOString() };
    await this._writeIndex(dir, index);
    return { file: await this._get(dir, got), key: got, cached: false };
  }

  // Removes an older copy of the same key (a second download of a model whose index was lost).
  async _replace(dir, name) {
    try {
      await dir.removeEntry(name);
    } catch {}
  }
}
