'use strict';
/**
 * The client rules the Node binding shares with the browser package: errors, option checks and wire
 * names, the Query, the gateway endpoint and the client model live once, as ES modules in
 * bindings/web/ (plain files a page loads without a bundler). This binding loads them with
 * require(), which Node.js supports from 20.19 (and 22.12 on the 22 line); errors.js, options.js,
 * query.js and gateway.js here are thin re-exports through shared(name).
 *
 * The version is checked before the first require(), so an older Node fails with one line naming
 * the version needed instead of a syntax error from inside an ES module.
 */
const path = require('node:path');

const WEB = path.join(__dirname, '..', '..', 'web');
// Node lines on which require() of an ES module works without a flag: [major, first minor]
const REQUIRE_ESM = [[20, 19], [22, 12]];
const REQUIRE_ESM_ANY = 23; // every release from this major on

/** Whether this Node.js (process.versions.node, "MAJOR.MINOR.PATCH") can require() an ES module. */
function canRequireEsm(version) {
  const [major, minor] = version.split('.').map(Number);
  if (major >= REQUIRE_ESM_ANY) return true;
  const line = REQUIRE_ESM.find(([m]) => m === major);
  return !!line && minor >= line[1];
}

function checkNode(version = process.versions.node) {
  if (!canRequireEsm(version)) {
    throw new Error(`sipp's Node binding needs Node.js >= 20.19 (>= 22.12 on the 22 line) to load its shared ES modules `
      + `(bindings/web) with require(); this is Node.js ${version}: upgrade Node.js`);
  }
}

/** The shared ES module bindings/web/<name>.js, loaded with require(). */
function shared(name) {
  checkNode();
  return require(path.join(WEB, `${name}.js`));
}

module.exports = { shared, canRequireEsm, checkNode, WEB };
