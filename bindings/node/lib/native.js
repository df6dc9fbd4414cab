'use strict';
/**
 * The addon (build/sipp.node) and the runtime it initialises, loaded on first need: a program that
 * only talks to gateways never loads libsipp.
 */
const fs = require('node:fs');
const path = require('node:path');
const { SippError, toSippError } = require('./errors');

const ADDON = process.env.SIPP_NODE_ADDON || path.join(__dirname, '..', 'build', 'sipp.node');
let addon = null;
let runtime = null; // Promise of the runtime description, once initialisation started

function load() {
  if (addon) return addon;
  if (!fs.existsSync(ADDON)) {
    throw new SippError(`the sipp addon ${ADDON} is not built; build it with: bash ${path.join(__dirname, '..', 'build.sh')} ` +
      '(after make -j2 all for libsipp)', 'not_found');
  }
  try {
    addon = require(ADDON);
  } catch (e) {
    throw new SippError(`cannot load the sipp addon ${ADDON}: ${e.message}; rebuild it with bash bindings/node/build.sh`,
      'not_found');
  }
  return addon;
}

/** Initialises the runtime synchronously (at package load, for an explicit backend). */
function initSync(artifactDir) {
  const a = load();
  if (!runtime) {
    try {
      runtime = Promise.resolve(a.init(artifactDir || null));
    } catch (e) {
      throw toSippError(e);
    }
  }
  return runtime;
}

/** Initialises the runtime off the event loop; resolves to {artifact, version, llamaRelease, llamaCommit}. */
function init(artifactDir) {
  if (!runtime) {
    let a;
    try {
      a = load();
    } catch (e) {
      return Promise.reject(e);
    }
    runtime = a.initAsync(artifactDir || null).catch((e) => {
      runtime = null;
      throw toSippError(e);
    });
  }
  return runtime;
}

module.exports = { load, init, initSync, ADDON };
