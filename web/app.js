/*
 * app.js: the behaviour of sipp's web page. Plain JavaScript, no framework, no build step.
 *
 * It talks to the gateway that served it, with the same routes any client uses:
 *   GET  /v1/models            the targets to choose from
 *   GET  /v1/backends          the backend and devices each target runs on (shown in the status strip)
 *   GET  /ready                readiness, polled while the tab is visible
 *   POST /v1/models/ID/load    the Load / Unload button beside the model (needs an admin token when
 *   POST /v1/models/ID/unload  the gateway has tokens; the gateway's 403 says so)
 *   POST /v1/chat/completions  "stream": true; the answer arrives as server-sent events
 *
 * Images. A target whose /v1/models entry lists "vision" under capabilities (a projector is
 * configured) gets an "Add image" button; files dropped on the message box or pasted into it are
 * taken too. Each is sent as an image_url part holding a data: URL beside the text, stays in the
 * conversation's history, and is shown in the user's message from a blob: URL of the file itself.
 *
 * Run in this browser. A target whose /v1/models entry has browser_file ({url, sha256, bytes}: the
 * gateway serves its GGUF, [web] serve_model_files) gets a toggle. Turned on, the page imports the
 * browser package from /browser/ (bindings/web, served by the gateway with the runtime make web
 * built), fetches the model from browser_file.url with the bearer token into the browser's model
 * cache (OPFS, keyed and checked by the sha256: a second visit downloads nothing), and answers with
 * the same UI from the WebAssembly runtime in a Web Worker: the same messages, temperature, max
 * tokens and Stop (an AbortSignal). The gateway sends the page and the runtime cross-origin
 * isolated, so the pthread build runs; the status strip says `browser (wasm, N threads)`.
 *
 * Streaming. The answer is read with fetch and the body's ReadableStream (EventSource cannot POST
 * or send a header). Each "data:" line is one OpenAI chunk; "[DONE]" ends the stream. Stopping is
 * AbortController.abort(): the browser closes the connection, the gateway sees the client gone and
 * cancels the engine request, which frees its slot within one engine step.
 *
 * Measurements are the page's own, as a user sees them: TTFT is from sending the request to the
 * first piece of text; the speed is the tokens after the first over the time after the first, with
 * the token count from the usage chunk (stream_options.include_usage). A stopped answer gets no
 * usage chunk, so its speed is given in text chunks per second instead.
 *
 * Safety. Model text (and every other string from the server) reaches the page through textContent
 * or Text nodes only, never as markup; the gateway's Content-Security-Policy backs that up.
 * The bearer token lives in sessionStorage: it is gone when the tab closes, and never written to
 * localStorage, a cookie or the URL.
 */
'use strict';

const TOKEN_KEY = 'sipp.token';
const READY_POLL_MS = 5000;
const SCROLL_STICK_PX = 48; // follow new text while the log is scrolled this close to its end
const BROWSER_PACKAGE = '/browser/index.js';
const BROWSER_RUNTIME = '/browser/runtime/';
const BROWSER_CTX = 4096; // the browser's context when the target sets no ctx_size (wasm memory is 4 GiB)
const PERCENT = 100;
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/bmp'];
const IMAGE_MAX_BYTES = 20 * 1024 * 1024; // the gateway's default [limits] image_max_bytes

const $ = (id) => document.getElementById(id);
const ui = {
  target: $('target'),
  targetInfo: $('target-info'),
  residency: $('residency'),
  browserField: $('browser-field'),
  inBrowser: $('in-browser'),
  temperature: $('temperature'),
  maxTokens: $('max-tokens'),
  system: $('system'),
  advanced: $('advanced'),
  ignoreEos: $('ignore-eos'),
  token: $('token'),
  log: $('log'),
  empty: $('empty'),
  composer: $('composer'),
  prompt: $('prompt'),
  send: $('send'),
  stop: $('stop'),
  clear: $('clear'),
  attach: $('attach'),
  imageFile: $('image-file'),
  attachments: $('attachments'),
  announce: $('announce'),
  statReady: $('stat-ready'),
  statBackend: $('stat-backend'),
  statDevice: $('stat-device'),
  statTtft: $('stat-ttft'),
  statSpeed: $('stat-speed'),
};

