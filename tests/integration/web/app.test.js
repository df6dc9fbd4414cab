#!/usr/bin/env node
/*
 * app.test.js: sipp's web page as people use it (issue 50), in Debian's Chromium (headless, through
 * playwright-core) against a real `sipp serve` on loopback; tests/integration/test_web_app.py starts
 * it (a local target and a remote one whose answers the test scripts) and runs:
 *
 *   node app.test.js --base URL --local NAME --scripted NAME --qwen NAME --pull-url URL --catalog-name NAME --artifacts DIR
 *
 * --qwen names a local target that can call tools (Qwen 2.5's template) on a gateway whose [[mcp]]
 * server "calc" offers add and echo.
 *
 * Each check prints "ok" or "not ok"; the last line is "web-app: N passed, N failed"; the exit
 * status is 0 only when every check passed. Every wait is bounded and the run is cut off after
 * RUN_TIMEOUT_MS.
 */
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');
const { check, assert, sleep, until, metric, axeViolations, layoutProblems, results, finish, STEP_TIMEOUT_MS } = require('./checks');

const CHROMIUM = process.env.SIPP_CHROMIUM || '/usr/bin/chromium';
const RUN_TIMEOUT_MS = 200000;
const FIRST_PAINT_MS = 1000;
const PAINT_TRIES = 3;
const HANDS_FREE_TIMEOUT_MS = 45000; // two turns: speech, 1.2 s of quiet, a transcription and an answer each
const XSS_SETTLE_MS = 600;
const SIZES = [[375, 740], [1280, 800], [1920, 1080]];
const VIEWS = ['chat', 'models', 'charts'];
const CHART_REQUESTS = 3;
const LAUNCH_TIMEOUT_MS = 60000; // a loaded 2-core machine starts Chromium slowly

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) throw new Error(`bad argument ${argv[i]}`);
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const need of ['base', 'local', 'scripted', 'qwen', 'ears', 'pull-url', 'catalog-name', 'artifacts'])
    if (!args[need]) throw new Error(`--${need} is required`);
  return args;
}

const byId = (id) => `[data-testid="${id}"]`;

async function idle(page) {
  return page.evaluate(() => !document.querySelector('[data-testid="send"]').disabled);
}

async function send(page, text) {
  const before = await page.locator(byId('message-assistant')).count();
  await page.fill(byId('prompt'), text);
  await page.click(byId('send'));
  await until('a new answer', async () => (await page.locator(byId('message-assistant')).count()) > before);
  await until('the answer to end', () => idle(page));
}

const lastAnswer = (page) => page.locator(byId('message-assistant')).last();

async function view(page, name) {
  await page.click(byId(`nav-${name}`));
  await until(`the ${name} view`, () => page.isVisible(`#${name}-view`));
}

