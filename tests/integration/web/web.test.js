#!/usr/bin/env node
/*
 * web.test.js: drives sipp's web page in Debian's Chromium (headless, through playwright-core;
 * no browser is downloaded) against a real `sipp serve` on loopback. tests/integration/test_web.py
 * starts the gateways and runs this script:
 *
 *   node web.test.js --base URL --target NAME --artifacts DIR [--auth-base URL --auth-token SECRET]
 *
 * The checks run in order on one page, as a person would use it: load the page, pick the target,
 * send a message and watch it stream in, read the status strip, stop a long answer, clear, then do
 * it all with the keyboard, then on a phone-sized screen; with --auth-base, a gateway that needs a
 * bearer token. Each check prints "ok" or "not ok" and the last line is "web: N passed, N failed";
 * the exit status is 0 only when every check passed. Every wait is bounded, and the whole run is cut
 * off after RUN_TIMEOUT_MS.
 */
'use strict';

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');
const { check, assert, sleep, until, metric, results, finish } = require('./checks');

const CHROMIUM = process.env.SIPP_CHROMIUM || '/usr/bin/chromium';
const RUN_TIMEOUT_MS = 100000;
const STEP_TIMEOUT_MS = 20000;      // a default bound for one wait
const STOP_END_TIMEOUT_MS = 5000;   // after Stop: the page is idle again, and the gateway has let go
const GROW_GAP_MS = 400;            // between the two reads of a streaming answer's length
const SETTLE_MS = 500;              // after a stop, the text must not change for this long
const NARROW_WIDTH = 375;
const MAX_TABS_TO_PROMPT = 25;
const LONG_MAX_TOKENS = 2000;

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) throw new Error(`bad argument ${argv[i]}`);
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const need of ['base', 'target', 'artifacts'])
    if (!args[need]) throw new Error(`--${need} is required`);
  return args;
}

/* ---- helpers on the page -------------------------------------------------------------------- */

const byId = (id) => `[data-testid="${id}"]`;

async function count(page, testid) {
  return page.locator(byId(testid)).count();
}

async function lastText(page, testid) {
  return page.evaluate((sel) => {
    const all = document.querySelectorAll(sel);
    const el = all[all.length - 1];
    return el ? el.querySelector('.text').textContent : null;
  }, byId(testid));
}

async function idle(page) {
  return page.evaluate(
    (s) => !document.querySelector(s.send).disabled && document.querySelector(s.stop).disabled,
    { send: byId('send'), stop: byId('stop') },
  );
}

/* Records every length the last assistant message's text takes, with the time, from now on. */
async function watchGrowth(page) {
  await page.evaluate(() => {
    window.__growth = [];
    const log = document.getElementById('log');
    const obs = new MutationObserver(() => {
      const all = log.querySelectorAll('[data-testid="message-assistant"] .text');
      const el = all[all.length - 1];
      const n = el ? el.textContent.length : 0;
      const g = window.__growth;
      if (n > 0 && (!g.length || g[g.length - 1][0] !== n)) g.push([n, performance.now()]);
    });
    obs.observe(log, { subtree: true, childList: true, characterData: true });
    window.__growthObserver = obs;
  });
}

async function growth(page) {
  return page.evaluate(() => {
    window.__growthObserver.disconnect();
    return window.__growth;
  });
}

async function setMaxTokens(page, n) {
  await page.fill('#max-tokens', String(n));
}

async function openAdvanced(page) {
  if (!(await page.$eval('#advanced', (d) => d.open))) await page.click('#advanced summary');
}

async function sendAndWait(page, text, timeoutMs = STEP_TIMEOUT_MS) {
  const before = await count(page, 'message-assistant');
  await page.fill(byId('prompt'), text);
  await page.click(byId('send'));
  await until('a new assistant message', async () => (await count(page, 'message-assistant')) > before);
  await until('the answer to end', () => idle(page), timeoutMs);
}

/* ---- the checks ----------------------------------------------------------------------------- */