const state = {
  history: [],          // the conversation sent with each request: {role, content}, no system prompt
  targets: new Map(),   // name -> its entry in /v1/backends
  models: new Map(),    // name -> its entry in /v1/models (browser_file: the gateway serves its file)
  inBrowser: new Set(), // targets toggled to run in this browser
  browser: { client: null, endpoints: new Map(), progress: new Map() }, // name -> Promise of endpoint; status text
  readySnapshot: '',    // the last /ready targets, to notice a target that finished loading
  notice: '',           // why there are no models to pick (a token is needed, ...), shown under the select
  controller: null,     // the AbortController of the answer being generated, or null
  conversation: 0,      // counts Clears, so that an answer ending after one stays out of the new history
  readyTimer: 0,
  pending: [],          // images to send with the next message: {name, blobUrl, dataUrl}
};

/* ---- talking to the gateway ----------------------------------------------------------------- */

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/* The human message of a failed reply: the gateway's {"error": {"message"}} when there is one. */
async function errorMessage(res) {
  let text = '';
  try {
    text = await res.text();
    const j = JSON.parse(text);
    if (j && j.error && j.error.message) return `${j.error.message} (HTTP ${res.status})`;
  } catch (_) {
    /* not JSON: fall through to the text */
  }
  return `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`;
}

async function getJson(path) {
  const res = await fetch(path, { headers: authHeaders(), cache: 'no-store' });
  if (!res.ok) {
    const err = new Error(await errorMessage(res));
    err.status = res.status;
    throw err;
  }
  return res.json();
}

/*
 * Reads a server-sent event stream and calls onData(data) per event (multi-line data joined by
 * "\n"), until the stream ends or onData returns false. Only "data:" matters here: OpenAI streams
 * name no events, and comment lines (":") are keep-alives.
 */
async function readEvents(body, onData) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let data = [];
  let more = true;
  let ended = false;
  try {
    while (more) {
      const { value, done } = await reader.read();
      if ((ended = done)) break;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while (more && (nl = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length) more = onData(data.join('\n')) !== false;
          data = [];
        } else if (line.startsWith('data:')) {
          data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
        }
      }
    }
  } finally {
    // Stopped reading early ([DONE], a bad chunk): close the connection rather than leave it open.
    if (!ended) reader.cancel().catch(() => {});
  }
}

/* ---- status strip ------------------------------------------------------------------------------ */

function setReady(label, kind) {
  ui.statReady.textContent = label;
  ui.statReady.dataset.state = kind;
}

async function refreshReady() {
  try {
    const res = await fetch('/ready', { cache: 'no-store' });
    const j = await res.json();
    const targets = Array.isArray(j.targets) ? j.targets : [];
    const failed = targets.filter((t) => t.state === 'failed');
    const loading = targets.filter((t) => t.state === 'loading');
    if (res.ok) setReady('ready', 'ready');
    else if (failed.length) setReady(`failed: ${failed.map((t) => t.name).join(', ')}`, 'down');
    else if (loading.length) setReady(`loading ${loading.length} of ${targets.length}`, 'loading');
    else setReady(j.status === 'not_ready' ? 'stopping' : 'not ready', 'down');
    // A target that changed state (loaded, failed) has news in /v1/backends.
    const snapshot = targets.map((t) => `${t.name}=${t.state}`).join(',');
    if (snapshot !== state.readySnapshot) {
      state.readySnapshot = snapshot;
      loadBackends();
    }
  } catch (_) {
    setReady('unreachable', 'down');
  }
}

function pollReady() {
  clearTimeout(state.readyTimer);
  if (!document.hidden) refreshReady();
  state.readyTimer = setTimeout(pollReady, READY_POLL_MS);
}