async function run(args) {
  const { base } = args;
  const origin = new URL(base).origin;
  const shot = (page, name) => page.screenshot({ path: path.join(args.artifacts, `web-app-${name}.png`) });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: LAUNCH_TIMEOUT_MS,
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
    context.setDefaultTimeout(STEP_TIMEOUT_MS);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    const page = await context.newPage();
    const requests = [];
    const errors = [];
    const dialogs = [];
    page.on('request', (r) => requests.push(r.url()));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      d.dismiss().catch(() => {});
    });

    // The best of PAINT_TRIES loads: the page's own cost, not another process's turn on a shared machine.
    const loaded = await check('the page loads and paints in under a second', async () => {
      const paints = [];
      for (let i = 0; i < PAINT_TRIES && !(paints.length && Math.min(...paints) < FIRST_PAINT_MS); i++) {
        const res = await page.goto(`${base}/`, { waitUntil: 'load' });
        assert(res.status() === 200, `GET / answered ${res.status()}`);
        paints.push(await until('a first paint', () => page.evaluate(() => {
          const p = performance.getEntriesByType('paint').find((e) => e.name === 'first-contentful-paint');
          return p ? p.startTime : 0;
        })));
      }
      const best = Math.min(...paints);
      console.log(`  first contentful paint after ${paints.map(Math.round).join(', ')} ms`);
      assert(best < FIRST_PAINT_MS, `first paint after ${paints.map(Math.round).join(', ')} ms`);
      await until('the scripted target', () => page.$(`${byId('target-select')} option[value="${args.scripted}"]`));
    });
    if (!loaded) return;

    await check('an answer renders as Markdown with highlighted code and copy buttons', async () => {
      await page.selectOption(byId('target-select'), args.scripted);
      await send(page, 'markdown please');
      const a = lastAnswer(page);
      const got = await a.evaluate((el) => ({
        h1: el.querySelector('.md h1') && el.querySelector('.md h1').textContent,
        strong: el.querySelectorAll('.md strong').length,
        inline: el.querySelectorAll('.md p code').length,
        hl: el.querySelectorAll('pre code.hljs .hljs-keyword').length,
        table: el.querySelectorAll('.md table td').length,
        list: el.querySelectorAll('.md ul li').length,
        link: [...el.querySelectorAll('.md a')].map((x) => `${x.getAttribute('href')} ${x.rel} ${x.target}`),
        copies: el.querySelectorAll('.code button.copy').length,
      }));
      assert(got.h1 === 'Brewing notes' && got.strong === 1 && got.inline === 1 && got.table === 2 && got.list === 2,
        `Markdown: ${JSON.stringify(got)}`);
      assert(got.hl > 0 && got.copies === 1, `code: ${JSON.stringify(got)}`);
      assert(got.link[0] === 'https://example.invalid/tea noopener noreferrer _blank', `link: ${got.link}`);
      await a.locator('.code button.copy').click();
      const clip = await page.evaluate(() => navigator.clipboard.readText());
      assert(clip.includes('def steep(minutes):') && !clip.includes('Copy'), `clipboard: ${clip}`);
    });

    await check('a conversation survives a reload, with its settings', async () => {
      await page.fill('#system', 'Be a tea expert.');
      await send(page, 'second question');
      await page.reload({ waitUntil: 'load' });
      await until('the conversation in the list', async () => (await page.locator(byId('conversation')).count()) >= 1);
      await until('its messages', async () => (await page.locator(byId('message-user')).count()) === 2);
      const t = await page.textContent(byId('chat-title'));
      assert(t === 'markdown please', `title ${t}`);
      assert((await lastAnswer(page).textContent()).includes('You said: second question'), 'the second answer');
      assert((await page.locator(`${byId('message-assistant')} .md h1`).count()) === 1, 'the first answer is rendered again');
      await until('the model of the conversation', async () => (await page.inputValue(byId('target-select'))) === args.scripted);
      assert((await page.inputValue('#system')) === 'Be a tea expert.', 'the system prompt');
    });

    await check('a model\'s answer runs no script: <script>, <img onerror>, javascript: links, SVG', async () => {
      await page.evaluate(() => delete window.__xss);
      await send(page, 'xss please');
      await sleep(XSS_SETTLE_MS);
      const got = await lastAnswer(page).evaluate((el) => ({
        xss: window.__xss,
        tags: [...el.querySelectorAll('script, img, svg, iframe, math, object, embed, style, form')].map((x) => x.tagName),
        handlers: [...el.querySelectorAll('*')].flatMap((x) => [...x.attributes].filter((a) => /^on/i.test(a.name)).map((a) => a.name)),
        hrefs: [...el.querySelectorAll('[href], [src], [xlink\\:href]')].map((x) => x.getAttribute('href') || x.getAttribute('src') || ''),
        text: el.querySelector('.md').textContent,
      }));
      assert(got.xss === undefined, `script ran: window.__xss = ${got.xss}`);
      assert(dialogs.length === 0, `dialogs: ${dialogs}`);
      assert(got.tags.length === 0, `dangerous elements: ${got.tags}`);
      assert(got.handlers.length === 0, `event handlers: ${got.handlers}`);
      const bad = got.hrefs.filter((h) => !/^(https?:|#)/i.test(h) || h.includes('127.0.0.2'));
      assert(bad.every((h) => !/^(javascript|data):/i.test(h)), `dangerous links: ${bad}`);
      assert(got.text.includes("<script>window.__xss = 'script'</script>"), 'the markup is not shown as text');
      for (const link of await lastAnswer(page).locator('.md a').all()) {
        const href = await link.getAttribute('href');
        if (href && /^https?:/.test(href)) continue; // a real link opens a new tab on click; not followed here
        await link.click({ modifiers: [] }).catch(() => {});
      }
      await sleep(XSS_SETTLE_MS);
      assert((await page.evaluate(() => window.__xss)) === undefined, 'a click ran script');
      assert(!requests.some((u) => u.includes('127.0.0.2')), 'the answer made the page fetch from another host');
    });

    await check('reasoning is folded; a tool call is a card', async () => {
      await send(page, 'think please');
      const a = lastAnswer(page);
      const got = await a.evaluate((el) => ({
        folded: el.querySelector('details.reasoning') && !el.querySelector('details.reasoning').open,
        reasoning: el.querySelector('.reasoning-text') && el.querySelector('.reasoning-text').textContent,
        card: el.querySelector('[data-testid="tool-call"]') && el.querySelector('[data-testid="tool-call"]').textContent,
        content: el.querySelector('.md').textContent,
      }));
      assert(got.folded && got.reasoning === 'First, the kettle. Then the leaves.', `reasoning: ${JSON.stringify(got)}`);
      assert(got.card && got.card.includes('get_weather') && got.card.includes('"city": "Kyoto"'), `card: ${got.card}`);
      assert(got.content.includes('80 °C'), `content: ${got.content}`);
    });

    await check('audio dropped on the message box, and pasted, is previewed and sent to a model that hears', async () => {
      await page.click(byId('new-chat'));
      await page.selectOption(byId('target-select'), args.ears);
      await until('the Add button', () => page.isVisible(byId('attach')));
      const put = (kind, name, type) => page.evaluate(({ kind, name, type }) => {
        // A WAV of 0.25 s of silence at 16 kHz, made here: what a person would drop or paste.
        const n = 4000;
        const b = new DataView(new ArrayBuffer(44 + 2 * n));
        const t = (at, s) => [...s].forEach((c, i) => b.setUint8(at + i, c.charCodeAt(0)));
        t(0, 'RIFF'); b.setUint32(4, 36 + 2 * n, true); t(8, 'WAVE'); t(12, 'fmt ');
        b.setUint32(16, 16, true); b.setUint16(20, 1, true); b.setUint16(22, 1, true);
        b.setUint32(24, 16000, true); b.setUint32(28, 32000, true); b.setUint16(32, 2, true);
        b.setUint16(34, 16, true); t(36, 'data'); b.setUint32(40, 2 * n, true);
        const dt = new DataTransfer();
        dt.items.add(new File([b.buffer], name, { type }));
        if (kind === 'drop') document.getElementById('composer').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
        else document.getElementById('prompt').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
      }, { kind, name, type });
      await put('drop', 'dropped.wav', 'audio/wav');
      await until('the dropped clip\'s preview', async () => (await page.locator(`${byId('attachments')} audio`).count()) === 1);
      await put('paste', 'pasted.png', 'image/png');
      await until('the refusal of an image', async () => /not a file this model takes/.test(await page.textContent('#announce')));
      await put('paste', 'pasted.wav', 'audio/wav');
      await until('both clips', async () => (await page.locator(`${byId('attachments')} audio`).count()) === 2);
      const before = (await metric(base, 'sipp_media_tokens_total', args.ears)) || 0;
      const posted = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
      await send(page, 'What do you hear?');
      const parts = (await posted).postDataJSON().messages.pop().content;
      assert(parts.filter((p) => p.type === 'input_audio' && p.input_audio.format === 'wav').length === 2, `parts: ${JSON.stringify(parts).slice(0, 300)}`);
      assert((await page.locator(`${byId('message-user')} audio`).count()) === 2, 'the clips are not shown in the message');
      assert(await page.isHidden(byId('attachments')), 'the clips still wait under the box');
      const note = await lastAnswer(page).locator('.note').textContent();
      assert(!/Error/.test(note), `the chat failed: ${note}`);
      const after = await metric(base, 'sipp_media_tokens_total', args.ears);
      assert(after > before, `the gateway counted no audio tokens (${before} -> ${after})`);
      await page.selectOption(byId('target-select'), args.scripted);
    });

    await check('edit a message and answer again from there; regenerate', async () => {
      await page.click(byId('new-chat'));
      await send(page, 'first try');
      await page.locator(byId('message-user')).last().locator(byId('edit')).click();
      await page.fill(byId('edit-field'), 'second try');
      await page.click(byId('edit-save'));
      await until('the new answer', async () => (await idle(page)) &&
        (await page.locator(byId('message-assistant')).count()) === 1 &&
        (await lastAnswer(page).textContent()).includes('You said: second try'));
      assert((await page.locator(byId('message-user')).count()) === 1, 'the edited message was added, not replaced');
      await lastAnswer(page).evaluate((el) => (el.dataset.old = '1'));
      await lastAnswer(page).locator(byId('regenerate')).click();
      // One look at the page: idle, one answer, and not the old one (separate looks could straddle
      // the moment the new answer starts).
      await until('the regenerated answer', () => page.evaluate(() => {
        const answers = document.querySelectorAll('[data-testid="message-assistant"]');
        return !document.querySelector('[data-testid="send"]').disabled && answers.length === 1 && !answers[0].dataset.old;
      }));
      const text = (await lastAnswer(page).locator('.md').textContent()).trim();
      assert(text === 'You said: second try', `regenerated answer: ${text}`);
    });

    await check('conversations: search by title, rename, delete', async () => {
      const n = await page.locator(byId('conversation')).count();
      assert(n === 3, `${n} conversations listed`); // markdown please, the audio one, first try
      await page.fill(byId('search'), 'MARKDOWN');
      await until('one match', async () => (await page.locator(byId('conversation')).count()) === 1);
      await page.fill(byId('search'), '');
      await until('all again', async () => (await page.locator(byId('conversation')).count()) === n);
      await page.click(byId('rename'));
      await page.fill(byId('rename-input'), 'Renamed chat');
      await page.keyboard.press('Enter');
      await until('the new title', async () => (await page.textContent(byId('chat-title'))) === 'Renamed chat');
      await until('the new title in the list', async () => (await page.locator(byId('conversation')).allTextContents()).includes('Renamed chat'));
      await page.click(byId('delete'));
      await page.click(byId('delete'));
      await until('one conversation fewer', async () => (await page.locator(byId('conversation')).count()) === n - 1);
      assert((await page.textContent(byId('chat-title'))) === 'New conversation', 'a new conversation is shown');
    });

    await check('export and import conversations as JSON', async () => {
      const [download] = await Promise.all([page.waitForEvent('download'), page.click(byId('export'))]);
      const file = path.join(os.tmpdir(), `sipp-web-export-${process.pid}.json`);
      await download.saveAs(file);
      const j = JSON.parse(fs.readFileSync(file, 'utf8'));
      const n = await page.locator(byId('conversation')).count();
      assert(j.sipp_conversations === 1 && j.conversations.length === n, `export: ${JSON.stringify(j).slice(0, 200)}`);
      const tea = j.conversations.find((c) => c.title === 'markdown please');
      assert(tea && tea.settings.system === 'Be a tea expert.' && tea.messages.length >= 4, 'a conversation and its settings');
      const audio = j.conversations.find((c) => c.messages.some((m) => (m.files || []).length === 2));
      assert(audio && audio.messages[0].files[0].dataUrl.startsWith('data:audio/wav;base64,'), 'the audio clips are exported');
      await page.setInputFiles('#import-file', file);
      await until('the imported conversations', async () => (await page.locator(byId('conversation')).count()) === 2 * n);
      fs.unlinkSync(file);
    });

    await check('"Use tool servers": the answer comes from /v1/responses and shows the MCP call', async () => {
      await page.click(byId('new-chat'));
      await page.selectOption(byId('target-select'), args.qwen);
      await until('the tool servers switch', () => page.isVisible(byId('use-mcp')));
      // Not offered where the gateway runs no MCP tools: a remote target, a speech one.
      for (const other of [args.scripted, args.speaker].filter(Boolean)) {
        await page.selectOption(byId('target-select'), other);
        assert(await page.isHidden(byId('use-mcp')), `"Use tool servers" shows for ${other}`);
      }
      await page.selectOption(byId('target-select'), args.qwen);
      assert(await page.isVisible(byId('use-mcp')), '"Use tool servers" hides for the qwen target');
      const hint = await page.textContent(byId('mcp-hint'));
      assert(/\/v1\/responses/.test(hint) && /calc \(add, echo\)/.test(hint), `hint: ${hint}`);
      await page.fill('#temperature', '0');
      await page.fill('#max-tokens', '200');
      await page.check(byId('use-mcp'));
      await page.selectOption(byId('tool-choice'), 'required');
      const posted = page.waitForRequest((r) => r.url().endsWith('/v1/responses'));
      await send(page, 'Use a tool.');
      const body = (await posted).postDataJSON();
      const tools = JSON.stringify(body.tools);
      assert(body.stream === true && body.tool_choice === 'required' && body.max_output_tokens === 200 && body.temperature === 0 &&
        body.parallel_tool_calls === false &&
        tools === JSON.stringify([{ type: 'mcp', server_label: 'calc', require_approval: 'never' }]), `body: ${JSON.stringify(body)}`);
      const last = body.input[body.input.length - 1];
      assert(last.type === 'message' && last.role === 'user' && last.content === 'Use a tool.', `input: ${JSON.stringify(body.input)}`);
      const note = await lastAnswer(page).locator('.note').textContent();
      assert(!/Error/.test(note) && /tokens/.test(note), `the answer's note: ${note}`);
      const cards = lastAnswer(page).locator(byId('mcp-call'));
      const nCards = await cards.count();
      assert(nCards >= 1, 'no MCP call card in the answer');
      const got = await cards.first().evaluate((el) => ({
        title: el.querySelector('.tool-title').textContent,
        args: el.querySelector('.tool-body:not(.tool-output)').textContent,
        out: el.querySelector('[data-testid="mcp-output"]').textContent,
      }));
      const m = /^MCP call: (add|echo) \(server calc\)$/.exec(got.title);
      assert(m, `card: ${JSON.stringify(got)}`);
      const a = JSON.parse(got.args);
      const want = m[1] === 'add' ? String(a.a + a.b) : a.text;
      assert(got.out === `Output: ${want}`, `the server's output: ${JSON.stringify(got)}`);
      console.log(`  ${m[1]}(${JSON.stringify(a)}) -> ${got.out}`);
      assert(/tok\/s/.test(await page.textContent('#stat-speed')), 'no speed in the status strip');
      await shot(page, 'chat-mcp');
      const problems = await layoutProblems(page);
      assert(problems.length === 0, `the answer with its MCP card: ${problems.join('\n')}`);

      // Off: the same target over /v1/chat/completions, the MCP answer sent as its text only.
      await page.uncheck(byId('use-mcp'));
      const chat = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
      await send(page, 'Thanks.');
      const messages = (await chat).postDataJSON().messages;
      const prev = messages.find((x) => x.role === 'assistant');
      assert(prev && !prev.tool_calls && Object.keys(prev).sort().join() === 'content,role' &&
        messages.every((x) => x.role !== 'tool'), `messages: ${JSON.stringify(messages)}`);
      const note2 = await lastAnswer(page).locator('.note').textContent();
      assert(!/Error/.test(note2), `the chat answer's note: ${note2}`);
      assert((await page.locator(`${byId('message-assistant')} ${byId('mcp-call')}`).count()) === nCards,
        'the MCP card of the first answer is gone');

      // Stop aborts a Responses stream as it does a chat one.
      await page.check(byId('use-mcp'));
      await page.fill('#max-tokens', '1000');
      const before = await page.locator(byId('message-assistant')).count();
      await page.fill(byId('prompt'), 'Use a tool, then talk.');
      await page.click(byId('send'));
      await page.click(byId('stop'));
      await until('the stopped answer', async () => (await idle(page)) && (await page.locator(byId('message-assistant')).count()) > before);
      const note3 = await lastAnswer(page).locator('.note').textContent();
      assert(note3 === 'Stopped.', `after Stop: ${note3}`);
      await page.uncheck(byId('use-mcp'));
      await page.fill('#temperature', '0.7');
      await page.fill('#max-tokens', '512');
    });

    await check('the Models view lists each target; unload and load change the state shown', async () => {
      assert(await page.isHidden(byId('models-view')), 'the models view shows before it is opened');
      await view(page, 'models');
      const card = (name) => page.locator(`${byId('model-card')}[data-name="${name}"]`);
      await until('both targets', async () => (await card(args.local).count()) === 1 && (await card(args.scripted).count()) === 1);
      const state = () => card(args.local).locator(byId('model-state')).textContent();
      await until('tiny ready', async () => (await state()) === 'ready');
      assert((await card(args.local).locator('meter').count()) >= 1, 'no memory bar');
      const facts = await card(args.local).textContent();
      assert(/Slots\s*2/.test(facts) && /Backend\s*cpu/.test(facts), `facts: ${facts}`);
      await until('the MCP tool server', async () => /calc \(stdio\): .*\badd\b/.test(await page.textContent(byId('mcp-panel'))));
      await card(args.local).locator(byId('model-unload')).click();
      await until('unloaded', async () => (await state()) === 'unloaded');
      await card(args.local).locator(byId('model-load')).click();
      await until('ready again', async () => (await state()) === 'ready');
    });

    await check('a pull shows its progress to 100%, and delete removes it', async () => {
      await page.fill(byId('pull-source'), args['pull-url']);
      await page.evaluate(() => {
        window.__pull = [];
        const p = document.querySelector('[data-testid="pull-progress"]');
        const t = setInterval(() => {
          window.__pull.push(p.value);
          if (p.value >= 100) clearInterval(t);
        }, 10);
      });
      await page.click(byId('pull'));
      await until('100%', async () => (await page.evaluate(() => document.querySelector('[data-testid="pull-progress"]').value)) === 100);
      await until('success', async () => /success/.test(await page.textContent(byId('pull-status'))));
      const seen = await page.evaluate(() => [...new Set(window.__pull)]);
      assert(seen.some((v) => v > 0 && v < 100), `no progress between 0 and 100: ${seen}`);
      console.log(`  progress seen: ${seen.slice(0, 12).join(', ')}${seen.length > 12 ? ', …' : ''}`);
      const item = page.locator(`${byId('store-list')} li`, { hasText: 'pulled-tiny' });
      await until('the pulled model in the store list', async () => (await item.count()) === 1);
      await item.locator(byId('store-delete')).click();
      await until('deleted', async () => /deleted/.test(await page.textContent(byId('models-note'))));
      await until('gone from the list', async () => (await item.count()) === 0);
      // Deleting it again by name: the gateway's 404, in its words.
      await page.fill(byId('delete-name'), 'pulled-tiny');
      await page.click(byId('delete-by-name'));
      await until('the refusal', async () => /^pulled-tiny: .*\(HTTP 404\)/.test(await page.textContent(byId('models-note'))));
    });

    await check('the catalog lists its models, and Pull on one pulls it by name', async () => {
      const name = args['catalog-name'];
      const entry = page.locator(`${byId('catalog-list')} li`, { hasText: name });
      await until('the catalog entry', async () => (await entry.count()) === 1);
      assert(/a model the test pulls by name/.test(await entry.textContent()), `entry: ${await entry.textContent()}`);
      await entry.locator(byId('catalog-pull')).click();
      await until('success', async () => /success/.test(await page.textContent(byId('pull-status'))));
      assert((await page.inputValue(byId('pull-source'))) === name, 'the pull was not of the catalog name');
      const item = page.locator(`${byId('store-list')} li`, { hasText: name });
      await until('the pulled model in the store list', async () => (await item.count()) === 1);
      await item.locator(byId('store-delete')).click();
      await until('gone from the list', async () => (await item.count()) === 0);
    });

    await check('the charts have points after a few requests', async () => {
      for (let i = 0; i < CHART_REQUESTS; i++) {
        const r = await fetch(`${base}/v1/chat/completions`, {
          method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ model: args.local, messages: [{ role: 'user', content: `chart ${i}` }], max_tokens: 16 }),
        });
        assert(r.ok, `chat ${r.status}`);
        await sleep(700);
      }
      await view(page, 'charts');
      await until('tokens/s points', async () => Number(await page.getAttribute(byId('chart-tokens'), 'data-points')) > 2);
      for (const k of ['ttft', 'requests', 'kv'])
        assert(Number(await page.getAttribute(byId(`chart-${k}`), 'data-points')) > 0, `chart ${k} has no points`);
      assert(await page.isVisible(`${byId('chart-tokens')} canvas`), 'no canvas');
      assert(/tok\/s/.test(await page.textContent(byId('last-speed'))), 'the last answer\'s speed');
    });

    await check('keyboard only: the views open from the header, the pull field is reachable', async () => {
      await view(page, 'chat');
      await page.evaluate(() => document.activeElement && document.activeElement.blur());
      let tabs = 0;
      while (!(await page.evaluate(() => document.activeElement.dataset.testid === 'nav-models'))) {
        assert(++tabs <= 10, 'nav-models not reached in 10 Tabs');
        await page.keyboard.press('Tab');
      }
      await page.keyboard.press('Enter');
      await until('the models view', () => page.isVisible(byId('models-view')));
      for (tabs = 0; !(await page.evaluate(() => document.activeElement.dataset.testid === 'pull-source'));) {
        assert(++tabs <= 40, 'the pull field not reached in 40 Tabs');
        await page.keyboard.press('Tab');
      }
      await page.keyboard.press('Shift+Tab');
      await view(page, 'chat');
      // The conversation list is one Tab stop; the arrow keys move in it.
      await page.locator(byId('conversation')).first().focus();
      await page.keyboard.press('ArrowDown');
      const focused = await page.evaluate(() => document.activeElement.dataset.testid);
      assert(focused === 'conversation', `focus on ${focused}`);
      await page.keyboard.press('Enter');
      await until('a conversation opened', async () => (await page.locator(byId('message-user')).count()) > 0);
    });

    await check('dark mode follows prefers-color-scheme', async () => {
      const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      await page.emulateMedia({ colorScheme: 'dark' });
      const dark = await bg();
      await page.emulateMedia({ colorScheme: 'light' });
      const light = await bg();
      const lum = (c) => c.match(/\d+/g).slice(0, 3).reduce((a, b) => a + Number(b), 0) / 3;
      assert(lum(dark) < 60 && lum(light) > 200, `dark ${dark}, light ${light}`);
    });

    for (const scheme of ['light', 'dark']) {
      await check(`axe-core: no serious or critical violation on any view (${scheme})`, async () => {
        await page.emulateMedia({ colorScheme: scheme });
        const found = [];
        for (const v of VIEWS) {
          await view(page, v);
          await sleep(300);
          for (const x of await axeViolations(page)) found.push(`${v}: ${x.id} (${x.impact}) ${x.help} at ${x.nodes.join(', ')}`);
        }
        assert(found.length === 0, found.join('\n'));
      });
    }
    await page.emulateMedia({ colorScheme: 'light' });

    for (const [w, h] of SIZES) {
      await check(`at ${w}×${h}: no overlapping or cut-off boxes on any view (screenshots kept)`, async () => {
        await page.setViewportSize({ width: w, height: h });
        const found = [];
        for (const v of VIEWS) {
          await view(page, v);
          await sleep(300);
          await shot(page, `${v}-${w}x${h}`);
          if (w === SIZES[1][0]) await page.screenshot({ path: path.join(args.artifacts, `web-app-${v}-full.png`), fullPage: true });
          for (const p of await layoutProblems(page)) found.push(`${v}: ${p}`);
        }
        assert(found.length === 0, found.join('\n'));
      });
    }

    await check('every request went to the gateway; no console errors', async () => {
      const elsewhere = requests.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('blob:') && !u.startsWith('data:'));
      assert(elsewhere.length === 0, `requests elsewhere: ${elsewhere.join(', ')}`);
      console.log(`  ${requests.length} requests, all to ${origin}`);
      // The one error status the checks asked for: deleting a model the store no longer has.
      const unexpected = errors.filter((e, i) => !(/status of 404/.test(e) && errors.findIndex((x) => /status of 404/.test(x)) === i));
      assert(unexpected.length === 0, unexpected.join('\n'));
    });
    await context.close();
  } finally {
    await browser.close();
  }
  if (args['voice-wav']) await voiceChecks(args);
}