async function run(args) {
  const { base, target } = args;
  fs.mkdirSync(args.artifacts, { recursive: true });
  const shot = (page, name, opts = {}) => page.screenshot({ path: path.join(args.artifacts, `web-${name}.png`), ...opts });

  // Playwright gives the browser a fresh user-data-dir of its own and removes it on close.
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    timeout: STEP_TIMEOUT_MS,
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    context.setDefaultTimeout(STEP_TIMEOUT_MS);
    const page = await context.newPage();
    const consoleErrors = [];
    page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
    page.on('pageerror', (e) => consoleErrors.push(String(e)));

    let backends = null;
    // Without the page every other check would only wait out its timeout.
    const loaded = await check('the page loads from the gateway with a strict CSP', async () => {
      const res = await page.goto(`${base}/`, { waitUntil: 'load' });
      assert(res.status() === 200, `GET / answered ${res.status()}`);
      const h = res.headers();
      assert(h['content-type'].startsWith('text/html'), `content-type ${h['content-type']}`);
      const csp = h['content-security-policy'] || '';
      for (const d of ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"])
        assert(csp.includes(d), `CSP lacks ${d}: ${csp}`);
      assert((await page.title()) === 'sipp', 'title');
      backends = await (await fetch(`${base}/v1/backends`)).json();
    });
    if (!loaded) return;

    await check('every control has a label', async () => {
      const unlabelled = await page.evaluate(() =>
        [...document.querySelectorAll('input, select, textarea, button')]
          .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.textContent.trim())
          .map((el) => el.id || el.outerHTML.slice(0, 60)));
      assert(unlabelled.length === 0, `unlabelled: ${unlabelled.join(', ')}`);
    });

    await check('the target select lists the models and the target can be picked', async () => {
      const sel = byId('target-select');
      await until('the target in the select', () => page.$(`${sel} option[value="${target}"]`));
      await page.selectOption(sel, target);
      assert((await page.$eval(sel, (s) => s.value)) === target, 'selected value');
    });

    await check('the status strip shows readiness, backend and device', async () => {
      const t = backends.targets.find((x) => x.name === target);
      assert(t && t.backend, `/v1/backends has no backend for ${target}`);
      await until('"ready"', async () => (await page.textContent('#stat-ready')) === 'ready');
      await until(`backend ${t.backend}`, async () => (await page.textContent('#stat-backend')) === t.backend);
      assert((await page.textContent('#stat-device')) === t.devices, 'device');
    });

    await check('Unload and Load unload and load the selected model', async () => {
      const t = backends.targets.find((x) => x.name === target);
      const button = byId('residency-button');
      await until('an Unload button', async () => (await page.textContent(button)) === 'Unload');
      await page.click(button);
      await until('"not loaded"', async () => (await page.textContent('#stat-backend')) === 'not loaded');
      assert((await page.textContent(button)) === 'Load', 'the button offers Load');
      await page.click(button);
      await until(`backend ${t.backend} again`, async () => (await page.textContent('#stat-backend')) === t.backend);
      assert((await page.textContent(button)) === 'Unload', 'the button offers Unload again');
    });

    await check('a message streams into message-assistant, growing over time', async () => {
      await setMaxTokens(page, 80);
      await watchGrowth(page);
      const prompt = 'Say something about tea.';
      await sendAndWait(page, prompt);
      assert((await lastText(page, 'message-user')) === prompt, 'the user message shows the prompt');
      const text = await lastText(page, 'message-assistant');
      assert(text && text.length > 0, 'the answer is empty');
      const g = await growth(page);
      assert(g.length >= 3, `the answer arrived in ${g.length} step(s), not streamed`);
      assert(g[g.length - 1][1] > g[0][1], 'every length was seen at the same moment');
      console.log(`  streamed in ${g.length} steps over ${Math.round(g[g.length - 1][1] - g[0][1])} ms, ${text.length} chars`);
    });

    await check('the stats show TTFT, tokens/s and the backend', async () => {
      const stats = await page.textContent(byId('stats'));
      assert(/TTFT\s*\d+ ms/.test(stats), `no TTFT in: ${stats}`);
      assert(/\d+(\.\d+)? tok\/s · \d+ tokens/.test(stats), `no tokens/s in: ${stats}`);
      console.log(`  stats: ${stats.replace(/\s+/g, ' ').trim()}`);
      await shot(page, 'chat');
    });

    await check('Stop ends a long generation and the gateway frees the request', async () => {
      await openAdvanced(page);
      await page.check('#ignore-eos');
      await setMaxTokens(page, LONG_MAX_TOKENS);
      const before = await count(page, 'message-assistant');
      await page.fill(byId('prompt'), 'Tell me a very long story.');
      await watchGrowth(page);
      const t0 = Date.now();
      await page.click(byId('send'));
      await until('the long answer to start', async () =>
        (await count(page, 'message-assistant')) > before && ((await lastText(page, 'message-assistant')) || '').length > 0);
      const tStart = Date.now() - t0;
      const l1 = (await lastText(page, 'message-assistant')).length;
      await sleep(GROW_GAP_MS);
      const l2 = (await lastText(page, 'message-assistant')).length;
      const busy = !(await page.isEnabled(byId('send'))) && (await page.isEnabled(byId('stop')));
      if (!(l2 > l1) || !busy) {
        const g = await growth(page);
        const note = await page.locator(`${byId('message-assistant')} .note`).last().textContent();
        throw new Error(`the answer did not grow while busy: lengths ${l1} then ${l2}, busy ${busy}, ` +
          `first text after ${tStart} ms, ${g.length} steps over ${g.length ? Math.round(g[g.length - 1][1] - g[0][1]) : 0} ms, ` +
          `note "${note}", stats "${await page.textContent('#stat-speed')}"`);
      }
      await growth(page);
      assert((await metric(base, 'sipp_active_requests', target)) === 1, 'the gateway shows the request active');
      await page.click(byId('stop'));
      await until('the stop button to disable and send to enable', () => idle(page), STOP_END_TIMEOUT_MS);
      await until('no active request in /metrics', async () =>
        (await metric(base, 'sipp_active_requests', target)) === 0 &&
        (await metric(base, 'sipp_engine_running_requests', target)) === 0, STOP_END_TIMEOUT_MS, 100);
      const l3 = (await lastText(page, 'message-assistant')).length;
      await sleep(SETTLE_MS);
      assert((await lastText(page, 'message-assistant')).length === l3, 'text kept arriving after Stop');
      const note = await page.locator(`${byId('message-assistant')} .note`).last().textContent();
      assert(/Stopped/.test(note), `the message is not marked as stopped: ${note}`);
      // Only a stream that ran to its end has a usage chunk; without one the speed is in chunks.
      const speed = await page.textContent('#stat-speed');
      assert(/chunks\/s/.test(speed), `the answer ran to its end (it has a token count): ${speed}`);
      await shot(page, 'stopped');
    });

    await check('markup in a message is shown as text; the request carries the settings and the history', async () => {
      await setMaxTokens(page, 4);
      await page.fill('#system', 'Be brief.');
      const evil = '<img src=x onerror="window.__pwned=1"><b>bold</b>';
      const posted = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions') && r.method() === 'POST');
      await sendAndWait(page, evil);
      const body = (await posted).postDataJSON();
      const roles = body.messages.map((m) => m.role).join(',');
      assert(roles === 'system,user,assistant,user,assistant,user', `messages: ${roles}`);
      assert(body.messages[0].content === 'Be brief.' && body.messages[5].content === evil, 'message contents');
      assert(body.model === target && body.stream === true && body.stream_options.include_usage === true &&
        body.max_tokens === 4 && body.temperature === 0.7 && body.ignore_eos === true, `body: ${JSON.stringify(body)}`);
      assert((await lastText(page, 'message-user')) === evil, 'the text changed');
      const found = await page.evaluate(() => ({
        tags: document.querySelectorAll('#log img, #log b').length,
        pwned: window.__pwned === 1,
      }));
      assert(found.tags === 0 && !found.pwned, `markup was interpreted: ${JSON.stringify(found)}`);
    });

    await check('Clear empties the conversation', async () => {
      await page.click('#clear');
      assert((await count(page, 'message-user')) === 0 && (await count(page, 'message-assistant')) === 0, 'messages remain');
      assert(await page.isVisible('#empty'), 'the empty hint is back');
    });

    await check('keyboard only: Tab reaches the prompt, Enter sends, Escape stops', async () => {
      await setMaxTokens(page, 8);
      await page.evaluate(() => document.activeElement && document.activeElement.blur());
      let tabs = 0;
      while (!(await page.evaluate(() => document.activeElement.dataset.testid === 'prompt'))) {
        assert(++tabs <= MAX_TABS_TO_PROMPT, `the prompt was not reached in ${MAX_TABS_TO_PROMPT} Tabs`);
        await page.keyboard.press('Tab');
      }
      console.log(`  the prompt is ${tabs} Tab(s) away`);
      // Shift+Enter is a new line, not a send.
      await page.keyboard.type('first line');
      await page.keyboard.press('Shift+Enter');
      await page.keyboard.type('second line');
      assert((await page.inputValue(byId('prompt'))) === 'first line\nsecond line', 'Shift+Enter');
      assert((await count(page, 'message-user')) === 0, 'Shift+Enter sent the message');
      await page.keyboard.press('Enter');
      await until('the keyboard message', async () => (await count(page, 'message-user')) === 1);
      assert((await lastText(page, 'message-user')) === 'first line\nsecond line', 'sent text');
      await until('the answer to end', () => idle(page));
      // A long one, stopped with Escape; the focus stays in the message box throughout.
      await page.focus('#max-tokens');
      await page.keyboard.press('Control+A');
      await page.keyboard.type(String(LONG_MAX_TOKENS));
      await page.focus(byId('prompt'));
      await page.keyboard.type('Another long story, please.');
      const before = await count(page, 'message-assistant');
      await page.keyboard.press('Enter');
      await until('the long answer to start', async () => (await count(page, 'message-assistant')) > before &&
        ((await lastText(page, 'message-assistant')) || '').length > 0 && !(await idle(page)));
      await page.keyboard.press('Escape');
      await until('Escape to stop the answer', () => idle(page), STOP_END_TIMEOUT_MS);
      const focused = await page.evaluate(() => document.activeElement.dataset.testid);
      assert(focused === 'prompt', `focus moved to ${focused}`);
      await until('no active request in /metrics', async () =>
        (await metric(base, 'sipp_active_requests', target)) === 0, STOP_END_TIMEOUT_MS, 100);
    });

    await check('a narrow screen (375 px) has no horizontal scroll', async () => {
      await page.setViewportSize({ width: NARROW_WIDTH, height: 800 });
      await setMaxTokens(page, 16);
      await sendAndWait(page, `A long word: ${'x'.repeat(300)}`);
      const w = await page.evaluate(() => ({
        doc: document.documentElement.scrollWidth,
        body: document.body.scrollWidth,
        view: document.documentElement.clientWidth,
      }));
      assert(w.doc <= w.view && w.body <= w.view, `content is wider than the screen: ${JSON.stringify(w)}`);
      await shot(page, 'narrow', { fullPage: true });
    });

    await check('no console errors and no CSP violations', async () => {
      assert(consoleErrors.length === 0, consoleErrors.join('\n'));
    });

    await check('a target without a projector offers no image button', async () => {
      await page.selectOption(byId('target-select'), target);
      assert(await page.isHidden(byId('attach')), 'the Add image button shows for a text-only target');
    });

    if (args['auth-base']) await authChecks(browser, args, shot);
    if (args['vision-base']) await visionChecks(browser, args, shot);
    await context.close();
  } finally {
    await browser.close();
  }
}

