'use strict';
/**
 * Which llama.cpp artifact the process uses, decided once from SIPP_NODE_BACKEND when the package
 * is loaded: the same rules as the Python binding's SIPP_PYTHON_BACKEND.
 *
 * An artifact is a directory of llama.cpp libraries whose manifest.json lists its compiled backends
 * (build/artifacts/<name>/). `auto` (the default) takes the default artifact, build/artifact; an
 * explicit backend takes the default artifact when it has that backend, else the smallest other
 * one that has it. SIPP_ARTIFACT names the artifact directly and wins, but an explicit backend must
 * still be in it. Before the default, the artifact that `sipp build node --backend ...` recorded
 * (build/targets/node.json) is taken, for auto and for any backend it has. An unknown name, or a backend no artifact has, throws a SippError listing the
 * usable names.
 */
const fs = require('node:fs');
const path = require('node:path');
const { SippError } = require('./errors');

const ENV = 'SIPP_NODE_BACKEND';
const NAMES = ['auto', 'cpu', 'vulkan', 'cuda', 'metal'];
const REPO = path.resolve(__dirname, '..', '..', '..');

function buildDir(env = process.env) {
  const b = env.SIPP_BUILD || 'build';
  return path.isAbsolute(b) ? b : path.join(REPO, b);
}

function readBackends(dir) {
  try {
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    return Array.isArray(m.backends) ? m.backends.map(String) : null;
  } catch {
    return null;
  }
}

/** [{dir, backends}] under <build>/artifacts, the default artifact first, then the smallest. */
function listArtifacts(env = process.env) {
  const root = path.join(buildDir(env), 'artifacts');
  let names = [];
  try {
    names = fs.readdirSync(root).sort();
  } catch {
    return [];
  }
  let def = null;
  try {
    def = fs.realpathSync(path.join(buildDir(env), 'artifact'));
  } catch {}
  const found = [];
  for (const n of names) {
    const dir = fs.realpathSync(path.join(root, n));
    const backends = readBackends(dir);
    if (backends) found.push({ dir, backends });
  }
  found.sort((a, b) => (a.dir !== def) - (b.dir !== def) || a.backends.length - b.backends.length);
  return found;
}

/** The artifact `sipp build node` recorded, {dir, backends}, or null. */
function targetRecord(env = process.env) {
  try {
    const rec = JSON.parse(fs.readFileSync(path.join(buildDir(env), 'targets', 'node.json'), 'utf8'));
    if (typeof rec.artifact !== 'string') return null;
    const backends = readBackends(rec.artifact);
    return backends ? { dir: fs.realpathSync(rec.artifact), backends } : null;
  } catch {
    return null;
  }
}

function usable(artifacts) {
  const out = ['auto'];
  for (const a of artifacts) for (const b of a.backends) if (NAMES.includes(b) && !out.includes(b)) out.push(b);
  return out;
}

/** {backend, artifact, backends, source} for the environment, or throws a SippError. */
function selectBackend(env = process.env) {
  const raw = env[ENV] || '';
  const name = raw.trim().toLowerCase() || 'auto';
  const artifacts = listArtifacts(env);
  const where = artifacts.length
    ? `artifacts found: ${artifacts.map((a) => `${path.basename(a.dir)} (${a.backends.join('+')})`).join(', ')}`
    : `no artifact found in ${path.join(buildDir(env), 'artifacts')}`;
  if (!NAMES.includes(name)) {
    throw new SippError(`${ENV}='${raw}' is not a backend sipp knows; usable here: ${usable(artifacts).join(', ')} ` +
      `(${where}). Set ${ENV} to one of them, or unset it for auto.`, 'backend_error');
  }
  const forced = env.SIPP_ARTIFACT;
  if (forced) {
    const backends = readBackends(forced);
    if (name !== 'auto' && backends && !backends.includes(name)) {
      throw new SippError(`${ENV}=${name} but SIPP_ARTIFACT=${forced} has only ${backends.join(', ')}; usable here: ` +
        `${usable([{ dir: forced, backends }]).join(', ')}. Unset SIPP_ARTIFACT, or build an artifact with ` +
        `make BACKENDS="cpu ${name}".`, 'backend_error');
    }
    return { backend: name, artifact: forced, backends, source: 'SIPP_ARTIFACT' };
  }
  const record = targetRecord(env);
  if (record && (name === 'auto' || record.backends.includes(name))) {
    return { backend: name, artifact: record.dir, backends: record.backends, source: 'sipp build node' };
  }
  if (name === 'auto') {
    if (artifacts.length) return { backend: name, artifact: artifacts[0].dir, backends: artifacts[0].backends, source: 'the default artifact' };
    return { backend: name, artifact: null, backends: null, source: "libsipp's default" };
  }
  const hit = artifacts.find((a) => a.backends.includes(name));
  if (hit) return { backend: name, artifact: hit.dir, backends: hit.backends, source: `the first artifact with ${name}` };
  throw new SippError(`${ENV}=${name} but no artifact has the ${name} backend; usable here: ${usable(artifacts).join(', ')} ` +
    `(${where}). Build one with make BACKENDS="cpu ${name}", or choose another backend.`, 'backend_error');
}

module.exports = { ENV, NAMES, REPO, buildDir, listArtifacts, selectBackend, targetRecord };
