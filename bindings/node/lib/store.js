'use strict';
/**
 * The local model store through libsipp (sipp.h's "model store" section), as `sipp models` and
 * `sipp pull` use it:
 *
 *   const { store } = require('sipp');
 *   await store.list();                                  // [{name, path, size, source, verified, files}, ...]
 *   await store.pull('hf://ORG/REPO/model.gguf', { onProgress: (p) => console.log(p.done, p.total) });
 *   await store.info('model-name');                      // the GGUF header, read without loading weights
 *
 * The store is $SIPP_MODELS_DIR (default ${XDG_DATA_HOME:-~/.local/share}/sipp/models). Every call
 * runs on libuv's thread pool and returns a promise; errors are SippErrors with libsipp's status name
 * as code ('not_found' for a model that is not there, with a message saying how to pull it). A pull's
 * onProgress returning false stops it (code 'cancelled'; the partial file is kept, and the same pull
 * resumes it).
 */
const native = require('./native');
const { toSippError, invalid } = require('./errors');

const PULL_OPTIONS = ['name', 'sha256', 'force', 'retries', 'onProgress'];

async function call(fn) {
  let addon;
  try {
    addon = native.load();
  } catch (e) {
    throw toSippError(e);
  }
  try {
    return await fn(addon);
  } catch (e) {
    throw toSippError(e);
  }
}

/** Every model in the store, sorted by name; `dir` names another store than the default. */
function list(options = {}) {
  const { dir = null, ...rest } = options || {};
  const extra = Object.keys(rest);
  if (extra.length) return Promise.reject(invalid(`unknown store.list option '${extra[0]}' (known: dir)`));
  return call((a) => a.storeList(dir));
}

/** A model's GGUF header facts (a store name or a path); with hash (default), its sha256 too (cached). */
function info(nameOrPath, options = {}) {
  const { hash = true, ...rest } = options || {};
  const extra = Object.keys(rest);
  if (typeof nameOrPath !== 'string') return Promise.reject(invalid('store.info needs a model name or path'));
  if (extra.length) return Promise.reject(invalid(`unknown store.info option '${extra[0]}' (known: hash)`));
  if (typeof hash !== 'boolean') return Promise.reject(invalid('hash must be true or false'));
  return call((a) => a.storeInfo(nameOrPath, hash));
}

/** Downloads a model into the store: an http(s) URL, hf://ORG/REPO/FILE.gguf, or a catalog name. */
function pull(source, options = {}) {
  const { onProgress = null, ...rest } = options || {};
  if (typeof source !== 'string') return Promise.reject(invalid('store.pull needs a source (URL, hf://..., or name)'));
  const extra = Object.keys(rest).filter((k) => !PULL_OPTIONS.includes(k));
  if (extra.length) {
    return Promise.reject(invalid(`unknown store.pull option '${extra[0]}' (known: ${PULL_OPTIONS.join(', ')})`));
  }
  if (onProgress !== null && typeof onProgress !== 'function') {
    return Promise.reject(invalid('onProgress must be a function'));
  }
  return call((a) => a.storePull(source, rest, onProgress));
}

module.exports = { list, info, pull };