/* A gateway whose target has a projector: the page offers Add image, shows the picked image under
 * the message box and in the user's message, and the gateway counts its image tokens. */
async function visionChecks(browser, args, shot) {
  const base = args['vision-base'];
  const target = args['vision-target'];
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('pageerror', (e) => errors.push(String(e)));
  try {
    await check('vision: Add image attaches a file, which goes with the message and is shown in it', async () => {
      await page.goto(`${base}/`, { waitUntil: 'load' });
      await until('the target in the select', () => page.$(`${byId('target-select')} option[value="${target}"]`));
      await page.selectOption(byId('target-select'), target);
      await until('the Add image button', () => page.isVisible(byId('attach')));
      await page.setInputFiles('#image-file', args.image);
      await until('the picked image under the message box', () => page.$(`${byId('attachments')} img`));
      await setMaxTokens(page, 4);
      const before = (await metric(base, 'sipp_media_tokens_total', target)) || 0;
      await sendAndWait(page, 'What is in this picture?');
      const note = await page.locator(`${byId('message-assistant')} .note`).last().textContent();
      assert(!/Error/.test(note), `the chat failed: ${note}`);
      const shown = await page.$$eval(`${byId('message-user')} .images img`, (imgs) => imgs.map((i) => i.naturalWidth));
      assert(shown.length === 1 && shown[0] > 0, `the image is not shown in the message: ${JSON.stringify(shown)}`);
      assert(await page.isHidden(byId('attachments')), 'the sent image is still waiting under the box');
      const after = await metric(base, 'sipp_media_tokens_total', target);
      assert(after > before, `the gateway counted no image tokens (${before} -> ${after})`);
      assert(errors.length === 0, errors.join('\n'));
      await shot(page, 'vision');
    });
  } finally {
    await context.close();
  }
}