async function loadBackends() {
  try {
    const j = await getJson('/v1/backends');
    state.targets = new Map((j.targets || []).map((t) => [t.name, t]));
  } catch (_) {
    state.targets = new Map(); // loadModels says why (a 401 here comes with a 401 there)
  }
  showTarget();
}

/* The strip's backend and device, and the hint under the select, for the selected target. */
function showTarget() {
  const t = state.targets.get(ui.target.value);
  let backend = '–';
  let device = '–';
  let info = t ? '' : state.notice;
  ui.residency.hidden = !(t && t.type === 'local');
  if (t && t.type === 'local') {
    ui.residency.textContent = t.state === 'ready' ? 'Unload' : 'Load';
    ui.residency.disabled = t.state === 'loading';
    if (t.state === 'ready') {
      backend = t.backend || '?';
      device = t.devices || 'none';
      info = t.reason || '';
    } else if (t.state === 'failed') {
      backend = 'failed';
      info = t.error || '';
    } else if (t.state === 'unloaded') {
      backend = 'not loaded';
      info = 'loads on its first message, or with Load';
    } else {
      backend = 'loading…';
    }
  } else if (t) {
    const replicas = Array.isArray(t.replicas) ? t.replicas : [];
    backend = 'remote';
    device = `${replicas.filter((r) => r.healthy).length} of ${replicas.length} replicas healthy`;
    info = replicas.map((r) => r.url).join(', ');
  }
  const file = t && state.models.get(ui.target.value);
  ui.attach.hidden = !takesImages(ui.target.value);
  if (ui.attach.hidden) clearPending();
  ui.browserField.hidden = !(file && file.browser_file);
  ui.inBrowser.checked = !ui.browserField.hidden && state.inBrowser.has(ui.target.value);
  if (ui.inBrowser.checked) ({ backend, device, info } = browserStatus(ui.target.value));
  ui.statBackend.textContent = backend;
  ui.statDevice.textContent = device;
  ui.targetInfo.textContent = info;
}

function showAnswerStats(m) {
  if (m.ttftMs === null) {
    ui.statTtft.textContent = '–';
    ui.statSpeed.textContent = '–';
    return;
  }
  ui.statTtft.textContent = `${Math.round(m.ttftMs)} ms`;
  // Without a usage chunk (a stopped answer) only the stream's chunks can be counted; a chunk holds
  // one or more tokens, so the rate is shown per chunk rather than passed off as tokens.
  const counted = m.tokens !== null;
  const n = counted ? m.tokens : m.chunks;
  const seconds = (m.tLast - m.tFirst) / 1000;
  const rate = n >= 2 && seconds > 0 ? ((n - 1) / seconds).toFixed(1) : '–';
  ui.statSpeed.textContent = counted ? `${rate} tok/s · ${n} tokens` : `${rate} chunks/s · ${n} chunks`;
}

/* ---- models and the token ------------------------------------------------------------------- */

function fillTargets(names, placeholder) {
  const keep = ui.target.value;
  ui.target.replaceChildren();
  if (!names.length) {
    const o = new Option(placeholder, '');
    o.disabled = true;
    ui.target.add(o);
    return;
  }
  for (const name of names) ui.target.add(new Option(name, name));
  if (names.includes(keep)) ui.target.value = keep;
}

async function loadModels() {
  try {
    const j = await getJson('/v1/models');
    state.models = new Map((j.data || []).map((m) => [m.id, m]));
    const names = (j.data || []).map((m) => m.id);
    fillTargets(names, 'no models on this gateway');
    state.notice = '';
  } catch (err) {
    const needToken = err.status === 401;
    fillTargets([], needToken ? 'token needed' : 'cannot list models');
    state.notice = needToken ? `${err.message}. Enter a bearer token under “Advanced and access”.` : err.message;
    if (needToken) ui.advanced.open = true;
  }
  await loadBackends();
}

