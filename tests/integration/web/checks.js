/*
 * checks.js: the small harness of the page's browser tests (web.test.js, app.test.js): named checks run in order
 * and counted, assertions, bounded waits, and the checks that look at a whole page: axe-core's
 * serious and critical violations, and boxes that overlap or leave the screen.
 */
'use strict';

const fs = require('fs');
const path = require('path');

const STEP_TIMEOUT_MS = 20000;
const results = { passed: 0, failed: 0 };

async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.passed++;
    console.log(`ok - ${name} (${Date.now() - t0} ms)`);
    return true;
  } catch (err) {
    results.failed++;
    const msg = (err && err.stack) || String(err);
    console.log(`not ok - ${name} (${Date.now() - t0} ms)\n  ${msg.split('\n').slice(0, 8).join('\n  ')}`);
    return false;
  }
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* Polls fn until it returns a truthy value; throws with what after timeoutMs. */
async function until(what, fn, timeoutMs = STEP_TIMEOUT_MS, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
}

/* A gauge or counter of one target in the gateway's /metrics, or null when it has none. */
async function metric(base, name, target) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{target="${target}"} `));
  return line === undefined ? null : Number(line.split(' ').pop());
}

const AXE = path.join(__dirname, 'node_modules', 'axe-core', 'axe.min.js'); // read when first used

/* axe-core's serious and critical violations on the page as it is now: [{id, impact, nodes}]. The
 * source is evaluated through the DevTools protocol, which the page's CSP does not govern. */
async function axeViolations(page) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(fs.readFileSync(AXE, 'utf8'));
  return page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
}

/*
 * Boxes that overlap or are cut off, among the visible things a person reads or uses (controls,
 * headings, messages, labels, status values, charts). Elements inside one another are not compared;
 * hidden and visually-hidden ones, and what lies inside a chart's canvas, are left out. Returns
 * descriptions of the problems (empty when there are none).
 */
async function layoutProblems(page) {
  return page.evaluate(() => {
    const SEL = 'button, input, select, textarea, summary, h1, h2, h3, label, dt, dd, .msg, meter, progress, figure, .hint, .conversation, th, td, .tool-card, .reasoning';
    const name = (e) => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${e.dataset.testid ? `[${e.dataset.testid}]` : ''}` +
      `${e.className && typeof e.className === 'string' ? `.${e.className.trim().split(/\s+/).join('.')}` : ''}`;
    const vw = document.documentElement.clientWidth;
    const els = [...document.querySelectorAll(SEL)].filter((e) => {
      if (e.closest('[hidden], .visually-hidden, .plot, .skip') || e.type === 'hidden') return false;
      const r = e.getBoundingClientRect();
      const cs = getComputedStyle(e);
      return r.width > 1 && r.height > 1 && cs.visibility !== 'hidden' && cs.display !== 'none';
    });
    // What shows of a box: cut by every ancestor that clips (a scrolled-away message shows nothing).
    // Cut by one that scrolls is fine; cut by one that hides its overflow is a problem.
    const problems = [];
    const boxes = [];
    for (const e of els) {
      const full = e.getBoundingClientRect();
      let r = { left: full.left, right: full.right, top: full.top, bottom: full.bottom };
      let scrollsSideways = false; // inside a box that scrolls sideways (a wide table): it may be wider
      for (let p = e.parentElement; p && p !== document.documentElement; p = p.parentElement) {
        const cs = getComputedStyle(p);
        if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
        scrollsSideways = scrollsSideways || cs.overflowX === 'auto' || cs.overflowX === 'scroll';
        const pr = p.getBoundingClientRect();
        const hides = cs.overflowX === 'hidden' || cs.overflowY === 'hidden';
        if (hides && !e.closest('.conversation') && (r.right > pr.right + 1 || r.bottom > pr.bottom + 1))
          problems.push(`${name(e)} is clipped by ${name(p)}`);
        r = { left: Math.max(r.left, pr.left), right: Math.min(r.right, pr.right),
          top: Math.max(r.top, pr.top), bottom: Math.min(r.bottom, pr.bottom) };
      }
      if (r.right - r.left <= 1 || r.bottom - r.top <= 1) continue;
      if (!scrollsSideways && (full.right > vw + 1 || full.left < -1)) problems.push(`${name(e)} leaves the screen (${Math.round(full.left)}..${Math.round(full.right)} of ${vw})`);
      boxes.push({ e, r });
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i];
        const b = boxes[j];
        if (a.e.contains(b.e) || b.e.contains(a.e)) continue;
        const w = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
        const h = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
        if (w > 1 && h > 1) problems.push(`${name(a.e)} overlaps ${name(b.e)} (${Math.round(w)}×${Math.round(h)} px)`);
      }
    }
    if (document.documentElement.scrollWidth > vw) problems.push(`the page scrolls sideways (${document.documentElement.scrollWidth} > ${vw})`);
    return problems.slice(0, 12);
  });
}

/* Prints the closing line ("LABEL: N passed, N failed") and returns the exit status. */
function finish(label = 'web-app') {
  console.log(`${label}: ${results.passed} passed, ${results.failed} failed`);
  return results.failed === 0 && results.passed > 0 ? 0 : 1;
}

module.exports = { check, assert, sleep, until, metric, axeViolations, layoutProblems, results, finish, STEP_TIMEOUT_MS };
