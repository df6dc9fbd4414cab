#!/usr/bin/env node
/*
 * browser_mode.test.js: the web page's "run in this browser" mode in Debian's Chromium (headless,
 * through playwright-core), against a real `sipp serve` with [web] serve_model_files = true and a
 * bearer token. tests/integration/test_web_browser_mode.py starts the gateway, runs this script and
 * checks what it prints:
 *
 *   node browser_mode.test.js --base URL --target NAME --token SECRET --prompt TEXT --max-tokens N
 *                             --artifacts DIR
 *
 * On one page, as a person would: type the token, pick the target, turn on "Run in this browser",
 * wait for the model to download and load, send the prompt greedily (temperature 0), read the answer
 * and the status strip, take a screenshot (build/test-artifacts/web-browser-mode.png). Then a new
 * page with the model file's route blocked turns the mode on again: the model must come from the
 * browser's cache. The last line of stdout is one JSON object of what was seen; every wait is
 * bounded and the run is cut off after RUN_TIMEOUT_MS.
 */
'use strict';

const path = require('path');
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.SIPP_CHROMIUM || '/usr/bin/chromium';
const RUN_TIMEOUT_MS = 240000;
const STEP_TIMEOUT_MS = 20000;
const LOAD_TIMEOUT_MS = 120000; // the runtime's start, the download and the model's load
const ANSWER_TIMEOUT_MS = 120000;
const POLL_MS = 100;

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) throw new Error(`bad argument ${argv[i]}`);
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const need of ['base', 'target', 'token', 'prompt', 'max-tokens', 'artifacts'])
    if (!args[need]) throw new Error(`--${need} is required`);
  return args;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, timeoutMs = STEP_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await sleep(POLL_MS);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
}

const text = (page, sel) => page.$eval(sel, (el) => el.textContent);

/* Opens the page, enters the token, picks the target and turns the browser mode on. */
async function openInBrowserMode(page, args) {
  await page.goto(`${args.base}/`);
  await until('the token prompt', async () => /token/i.test(await text(page, '#target-info')));
  if (!(await page.$eval('#advanced', (d) => d.open))) await page.click('#advanced summary');
  await page.fill('#token', args.token);
  await page.dispatchEvent('#token', 'change');
  await until('the target in the list', () => page.$eval('#target', (s, t) => [...s.options].some((o) => o.value === t),
    args.target));
  await page.selectOption('#target', args.target);
  await until('the "Run in this browser" toggle', () => page.isVisible('[data-testid="in-browser"]'));
  await page.check('[data-testid="in-browser"]');
  await until('the model loaded in the browser', async () => {
    const backend = await text(page, '#stat-backend');
    if (backend === 'browser failed') throw new Error(`browser mode failed: ${await text(page, '#target-info')}`);
    return /^browser \(wasm, \d+ threads?\)$/.test(backend) && backend;
  }, LOAD_TIMEOUT_MS);
}

async function run(args) {
  const out = { console: [] };
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: STEP_TIMEOUT_MS,
  });
  try {
    // One context for both pages: they share the origin's private file system, the model cache.
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    context.setDefaultTimeout(STEP_TIMEOUT_MS);
    const page = await context.newPage();
    page.on('console', (m) => m.type() === 'error' && out.console.push(m.text()));
    page.on('pageerror', (e) => out.console.push(String(e)));
    const fileRequests = [];
    page.on('request', (r) => { if (r.url().endsWith('/file')) fileRequests.push(r.headers().authorization || null); });

    await openInBrowserMode(page, args);
    out.isolated = await page.evaluate(() => globalThis.crossOriginIsolated === true);
    out.backend = await text(page, '#stat-backend');
    out.device = await text(page, '#stat-device');
    out.info = await text(page, '#target-info');
    out.fileRequests = fileRequests.map((a) => (a ? a.replace(args.token, 'TOKEN') : a));

    await page.fill('#temperature', '0');
    await page.fill('#max-tokens', args['max-tokens']);
    await page.fill('[data-testid="prompt"]', args.prompt);
    await page.click('[data-testid="send"]');
    await until('the answer to finish', () => page.evaluate(() => {
      const msgs = document.querySelectorAll('[data-testid="message-assistant"]');
      const last = msgs[msgs.length - 1];
      return last && !last.classList.contains('streaming') && !document.querySelector('[data-testid="send"]').disabled;
    }), ANSWER_TIMEOUT_MS);
    // The answer's source text: the page shows it rendered as Markdown.
    out.answer = await page.$eval('[data-testid="message-assistant"] .text', (el) => el.dataset.source);
    out.note = await page.$eval('[data-testid="message-assistant"] .note', (el) => el.textContent);
    out.speed = await text(page, '#stat-speed');
    out.statsBackend = await text(page, '#stat-backend');
    await page.screenshot({ path: path.join(args.artifacts, 'web-browser-mode.png') });

    // A second visit: the model's file route is blocked, so the model can only come from the cache.
    const again = await context.newPage();
    const blocked = [];
    await again.route('**/file', (route) => {
      blocked.push(route.request().url());
      return route.abort();
    });
    await openInBrowserMode(again, args);
    out.secondInfo = await text(again, '#target-info');
    out.secondBlocked = blocked;
  } finally {
    await browser.close();
  }
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const timer = setTimeout(() => {
    console.log(JSON.stringify({ error: `the run took over ${RUN_TIMEOUT_MS} ms` }));
    process.exit(1);
  }, RUN_TIMEOUT_MS);
  let result;
  try {
    result = await run(args);
  } catch (err) {
    result = { error: (err && err.stack) || String(err) };
  }
  clearTimeout(timer);
  console.log(JSON.stringify(result));
  process.exit(result.error ? 1 : 0);
}

main();