/* Load or Unload the selected model; the answer (or the gateway's reason) shows under the select. */
async function toggleResidency() {
  const name = ui.target.value;
  const t = state.targets.get(name);
  if (!t) return;
  const action = t.state === 'ready' ? 'unload' : 'load';
  ui.residency.disabled = true;
  if (action === 'load') ui.statBackend.textContent = 'loading…';
  let message = '';
  try {
    const res = await fetch(`/v1/models/${encodeURIComponent(name)}/${action}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...authHeaders() },
      body: '{}',
    });
    if (!res.ok) message = await errorMessage(res);
  } catch (err) {
    message = err.message;
  }
  await loadBackends();
  if (message) ui.targetInfo.textContent = message;
}

function saveToken() {
  const token = ui.token.value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  loadModels();
}

/* ---- run in this browser ------------------------------------------------------------------- */

/* The strip and hint for a target toggled to run here: loading, failed, or the runtime it runs on. */
function browserStatus(name) {
  const b = state.browser.progress.get(name) || { state: 'loading', text: 'starting the browser runtime…' };
  if (b.state === 'ready') {
    const rt = b.endpoint.runtime;
    return { backend: `browser (wasm, ${rt.threads} thread${rt.threads === 1 ? '' : 's'})`,
      device: `this browser · ${rt.build}`, info: `${b.text} ${rt.build === 'pthreads' ? 'Threads' : 'One thread'}: ${rt.reason}.` };
  }
  return { backend: b.state === 'failed' ? 'browser failed' : 'browser loading…', device: 'this browser', info: b.text };
}

function setBrowserProgress(name, progress) {
  state.browser.progress.set(name, progress);
  if (ui.target.value === name) showTarget();
}

async function browserClient() {
  if (!state.browser.client) {
    const { SippClient } = await import(BROWSER_PACKAGE);
    state.browser.client = new SippClient({ runtimeUrl: BROWSER_RUNTIME });
  }
  return state.browser.client;
}

/* The target's model in this browser: downloaded (or taken from the model cache) and loaded once. */
function browserEndpoint(name) {
  let p = state.browser.endpoints.get(name);
  if (!p) {
    p = openBrowserEndpoint(name);
    state.browser.endpoints.set(name, p);
    p.catch(() => state.browser.endpoints.delete(name)); // a later try starts over
  }
  return p;
}

async function openBrowserEndpoint(name) {
  const file = state.models.get(name).browser_file;
  try {
    const client = await browserClient();
    const onProgress = ({ loaded, total }) => setBrowserProgress(name, { state: 'loading',
      text: `downloading the model: ${total ? `${Math.floor((PERCENT * loaded) / total)}%` : `${loaded} bytes`}` });
    setBrowserProgress(name, { state: 'loading', text: 'loading the model in this browser…' });
    const ep = await client.add(name, {
      kind: 'local', source: file.url, sha256: file.sha256, token: sessionStorage.getItem(TOKEN_KEY) || undefined,
      onProgress, options: { backend: 'cpu', ctxSize: file.ctx_size || BROWSER_CTX },
    });
    const from = ep.source.fromCache ? 'came from the browser\'s model cache' : `was downloaded (${file.bytes} bytes)`;
    setBrowserProgress(name, { state: 'ready', endpoint: ep, text: `Runs in this browser; the model ${from}.` });
    return ep;
  } catch (err) {
    setBrowserProgress(name, { state: 'failed', text: `Cannot run in this browser: ${err.message || err}` });
    throw err;
  }
}

function toggleBrowser() {
  const name = ui.target.value;
  if (ui.inBrowser.checked) {
    state.inBrowser.add(name);
    browserEndpoint(name).catch(() => {}); // the hint shows why
  } else {
    state.inBrowser.delete(name);
  }
  showTarget();
}

/* ---- the conversation ----------------------------------------------------------------------- */

function announce(text) {
  ui.announce.textContent = text;
}

function nearBottom() {
  const l = ui.log;
  return l.scrollHeight - l.scrollTop - l.clientHeight < SCROLL_STICK_PX;
}

/*
 * Adds streamed text and keeps the log scrolled to its end, unless the reader has scrolled up.
 * Reading the scroll position after a change forces a layout, which for a long answer costs more
 * than the text itself; so the position is read once per frame, at the frame's first piece (when
 * layout is still clean), and the log scrolls once per frame, just before it is painted.
 */
const follow = { frame: 0, stick: false };
function appendFollowing(node, piece) {
  if (!follow.frame) {
    follow.stick = nearBottom();
    follow.frame = requestAnimationFrame(() => {
      follow.frame = 0;
      if (follow.stick) ui.log.scrollTop = ui.log.scrollHeight;
    });
  }
  node.appendData(piece);
}

/*
 * A message in the log. Its text is one Text node that grows with appendData, so a streamed answer
 * costs no re-parsing and can never become markup.
 */
function addMessage(role, text, who, images = []) {
  ui.empty.hidden = true;
  const el = document.createElement('article');
  el.className = `msg ${role}`;
  el.dataset.testid = `message-${role}`;
  const label = document.createElement('span');
  label.className = 'who';
  label.textContent = who;
  const body = document.createElement('span');
  body.className = 'text';
  const node = document.createTextNode(text);
  body.append(node);
  const note = document.createElement('span');
  note.className = 'note';
  note.hidden = true;
  el.append(label, body, note);
  if (images.length) {
    const row = document.createElement('span');
    row.className = 'images';
    for (const im of images) {
      const img = document.createElement('img');
      img.src = im.blobUrl;
      img.alt = im.name;
      row.append(img);
    }
    el.insertBefore(row, note);
  }
  ui.log.append(el);
  ui.log.scrollTop = ui.log.scrollHeight;
  return {
    el,
    append: (piece) => appendFollowing(node, piece),
    text: () => node.data,
    note(textNote, isError) {
      note.textContent = textNote;
      note.hidden = !textNote;
      el.classList.toggle('error', Boolean(isError));
    },
  };
}

function setBusy(busy) {
  const focused = document.activeElement;
  ui.send.disabled = busy;
  ui.stop.disabled = !busy;
  // A button that turns disabled drops the keyboard focus to <body>: keep it in the message box.
  if ((focused === ui.send && busy) || (focused === ui.stop && !busy)) ui.prompt.focus();
}

/* Reads the number inputs; null with the field focused and a message when one is invalid. */
function readSettings() {
  const temperature = ui.temperature.valueAsNumber;
  if (!(temperature >= 0 && temperature <= 2)) {
    ui.temperature.focus();
    return { error: 'Temperature must be a number from 0 to 2.' };
  }
  let maxTokens = null; // empty: until the context is full
  if (ui.maxTokens.value.trim() !== '') {
    maxTokens = ui.maxTokens.valueAsNumber;
    if (!(Number.isInteger(maxTokens) && maxTokens >= 1)) {
      ui.maxTokens.focus();
      return { error: 'Max tokens must be a whole number of at least 1 (or empty for no limit).' };
    }
  }
  return { temperature, maxTokens };
}

async function send(text) {
  const target = ui.target.value;
  if (!target) {
    announce('Pick a model first.');
    ui.target.focus();
    return;
  }
  const settings = readSettings();
  if (settings.error) {
    announce(settings.error);
    return;
  }
  const messages = [];
  const system = ui.system.value.trim();
  if (system) messages.push({ role: 'system', content: system });
  const images = state.pending;
  const content = images.length
    ? [{ type: 'text', text }, ...images.map((im) => ({ type: 'image_url', image_url: { url: im.dataUrl } }))]
    : text;
  messages.push(...state.history, { role: 'user', content });
  const inBrowser = state.inBrowser.has(target) && !ui.browserField.hidden;
  if (inBrowser && images.length) {
    announce('The browser runtime takes no images; turn “Run in this browser” off to send them.');
    return;
  }
  const conversation = state.conversation;
  addMessage('user', text, 'You', images);
  state.pending = [];
  showPending();
  state.history.push({ role: 'user', content });
  const reply = addMessage('assistant', '', target);
  reply.el.classList.add('streaming');
  reply.el.setAttribute('aria-busy', 'true');

  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  announce(`${target} is answering.`);

  const m = { t0: performance.now(), tFirst: 0, tLast: 0, ttftMs: null, tokens: null, chunks: 0 };
  const onPiece = (piece) => {
    const now = performance.now();
    if (m.ttftMs === null) {
      m.tFirst = now;
      m.ttftMs = now - m.t0;
    }
    m.tLast = now;
    m.chunks++;
    reply.append(piece);
  };
  let finish = '';
  let outcome = 'done';
  let error = '';
  try {
    const run = inBrowser ? answerInBrowser : answerFromGateway;
    const end = await run(target, messages, settings, controller.signal, onPiece);
    finish = end.finish;
    m.tokens = end.tokens;
  } catch (err) {
    if (err.name === 'AbortError') outcome = 'stopped';
    else {
      outcome = 'error';
      error = err.message || String(err);
    }
  } finally {
    if (state.controller === controller) state.controller = null;
    reply.el.classList.remove('streaming');
    reply.el.removeAttribute('aria-busy');
    setBusy(false);
  }

  const answer = reply.text();
  if (outcome === 'error') {
    reply.note(`Error: ${error}`, true);
    announce(`Error: ${error}`);
  } else if (outcome === 'stopped') {
    reply.note('Stopped.');
    announce('Stopped.');
  } else {
    const n = m.tokens !== null ? `${m.tokens} tokens` : '';
    reply.note([finish === 'length' ? 'Reached max tokens' : '', n].filter(Boolean).join(' · '));
    announce('Answer finished.');
  }
  // A stopped or broken answer stays in the conversation for what it says so far.
  if (answer && conversation === state.conversation) state.history.push({ role: 'assistant', content: answer });
  if (outcome !== 'error' || m.ttftMs !== null) showAnswerStats(m);
}

function stop() {
  if (state.controller) state.controller.abort();
}

/* An answer streamed by the gateway: {finish, tokens} (tokens null without a usage chunk). */
async function answerFromGateway(target, messages, settings, signal, onPiece) {
  const body = {
    model: target,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: settings.temperature,
  };
  if (settings.maxTokens !== null) body.max_tokens = settings.maxTokens;
  if (ui.ignoreEos.checked) body.ignore_eos = true; // llama.cpp's extension, which the gateway takes
  const res = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...authHeaders() },
    body: JSON.stringify(body),
    signal,
  });
  if (!res.ok) throw new Error(await errorMessage(res));
  const end = { finish: '', tokens: null };
  let sawDone = false;
  await readEvents(res.body, (data) => {
    if (data === '[DONE]') {
      sawDone = true;
      return false;
    }
    const chunk = JSON.parse(data);
    if (chunk.error) throw new Error(chunk.error.message || 'the gateway reported an error');
    if (chunk.usage) end.tokens = chunk.usage.completion_tokens;
    const choice = chunk.choices && chunk.choices[0];
    const piece = choice && choice.delta && choice.delta.content;
    if (piece) onPiece(piece);
    if (choice && choice.finish_reason) end.finish = choice.finish_reason;
    return true;
  });
  if (!sawDone) throw new Error('the stream ended before [DONE]');
  return end;
}

/* The same answer from the model running in this browser (bindings/web's client.chat). */
async function answerInBrowser(target, messages, settings, signal, onPiece) {
  const endpoint = await browserEndpoint(target);
  const opts = { endpoint, temperature: settings.temperature, signal };
  if (settings.maxTokens !== null) opts.maxTokens = settings.maxTokens;
  if (ui.ignoreEos.checked) opts.ignoreEos = true;
  const run = state.browser.client.chat(messages, opts);
  for await (const piece of run.tokens) onPiece(piece);
  const r = await run.response;
  if (r.finishReason === 'cancelled') {
    const stopped = new Error('stopped');
    stopped.name = 'AbortError';
    throw stopped;
  }
  return { finish: r.finishReason, tokens: r.usage.completionTokens };
}

/* ---- images ---------------------------------------------------------------------------------- */

function takesImages(name) {
  const m = state.models.get(name);
  return Boolean(m && Array.isArray(m.capabilities) && m.capabilities.includes('vision'));
}

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

/* Takes image files (from the button, a drop or a paste) for the next message. */
async function addImages(files) {
  if (ui.attach.hidden) {
    announce('This model takes no images: its target has no projector (mmproj).');
    return;
  }
  for (const file of files) {
    if (!IMAGE_TYPES.includes(file.type)) {
      announce(`${file.name} is not a PNG, JPEG, GIF or BMP image.`);
      continue;
    }
    if (file.size > IMAGE_MAX_BYTES) {
      announce(`${file.name} is larger than 20 MB.`);
      continue;
    }
    state.pending.push({ name: file.name || 'image', blobUrl: URL.createObjectURL(file), dataUrl: await readAsDataUrl(file) });
  }
  showPending();
}

function showPending() {
  ui.attachments.replaceChildren();
  state.pending.forEach((im, i) => {
    const li = document.createElement('li');
    const img = document.createElement('img');
    img.src = im.blobUrl;
    img.alt = im.name;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'secondary';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Remove ${im.name}`);
    remove.addEventListener('click', () => {
      state.pending.splice(i, 1);
      showPending();
    });
    li.append(img, remove);
    ui.attachments.append(li);
  });
  ui.attachments.hidden = state.pending.length === 0;
}

