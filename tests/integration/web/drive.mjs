/**
 * drive.mjs PLAN.json: runs browser scenarios in Debian's headless Chromium with playwright-core and
 * prints their results as one JSON array (the tests in ../test_web.py and `sipp verify --runtime
 * browser` read it). No browser is downloaded: the executable is /usr/bin/chromium (or $CHROMIUM).
 *
 * PLAN: { userDataDir, screenshotDir?, webgpu?, stallMs?, timeoutMs?, serve?, steps: [{ url, scenario,
 * args, block?, screenshot? }] }. Steps share one persistent profile, so the origin private file system
 * (the model cache) lives from one step to the next. `block` lists URL globs whose requests are
 * aborted during that step; each step reports the requests it saw and the ones it blocked.
 *
 * Bounded by progress, not by time: a step runs as long as it makes progress (a request, a console
 * line, or the page's window.sippProgress counter moving, which harness.js bumps per token, load and
 * upload), and is cut only after stallMs (default 5 min) without any; a loaded 2-core machine is slow,
 * not stalled. timeoutMs (default 1 h) is a safety stop per step that no progressing step should
 * reach. Progress is reported on stderr ("drive: ..." lines, at most one per HEARTBEAT_MS while a
 * step progresses), so that a caller can bound the whole run the same way.
 *
 * serve: { root, files: { "/models/NAME": PATH }, uploadDir } starts a loopback server of this
 * script's own (cross-origin isolated: COOP/COEP on every response) for callers without one
 * (`sipp verify`): GET serves root's bindings/web, build/web and tests/integration/web and the files
 * named; PUT /upload/NAME writes the body to uploadDir/NAME. "{base}" in step urls and string args
 * becomes its http://127.0.0.1:PORT.
 */
import { createReadStream, createWriteStream, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

// A line before playwright-core loads, and one after: a run that stalls says where.
process.stderr.write('drive: loading playwright-core\n');
const { chromium } = await import('playwright-core');
process.stderr.write('drive: loaded\n');

const SERVED = ['/bindings/web/', '/build/web/', '/tests/integration/web/'];
const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };

function serve({ root, files = {}, uploadDir }) {
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(req.url.split('?')[0]);
    const headers = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cache-Control': 'no-store' };
    if (req.method === 'PUT' && url.startsWith('/upload/') && uploadDir && !url.includes('..')) {
      const out = createWriteStream(path.join(uploadDir, path.basename(url)));
      req.pipe(out);
      out.on('finish', () => { res.writeHead(200, headers); res.end(); });
      out.on('error', () => { res.writeHead(500, headers); res.end(); });
      return;
    }
    const file = files[url] || (SERVED.some((p) => url.startsWith(p)) && !url.includes('..') ? path.join(root, url) : null);
    let size = -1;
    try { size = file ? statSync(file).size : -1; } catch {}
    if (size < 0) { res.writeHead(404, headers); res.end(); return; }
    res.writeHead(200, { ...headers, 'Content-Length': size,
      'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream' });
    createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function withBase(value, base) {
  if (typeof value === 'string') return value.replaceAll('{base}', base);
  if (Array.isArray(value)) return value.map((v) => withBase(v, base));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withBase(v, base)]));
  return value;
}

const FLAGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--no-first-run', '--disable-quic'];

const CLOSE_TIMEOUT_MS = 10000;
const POLL_MS = 1000; // how often a running step's progress is looked at
const HEARTBEAT_MS = 5000;
const MAX_STALL_RETRIES = 1;

const note = (line) => process.stderr.write(`drive: ${line}\n`);

/* Resolves never; rejects once the step has made no progress for stallMs, or ran past timeoutMs. */
function watchStep(page, step, t0, marks, limits) {
  return new Promise((_, reject) => {
    let seen = -1;
    let beat = Date.now();
    const timer = setInterval(async () => {
      const count = await page.evaluate(() => window.sippProgress || 0).catch(() => seen);
      if (count !== seen) {
        seen = count;
        marks.last = Date.now();
      }
      const now = Date.now();
      if (marks.last > beat && now - beat >= HEARTBEAT_MS) {
        beat = now;
        note(`${step.scenario}: progressing (${Math.round((now - t0) / 1000)} s)`);
      }
      const why = now - marks.last > limits.stallMs ? `made no progress for ${limits.stallMs} ms`
        : now - t0 > limits.timeoutMs ? `ran past the safety stop of ${limits.timeoutMs} ms` : null;
      if (why) {
        clearInterval(timer);
        reject(new Error(`scenario ${step.scenario} ${why}`));
      }
    }, POLL_MS);
    marks.stop = () => clearInterval(timer);
  });
}

let plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const server = plan.serve ? await serve(plan.serve) : null;
if (server) plan = { ...plan, steps: withBase(plan.steps, `http://127.0.0.1:${server.address().port}`) };
const limits = { stallMs: plan.stallMs || 300000, timeoutMs: plan.timeoutMs || 3600000 };
note('launching Chromium');
const context = await chromium.launchPersistentContext(plan.userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  timeout: 0, // a slow start on a loaded machine is not a failure; the caller bounds a stalled one
  args: [...FLAGS, ...(plan.webgpu ? ['--enable-unsafe-webgpu'] : [])],
  viewport: { width: 1000, height: 700 },
});
const results = [];
try {
  const page = context.pages()[0] || await context.newPage();
  const consoleLines = [];
  const marks = { last: Date.now(), stop: () => {} };
  const progressed = () => { marks.last = Date.now(); };
  page.setDefaultTimeout(0); // waits are bounded by watchStep instead
  page.setDefaultNavigationTimeout(0);
  page.on('console', (m) => { consoleLines.push(`${m.type()}: ${m.text()}`); progressed(); });
  page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  context.on('requestfinished', progressed);
  for (const step of plan.steps) {
    const seen = [];
    const blocked = [];
    const onRequest = (r) => { seen.push(r.url()); progressed(); };
    context.on('request', onRequest);
    const routes = [];
    for (const glob of step.block || []) {
      const handler = (route) => { blocked.push(route.request().url()); route.abort(); };
      await context.route(glob, handler);
      routes.push([glob, handler]);
    }
    let result;
    let error = null;
    const t0 = Date.now();
    let stalls = 0;
    for (;;) {
      progressed();
      note(`${step.scenario}: started (${results.length + 1} of ${plan.steps.length})${stalls ? ', again' : ''}`);
      const watch = watchStep(page, step, Date.now(), marks, limits);
      error = null;
      try {
        await Promise.race([(async () => {
          await page.goto(step.url, { waitUntil: 'load' });
          await page.waitForFunction(() => window.harnessReady === true || window.sippPageReady === true, null, { timeout: 0 });
          result = await page.evaluate(([name, args]) => window.scenarios[name](args), [step.scenario, step.args || {}]);
        })(), watch]);
      } catch (e) {
        error = e.message;
      }
      marks.stop();
      // A step that stalls (seen once in ~40 runs: cacheLoad on a loaded 2-core host, no request,
      // no console line for minutes) is run once more from a fresh navigation; the result says so.
      if (!error || !/made no progress/.test(error) || stalls >= MAX_STALL_RETRIES) break;
      stalls++;
      note(`${step.scenario}: stalled (${error}); running it again`);
      await page.goto('about:blank').catch(() => {});
    }
    note(`${step.scenario}: ${error ? `failed: ${error}` : 'done'} in ${Date.now() - t0} ms`);
    if (step.screenshot && plan.screenshotDir) {
      await page.screenshot({ path: path.join(plan.screenshotDir, `${step.screenshot}.png`) }).catch(() => {});
    }
    if (routes.length) {
      // Unrouting sets the interception patterns on every target of the page, its workers included,
      // and a wasm worker parked in Atomics.wait never answers (a CI run waited 600 s here after
      // cacheLoad): leave the page first, which ends its workers; the next step navigates anyway.
      note(`${step.scenario}: leaving the page to lift its blocks`);
      await page.goto('about:blank').catch(() => {});
      for (const [glob, handler] of routes) await context.unroute(glob, handler);
    }
    context.off('request', onRequest);
    results.push({ scenario: step.scenario, result, error, stalls, requests: seen, blocked, ms: Date.now() - t0,
      console: consoleLines.splice(0) });
  }
} finally {
  // A page whose workers still compute can hold Chromium's shutdown for minutes: leave it first,
  // and bound the close (playwright kills the browser it launched when this process exits).
  const page = context.pages()[0];
  if (page) await page.goto('about:blank').catch(() => {});
  await Promise.race([context.close(), new Promise((r) => setTimeout(r, CLOSE_TIMEOUT_MS))]);
  if (server) server.close();
}
process.stdout.write(JSON.stringify(results));
process.exit(0);