/* A gateway with [[tokens]]: the page asks for a token, keeps it in sessionStorage only, and sends it. */
async function authChecks(browser, args, shot) {
  const base = args['auth-base'];
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  const page = await context.newPage();
  try {
    await check('with auth: the page asks for a bearer token', async () => {
      await page.goto(`${base}/`, { waitUntil: 'load' });
      await until('the token prompt', async () => /token/i.test(await page.textContent('#target-info')));
      assert(await page.$eval('#advanced', (d) => d.open), 'the token field is not shown');
    });
    await check('with auth: the token lists the models and a chat works', async () => {
      await page.fill('#token', args['auth-token']);
      await page.keyboard.press('Tab'); // commits the field ("change")
      await until('the target in the select', () => page.$(`${byId('target-select')} option[value="${args.target}"]`));
      await setMaxTokens(page, 8);
      await sendAndWait(page, 'Hello with a token');
      const note = await page.locator(`${byId('message-assistant')} .note`).last().textContent();
      assert(!/Error/.test(note), `the chat failed: ${note}`);
      await until('the backend', async () => (await page.textContent('#stat-backend')) !== '–');
      const where = await page.evaluate(() => ({
        session: sessionStorage.getItem('sipp.token'),
        local: localStorage.length,
        cookie: document.cookie,
        url: location.href,
      }));
      assert(where.session === args['auth-token'], 'the token is not in sessionStorage');
      assert(where.local === 0 && where.cookie === '' && !where.url.includes(args['auth-token']),
        `the token leaked: ${JSON.stringify(where)}`);
      await shot(page, 'auth');
    });
  } finally {
    await context.close();
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const timer = setTimeout(() => {
    console.log(`not ok - the run took over ${RUN_TIMEOUT_MS} ms`);
    console.log(`web: ${results.passed} passed, ${results.failed + 1} failed`);
    process.exit(1);
  }, RUN_TIMEOUT_MS);
  try {
    await run(args);
  } catch (err) {
    results.failed++;
    console.log(`not ok - the browser run: ${(err && err.stack) || err}`);
  }
  clearTimeout(timer);
  process.exit(finish('web'));
}

main();