function clearPending() {
  state.pending = [];
  showPending();
}

function onDrop(event) {
  if (!event.dataTransfer || !event.dataTransfer.files.length) return;
  event.preventDefault();
  addImages([...event.dataTransfer.files]);
}

function onPaste(event) {
  const files = event.clipboardData ? [...event.clipboardData.files] : [];
  if (!files.length) return;
  event.preventDefault();
  addImages(files);
}

function clearConversation() {
  stop();
  state.conversation++;
  state.history = [];
  clearPending();
  for (const el of ui.log.querySelectorAll('.msg')) el.remove();
  ui.empty.hidden = false;
  announce('Conversation cleared.');
  ui.prompt.focus();
}

/* ---- wiring --------------------------------------------------------------------------------- */

function onSubmit(event) {
  event.preventDefault();
  if (state.controller) return; // one answer at a time; the text stays in the box
  const text = ui.prompt.value.trim();
  if (!text) return;
  ui.prompt.value = '';
  send(text);
}

function onPromptKey(event) {
  // Enter sends; Shift+Enter is a new line; an IME composition keeps its Enter.
  if (event.key !== 'Enter' || event.shiftKey || event.isComposing) return;
  event.preventDefault();
  ui.composer.requestSubmit();
}

function onKey(event) {
  if (event.key === 'Escape' && state.controller) {
    event.preventDefault();
    stop();
  }
}

function start() {
  ui.token.value = sessionStorage.getItem(TOKEN_KEY) || '';

  ui.composer.addEventListener('submit', onSubmit);
  ui.prompt.addEventListener('keydown', onPromptKey);
  document.addEventListener('keydown', onKey);
  ui.stop.addEventListener('click', stop);
  ui.clear.addEventListener('click', clearConversation);
  ui.target.addEventListener('change', showTarget);
  ui.residency.addEventListener('click', toggleResidency);
  ui.inBrowser.addEventListener('change', toggleBrowser);
  ui.token.addEventListener('change', saveToken);
  ui.attach.addEventListener('click', () => ui.imageFile.click());
  ui.imageFile.addEventListener('change', () => {
    addImages([...ui.imageFile.files]);
    ui.imageFile.value = '';
  });
  ui.composer.addEventListener('dragover', (event) => event.preventDefault());
  ui.composer.addEventListener('drop', onDrop);
  ui.prompt.addEventListener('paste', onPaste);
  document.querySelector('.skip').addEventListener('click', (event) => {
    event.preventDefault();
    ui.prompt.focus();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) pollReady();
  });

  loadModels();
  pollReady();
}

start();