/*
 * Voice in a browser of its own, whose microphone is Chromium's fake capture of a WAV file: Hold to
 * talk records it, the page's WAV goes to /v1/audio/transcriptions on the audio target, and the
 * transcript reaches the conversation. No target here speaks, so Read aloud stays hidden.
 */
async function voiceChecks(args) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${args['voice-wav']}`,
      '--autoplay-policy=no-user-gesture-required'],
    timeout: LAUNCH_TIMEOUT_MS,
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    context.setDefaultTimeout(STEP_TIMEOUT_MS);
    await context.grantPermissions(['microphone'], { origin: new URL(args.base).origin });
    // What the page uploads, seen before it leaves (a FormData body is not visible to the request
    // events): the file's WAV header and the model named.
    await context.addInitScript(() => {
      const fetch0 = window.fetch;
      window.fetch = async (url, opts) => {
        if (String(url).endsWith('/v1/audio/transcriptions') && opts && opts.body instanceof FormData) {
          const f = opts.body.get('file');
          const head = [...new Uint8Array(await f.slice(0, 44).arrayBuffer())];
          window.__upload = { model: opts.body.get('model'), head, size: f.size };
          window.__uploads = (window.__uploads || 0) + 1;
        }
        return fetch0(url, opts);
      };
    });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await check('voice: each control shows only when a target offers it', async () => {
      await page.goto(`${args.base}/`, { waitUntil: 'load' });
      await until('Hold to talk', () => page.isVisible(byId('talk')));
      if (args.speaker) await until('Read aloud', () => page.isVisible(byId('read-aloud')));
      else assert(await page.isHidden(byId('read-aloud')), 'Read aloud shows, but no target speaks');
      assert(await page.isVisible(byId('hands-free')), 'no hands-free switch beside Hold to talk');
    });
    await check('voice: Hold to talk sends a WAV of the microphone and the transcript becomes the message', async () => {
      await page.selectOption(byId('target-select'), args.local);
      const answered = page.waitForResponse((r) => r.url().endsWith('/v1/audio/transcriptions'));
      const box = await page.locator(byId('talk')).boundingBox();
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await page.mouse.down();
      await until('recording', async () => (await page.getAttribute(byId('talk'), 'aria-pressed')) === 'true');
      await sleep(1500);
      await page.mouse.up();
      const up = await until('the upload', () => page.evaluate(() => window.__upload));
      const head = Buffer.from(up.head);
      assert(head.toString('latin1', 0, 4) === 'RIFF' && head.toString('latin1', 8, 12) === 'WAVE', 'the upload is not a WAV');
      const rate = head.readUInt32LE(24);
      const seconds = head.readUInt32LE(40) / 2 / rate;
      assert(rate === 16000 && head.readUInt16LE(22) === 1 && seconds > 0.5 && seconds < 5, `WAV: ${rate} Hz, ${seconds} s`);
      // A whisper target is the transcriber when there is one; else the model that takes audio.
      const hears = args.whisper || args.ears;
      assert(up.model === hears, `the upload names ${up.model}, not ${hears}`);
      const res = await answered;
      assert(res.status() === 200, `transcription answered ${res.status()}: ${await res.text()}`);
      const text = ((await res.json()).text || '').trim();
      console.log(`  ${seconds.toFixed(2)} s of 16 kHz WAV; transcript "${text}"`);
      if (text) {
        await until('the transcript as the message', async () =>
          (await page.locator(`${byId('message-user')} .text`).last().textContent().catch(() => '')) === text);
        await until('its answer', () => idle(page));
      } else {
        await until('the empty transcript said', async () => /empty/.test(await page.textContent(byId('voice-state'))));
      }
      assert(errors.length === 0, errors.join('\n'));
    });
    if (args.speaker) {
      await check('voice: Read aloud speaks each finished answer with the speaking target', async () => {
        await page.fill('#max-tokens', '12');
        await page.check(byId('read-aloud'));
        const spoken = page.waitForResponse((r) => r.url().endsWith('/v1/audio/speech'));
        await send(page, 'Say something short.');
        const res = await spoken;
        const body = res.request().postDataJSON();
        assert(res.status() === 200 && /audio\/wav/.test(res.headers()['content-type'] || ''), `speech answered ${res.status()}`);
        assert(body.model === args.speaker && body.input.length > 0 && body.response_format === 'wav', `body: ${JSON.stringify(body)}`);
        assert(await lastAnswer(page).locator(byId('speak')).isVisible(), 'no Read aloud button on the answer');
        await page.uncheck(byId('read-aloud'));
        console.log(`  spoke ${body.input.length} characters with ${args.speaker}`);
      });
    }
    await check('voice: hands-free listens, sends a turn after quiet, and listens again after the answer', async () => {
      const uploads = () => page.evaluate(() => window.__uploads || 0);
      const before = await uploads();
      const sent = await page.locator(byId('message-user')).count();
      await page.check(byId('hands-free'));
      await until('two hands-free turns', async () => (await uploads()) >= before + 2, HANDS_FREE_TIMEOUT_MS, 200);
      await page.uncheck(byId('hands-free'));
      await until('idle', () => idle(page));
      const now = await page.locator(byId('message-user')).count();
      console.log(`  ${(await uploads()) - before} turns uploaded, ${now - sent} sent as messages`);
      assert(errors.length === 0, errors.join('\n'));
    });
    await context.close();
  } finally {
    await browser.close();
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const timer = setTimeout(() => {
    console.log(`not ok - the run took over ${RUN_TIMEOUT_MS} ms`);
    results.failed++;
    process.exit(finish());
  }, RUN_TIMEOUT_MS);
  try {
    await run(args);
  } catch (err) {
    results.failed++;
    console.log(`not ok - the browser run: ${(err && err.stack) || err}`);
  }
  clearTimeout(timer);
  process.exit(finish());
}

main();
