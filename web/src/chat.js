/*
 * chat.js: the chat view of sipp's web page (the last part of the /app.js bundle: it starts the
 * page), the status strip and the switching between views. Plain JavaScript, no framework.
 *
 * It talks to the gateway that served it, with the same routes any client uses:
 *   GET  /v1/models            the targets to choose from
 *   GET  /v1/backends          the backend and devices each target runs on (shown in the status strip)
 *   GET  /ready                readiness, polled while the tab is visible
 *   POST /v1/models/ID/load    the Load / Unload button beside the model (needs an admin token when
 *   POST /v1/models/ID/unload  the gateway has tokens; the gateway's 403 says so)
 *   POST /v1/chat/completions  "stream": true; the answer arrives as server-sent events
 *   GET  /v1/mcp/tools         the gateway's tool servers ([[mcp]]), for "Use tool servers"
 *   POST /v1/responses         with "Use tool servers" on: the servers as mcp tools, streamed
 *
 * Conversations. The one shown is state.conv (store.js's record, conversations.js's list); each
 * message sent and each answer ended is saved with it. Edit and Regenerate cut the conversation at
 * a message and answer again from there.
 *
 * Images and audio. A target whose /v1/models entry lists "vision" or "audio" under capabilities
 * (a projector is configured) gets an Add button; files dropped on the message box or pasted into
 * it are taken too. Each is sent as an image_url or input_audio part beside the text, stays in the
 * conversation, and is shown in the user's message from a blob: URL of its bytes.
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
 * or send a header). Each "data:" line is one OpenAI chunk (content, reasoning_content, tool_calls
 * deltas); "[DONE]" ends the stream. Stopping is AbortController.abort(): the browser closes the
 * connection, the gateway sees the client gone and cancels the engine request, which frees its
 * slot within one engine step.
 *
 * Tool servers (MCP). When the gateway lists a tool server that works (GET /v1/mcp/tools) and the
 * target is a local one on the gateway, "Use tool servers (MCP)" sends the conversation to
 * POST /v1/responses instead, with one {"type": "mcp", "require_approval": "never"} tool per server
 * and the Tool choice (auto, or required: the first turn must call a tool), one call a turn
 * (parallel_tool_calls false: the model sees a result before it calls again). The gateway calls the
 * servers between the model's turns; each mcp_call item (output_item.done) becomes a card in the
 * answer (msg.mcp_calls), the text and reasoning arrive as output_text / reasoning_text deltas, and
 * response.completed brings the usage. Those calls were run by the gateway, so a later request
 * (either route) carries the answer's text only.
 *
 * Measurements are the page's own, as a user sees them: TTFT is from sending the request to the
 * first piece of text; the speed is the tokens after the first over the time after the first, with
 * the token count from the usage chunk (stream_options.include_usage). A stopped answer gets no
 * usage chunk, so its speed is given in text chunks per second instead.
 *
 * Safety. An answer is rendered by render.js (sanitised Markdown); a user's text and every other
 * string from the server reach the page through textContent or Text nodes only; the gateway's
 * Content-Security-Policy backs both up. The bearer token lives in sessionStorage: it is gone when
 * the tab closes, and never written to localStorage, a cookie or the URL.
 */
'use strict';

const READY_POLL_MS = 5000;
const SCROLL_STICK_PX = 48; // follow new text while the log is scrolled this close to its end
const BROWSER_PACKAGE = '/browser/index.js';
const BROWSER_RUNTIME = '/browser/runtime/';
const BROWSER_CTX = 4096; // the browser's context when the target sets no ctx_size (wasm memory is 4 GiB)
const PERCENT = 100;
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/bmp'];
const AUDIO_TYPES = ['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/mpeg'];
const IMAGE_MAX_BYTES = 20 * 1024 * 1024; // the gateway's default [limits] image_max_bytes

const $ = (id) => document.getElementById(id);
const ui = {
  target: $('target'),
  targetInfo: $('target-info'),
  residency: $('residency'),
  browserField: $('browser-field'),
  inBrowser: $('in-browser'),
  mcpField: $('mcp-field'),
  useMcp: $('use-mcp'),
  toolChoice: $('tool-choice'),
  mcpHint: $('mcp-hint'),
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
  conv: null,           // the conversation shown (store.js's record), or null before its first message
  generation: 0,        // counts switches and Clears, so that an answer ending after one stays out
  wantModel: '',        // the model of the conversation opened before the model list arrived
  targets: new Map(),   // name -> its entry in /v1/backends
  models: new Map(),    // name -> its entry in /v1/models (browser_file: the gateway serves its file)
  inBrowser: new Set(), // targets toggled to run in this browser
  mcp: [],              // the gateway's tool servers that list their tools (GET /v1/mcp/tools)
  browser: { client: null, endpoints: new Map(), progress: new Map() }, // name -> Promise of endpoint; status text
  readySnapshot: '',    // the last /ready targets, to notice a target that finished loading
  notice: '',           // why there are no models to pick (a token is needed, ...), shown under the select
  controller: null,     // the AbortController of the answer being generated, or null
  readyTimer: 0,
  pending: [],          // files to send with the next message: {name, type, blobUrl, dataUrl}
};

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
  const name = ui.target.value;
  ui.attach.hidden = !(takesImages(name) || takesAudio(name));
  ui.attach.textContent = takesImages(name) ? (takesAudio(name) ? 'Add image or audio' : 'Add image') : 'Add audio';
  if (ui.attach.hidden) clearPending();
  if (typeof showVoice === 'function') showVoice();
  ui.browserField.hidden = !(file && file.browser_file);
  ui.inBrowser.checked = !ui.browserField.hidden && state.inBrowser.has(ui.target.value);
  if (ui.inBrowser.checked) ({ backend, device, info } = browserStatus(ui.target.value));
  showMcpField(t);
  ui.statBackend.textContent = backend;
  ui.statDevice.textContent = device;
  ui.targetInfo.textContent = info;
}

/*
 * Whether the gateway runs MCP tools for target t (its /v1/backends entry): for the models it runs
 * itself only, so not a remote target, one served by a process it supervises (it has replicas) or
 * a speech one (its /v1/models entry names a recipe: whisper, tts, flite).
 */
function runsMcp(t) {
  const m = t && state.models.get(t.name);
  return Boolean(t && t.type === 'local' && !t.replicas && !(m && m.sipp && m.sipp.recipe));
}

/* "Use tool servers" for a target the gateway runs MCP for, when a tool server works. */
function showMcpField(t) {
  ui.mcpField.hidden = !(state.mcp.length && runsMcp(t) && !ui.inBrowser.checked);
  const names = state.mcp.map((s) => `${s.name} (${(s.tools || []).map((x) => x.name).join(', ') || 'no tools'})`);
  ui.mcpHint.textContent = `Answers through /v1/responses; the gateway runs the tools of ${names.join(', ')}.`;
}

async function loadMcp() {
  state.mcp = (await mcpServers()).filter((s) => !s.error);
  showTarget();
}

/* Whether the next answer goes through the tool servers (/v1/responses). */
function usesMcp() {
  return !ui.mcpField.hidden && ui.useMcp.checked;
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
  showLastSpeed(`${ui.statSpeed.textContent}, TTFT ${ui.statTtft.textContent}`);
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
  if (names.includes(state.wantModel)) ui.target.value = state.wantModel;
  else if (names.includes(keep)) ui.target.value = keep;
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
  await loadMcp();
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
 * Keeps the log scrolled to its end while an answer grows, unless the reader has scrolled up.
 * Re-rendering Markdown costs more than appending text, and more the longer the answer: a growing
 * answer is drawn again only after RENDER_SHARE times as long as its last draw took (at most
 * RENDER_MAX_WAIT_MS), so drawing takes a bounded share of the page's time whatever the length; a
 * short answer is drawn on nearly every piece, and a piece that arrives between drawings shows at
 * once as plain text at the answer's end (addMessage's tail). The scroll position is read before the draw (when
 * layout is still clean) and the log scrolled after it. A timer, not requestAnimationFrame: a tab
 * that is not painted (hidden, headless) gets no frames, and the answer must still be kept.
 */
const RENDER_SHARE = 5;
const RENDER_MAX_WAIT_MS = 100;
const follow = { timer: 0, last: 0, cost: 0, jobs: new Set() };
function flushRenders() {
  follow.timer = 0;
  const t0 = performance.now();
  const stick = nearBottom();
  const jobs = [...follow.jobs];
  follow.jobs.clear();
  for (const j of jobs) j();
  if (stick) ui.log.scrollTop = ui.log.scrollHeight;
  follow.last = performance.now();
  follow.cost = follow.last - t0;
}
function renderSoon(job) {
  follow.jobs.add(job);
  if (follow.timer) return;
  const gap = Math.min(RENDER_MAX_WAIT_MS, RENDER_SHARE * follow.cost);
  const wait = follow.last + gap - performance.now();
  if (wait <= 0) flushRenders();
  else follow.timer = setTimeout(flushRenders, wait);
}

function button(text, testid, onClick, label) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'secondary small';
  b.textContent = text;
  b.dataset.testid = testid;
  if (label) b.setAttribute('aria-label', label);
  b.addEventListener('click', onClick);
  return b;
}

/* The files of a user message: images and audio, shown from blob: URLs of their bytes. */
function filesRow(files) {
  const row = document.createElement('span');
  row.className = 'images';
  for (const f of files) {
    const url = f.blobUrl || URL.createObjectURL(blobOf(f.dataUrl));
    if (f.type && f.type.startsWith('audio/')) {
      const a = document.createElement('audio');
      a.controls = true;
      a.src = url;
      a.setAttribute('aria-label', f.name);
      row.append(a);
    } else {
      const img = document.createElement('img');
      img.src = url;
      img.alt = f.name;
      row.append(img);
    }
  }
  return row;
}

/* The index of a message element in the current conversation. */
function indexOf(el) {
  return [...ui.log.querySelectorAll('.msg')].indexOf(el);
}

/*
 * A message in the log. A user's text is one Text node (it can never become markup); an assistant's
 * is rendered Markdown (render.js). Each has Copy, a user's Edit, an assistant's Regenerate.
 */
function addMessage(msg, who) {
  ui.empty.hidden = true;
  const role = msg.role === 'user' ? 'user' : msg.role === 'tool' ? 'tool' : 'assistant';
  const el = document.createElement('article');
  el.className = `msg ${role}`;
  el.dataset.testid = `message-${role}`;
  const label = document.createElement('span');
  label.className = 'who';
  label.textContent = who;
  const body = document.createElement('div');
  body.className = 'text';
  const note = document.createElement('span');
  note.className = 'note';
  note.hidden = true;
  const actions = document.createElement('span');
  actions.className = 'actions';
  el.append(label, body);
  if (msg.files && msg.files.length) el.append(filesRow(msg.files));
  el.append(note, actions);
  const draw = (streaming) => {
    if (role === 'user') body.replaceChildren(document.createTextNode(msg.content));
    else if (role === 'tool') body.replaceChildren(toolCard('result', `Tool result${msg.tool_call_id ? ` (${msg.tool_call_id})` : ''}`, prettyJson(msg.content || '')));
    else renderAnswer(body, msg, streaming);
    // The answer as the model wrote it (its Markdown source), for tests and tools that compare text.
    if (role === 'assistant' && !streaming) body.dataset.source = msg.content || '';
  };
  // While an answer streams, the text since its last drawing shows at once as plain text at the end
  // (a Text node that grows), and the Markdown drawing catches up at renderSoon's pace.
  let tail = null;
  const drawStreaming = () => {
    draw(true);
    tail = document.createTextNode('');
    (body.querySelector('.md') || body).append(tail);
  };
  draw(false);
  actions.append(copyButton(() => msg.content || '', 'Copy'));
  if (role === 'user') actions.append(button('Edit', 'edit', () => editMessage(el, msg), 'Edit this message and answer again from it'));
  if (role === 'assistant') {
    actions.append(button('Regenerate', 'regenerate', () => regenerate(indexOf(el)), 'Regenerate this answer'));
    if (typeof speakButton === 'function') actions.append(speakButton(msg));
  }
  ui.log.append(el);
  ui.log.scrollTop = ui.log.scrollHeight;
  return {
    el,
    msg,
    update: (piece) => {
      if (piece && tail) tail.appendData(piece);
      renderSoon(drawStreaming);
    },
    done: () => {
      follow.jobs.delete(drawStreaming);
      tail = null;
      draw(false);
    },
    note(textNote, isError) {
      note.textContent = textNote;
      note.hidden = !textNote;
      msg.note = textNote || undefined;
      msg.error = Boolean(isError) || undefined;
      el.classList.toggle('error', Boolean(isError));
    },
  };
}

/* Draws the current conversation's messages (or the empty hint). */
function showConversation() {
  for (const el of ui.log.querySelectorAll('.msg')) el.remove();
  const messages = state.conv ? state.conv.messages : [];
  ui.empty.hidden = messages.length > 0;
  for (const m of messages) {
    const v = addMessage(m, m.role === 'user' ? 'You' : m.role === 'tool' ? 'Tool' : m.model || 'Assistant');
    if (m.note) v.note(m.note, m.error);
  }
}

/* Edit in place: the text becomes a field; Save answers again from there, dropping what followed. */
function editMessage(el, msg) {
  if (state.controller) return;
  const body = el.querySelector('.text');
  const field = document.createElement('textarea');
  field.value = msg.content;
  field.rows = 3;
  field.setAttribute('aria-label', 'Edit the message');
  field.dataset.testid = 'edit-field';
  const save = button('Save and answer', 'edit-save', async () => {
    const text = field.value.trim();
    if (!text) return;
    const i = indexOf(el);
    state.conv.messages = state.conv.messages.slice(0, i);
    state.conv.messages.push({ ...msg, content: text });
    showConversation();
    await saveConversation();
    generate();
  });
  const cancel = button('Cancel', 'edit-cancel', () => showConversation());
  body.replaceChildren(field, save, cancel);
  field.focus();
}

/* Answers again from message i (an assistant's): what came from it on is dropped. */
async function regenerate(i) {
  if (state.controller || !state.conv || i < 0) return;
  state.conv.messages = state.conv.messages.slice(0, i);
  showConversation();
  await saveConversation();
  generate();
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

/* The settings kept with a conversation, as the page shows them now. */
function currentSettings() {
  return {
    model: ui.target.value,
    system: ui.system.value,
    temperature: ui.temperature.value,
    maxTokens: ui.maxTokens.value,
    ignoreEos: ui.ignoreEos.checked,
    useMcp: ui.useMcp.checked,
    toolChoice: ui.toolChoice.value,
  };
}

function applySettings(s) {
  if (s.model) {
    state.wantModel = s.model;
    if ([...ui.target.options].some((o) => o.value === s.model)) ui.target.value = s.model;
    showTarget();
  }
  if (typeof s.system === 'string') ui.system.value = s.system;
  if (s.temperature !== undefined) ui.temperature.value = s.temperature;
  if (s.maxTokens !== undefined) ui.maxTokens.value = s.maxTokens;
  if (s.ignoreEos !== undefined) ui.ignoreEos.checked = Boolean(s.ignoreEos);
  if (s.useMcp !== undefined) ui.useMcp.checked = Boolean(s.useMcp);
  if (s.toolChoice) ui.toolChoice.value = s.toolChoice;
}

/* A stored message as the chat API takes it. */
function apiMessage(m) {
  if (m.role === 'user' && m.files && m.files.length) {
    return { role: 'user', content: [{ type: 'text', text: m.content }, ...m.files.map(filePart)] };
  }
  const out = { role: m.role, content: m.content || '' };
  if (m.tool_calls && m.tool_calls.length) out.tool_calls = m.tool_calls;
  if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
  return out;
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
  const files = state.pending;
  if (state.inBrowser.has(target) && !ui.browserField.hidden && files.length) {
    announce('The browser runtime takes no images or audio; turn “Run in this browser” off to send them.');
    return;
  }
  const conv = ensureConversation(text);
  const msg = { role: 'user', content: text };
  if (files.length) msg.files = files.map((f) => ({ name: f.name, type: f.type, dataUrl: f.dataUrl }));
  conv.messages.push(msg);
  addMessage({ ...msg, files: files.length ? files : undefined }, 'You');
  state.pending = [];
  showPending();
  saveConversation();
  await generate();
}

/* Measures an answer as it arrives (TTFT, speed: docs/web.md). */
function meter() {
  const m = { t0: performance.now(), tFirst: 0, tLast: 0, ttftMs: null, tokens: null, chunks: 0 };
  m.piece = () => {
    const now = performance.now();
    if (m.ttftMs === null) {
      m.tFirst = now;
      m.ttftMs = now - m.t0;
    }
    m.tLast = now;
    m.chunks++;
  };
  return m;
}

/* Answers the current conversation's last message with the selected target. */
async function generate() {
  const target = ui.target.value;
  const settings = readSettings();
  if (!target || settings.error || !state.conv) return;
  const conv = state.conv;
  const generation = state.generation;
  const messages = [];
  const system = ui.system.value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...conv.messages.map(apiMessage));
  const inBrowser = state.inBrowser.has(target) && !ui.browserField.hidden;
  const answer = { role: 'assistant', content: '', model: target };
  const reply = addMessage(answer, target);
  reply.el.classList.add('streaming');
  reply.el.setAttribute('aria-busy', 'true');

  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  announce(`${target} is answering.`);

  const m = meter();
  const onDelta = (d) => {
    if (d.content || d.reasoning || d.tool || d.mcp) m.piece();
    if (d.content) answer.content += d.content;
    if (d.reasoning) answer.reasoning = (answer.reasoning || '') + d.reasoning;
    if (d.tool) mergeToolCall(answer, d.tool);
    if (d.mcp) (answer.mcp_calls = answer.mcp_calls || []).push(d.mcp);
    reply.update(d.content);
  };
  let finish = '';
  let outcome = 'done';
  let error = '';
  try {
    const run = inBrowser ? answerInBrowser : usesMcp() ? answerWithTools : answerFromGateway;
    const end = await run(target, messages, settings, controller.signal, onDelta);
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
    reply.done();
    setBusy(false);
  }

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
  const said = answer.content || answer.reasoning || answer.tool_calls || answer.mcp_calls;
  if (said && generation === state.generation && conv === state.conv) {
    conv.messages.push(answer);
    await saveConversation();
  }
  if (outcome !== 'error' || m.ttftMs !== null) showAnswerStats(m);
  if (outcome === 'done' && typeof answered === 'function') answered(answer);
}

/* Adds a streamed tool call delta ({index, id, function: {name, arguments}}) to the answer's calls. */
function mergeToolCall(answer, t) {
  answer.tool_calls = answer.tool_calls || [];
  const i = Number.isInteger(t.index) ? t.index : answer.tool_calls.length;
  const c = answer.tool_calls[i] || (answer.tool_calls[i] = { id: '', type: 'function', function: { name: '', arguments: '' } });
  if (t.id) c.id = t.id;
  if (t.function && t.function.name) c.function.name += t.function.name;
  if (t.function && t.function.arguments) c.function.arguments += t.function.arguments;
}

function stop() {
  if (state.controller) state.controller.abort();
}

/* An answer streamed by the gateway: {finish, tokens} (tokens null without a usage chunk). */
async function answerFromGateway(target, messages, settings, signal, onDelta) {
  const body = {
    model: target,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: settings.temperature,
  };
  if (settings.maxTokens !== null) body.max_tokens = settings.maxTokens;
  if (ui.ignoreEos.checked) body.ignore_eos = true; // llama.cpp's extension, which the gateway takes
  const res = await sendJson('/v1/chat/completions', body, 'POST', signal);
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
    const delta = (choice && choice.delta) || {};
    if (delta.content) onDelta({ content: delta.content });
    if (delta.reasoning_content) onDelta({ reasoning: delta.reasoning_content });
    for (const t of delta.tool_calls || []) onDelta({ tool: t });
    if (choice && choice.finish_reason) end.finish = choice.finish_reason;
    return true;
  });
  if (!sawDone) throw new Error('the stream ended before [DONE]');
  return end;
}

/* An mcp_call item as kept with the answer (msg.mcp_calls). */
function mcpCall(item) {
  const { server_label, name, arguments: args, output, error, status } = item;
  return { server_label, name, arguments: args, output, error, status };
}

/*
 * What one Responses stream event adds to the answer; true at the response's last event. A second
 * message item (the model's turn after a tool call) starts a new paragraph.
 */
function responsesEvent(ev, end, onDelta) {
  const t = ev.type;
  if (t === 'response.output_text.delta') {
    const gap = end.textItem !== undefined && end.textItem !== ev.output_index ? '\n\n' : '';
    end.textItem = ev.output_index;
    onDelta({ content: gap + ev.delta });
  } else if (t === 'response.reasoning_text.delta') {
    onDelta({ reasoning: ev.delta });
  } else if (t === 'response.output_item.done' && ev.item && ev.item.type === 'mcp_call') {
    onDelta({ mcp: mcpCall(ev.item) });
  } else if (t === 'response.output_item.done' && ev.item && ev.item.type === 'mcp_list_tools' && ev.item.error) {
    onDelta({ mcp: { server_label: ev.item.server_label, name: '', arguments: '', error: ev.item.error } });
  } else if (t === 'response.completed' || t === 'response.incomplete') {
    const r = ev.response || {};
    if (r.usage) end.tokens = r.usage.output_tokens;
    end.finish = r.incomplete_details && r.incomplete_details.reason === 'max_output_tokens' ? 'length' : 'stop';
    return true;
  } else if (t === 'response.failed' || t === 'error') {
    const e = (ev.response && ev.response.error) || ev.error || ev;
    throw new Error(e.message || `the gateway reported ${t}`);
  }
  return false;
}

/* A chat content part (image_url, input_audio) as a Responses input part. */
function responsesPart(p) {
  if (p.type === 'text') return { type: 'input_text', text: p.text };
  if (p.type === 'image_url') return { type: 'input_image', image_url: p.image_url.url };
  return p; // input_audio: the same shape in both APIs
}

/* The chat messages as Responses input items: messages, and past function calls and their results. */
function responsesInput(messages) {
  const items = [];
  for (const m of messages) {
    if (m.role === 'tool') {
      items.push({ type: 'function_call_output', call_id: m.tool_call_id || '', output: m.content || '' });
      continue;
    }
    const content = Array.isArray(m.content) ? m.content.map(responsesPart) : m.content || '';
    if (content.length) items.push({ type: 'message', role: m.role, content });
    for (const c of m.tool_calls || []) {
      items.push({ type: 'function_call', call_id: c.id, name: c.function.name, arguments: c.function.arguments });
    }
  }
  return items;
}

/* An answer through the Responses API with the gateway's tool servers: {finish, tokens}. */
async function answerWithTools(target, messages, settings, signal, onDelta) {
  const body = {
    model: target,
    input: responsesInput(messages),
    stream: true,
    store: false, // the conversation lives in this page
    temperature: settings.temperature,
    tools: state.mcp.map((s) => ({ type: 'mcp', server_label: s.name, require_approval: 'never' })),
    tool_choice: ui.toolChoice.value,
    parallel_tool_calls: false, // one call a turn: the model sees each result before its next call
  };
  if (settings.maxTokens !== null) body.max_output_tokens = settings.maxTokens;
  const res = await sendJson('/v1/responses', body, 'POST', signal);
  if (!res.ok) throw new Error(await errorMessage(res));
  const end = { finish: '', tokens: null, textItem: undefined };
  let ended = false;
  await readEvents(res.body, (data) => !(ended = responsesEvent(JSON.parse(data), end, onDelta)));
  if (!ended) throw new Error('the stream ended before response.completed');
  return end;
}

/* The same answer from the model running in this browser (bindings/web's client.chat). */
async function answerInBrowser(target, messages, settings, signal, onDelta) {
  const endpoint = await browserEndpoint(target);
  const opts = { endpoint, temperature: settings.temperature, signal };
  if (settings.maxTokens !== null) opts.maxTokens = settings.maxTokens;
  if (ui.ignoreEos.checked) opts.ignoreEos = true;
  const run = state.browser.client.chat(messages, opts);
  for await (const piece of run.tokens) onDelta({ content: piece });
  const r = await run.response;
  if (r.finishReason === 'cancelled') {
    const stopped = new Error('stopped');
    stopped.name = 'AbortError';
    throw stopped;
  }
  return { finish: r.finishReason, tokens: r.usage.completionTokens };
}

/* ---- images and audio to send ------------------------------------------------------------------ */

function capabilities(name) {
  const m = state.models.get(name);
  return m && Array.isArray(m.capabilities) ? m.capabilities : [];
}

function takesImages(name) {
  return capabilities(name).includes('vision');
}

function takesAudio(name) {
  return capabilities(name).includes('audio');
}

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

/* The bytes of a data: URL as a Blob (the page's policy lets images and audio come from blob: only). */
function blobOf(dataUrl) {
  const m = /^data:([^;,]*)(;base64)?,(.*)$/s.exec(dataUrl || '');
  if (!m) return new Blob([]);
  const raw = m[2] ? atob(m[3]) : decodeURIComponent(m[3]);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return new Blob([bytes], { type: m[1] });
}

/* A stored file as a content part: an image_url, or input_audio (base64 and its format). */
function filePart(f) {
  if (f.type && f.type.startsWith('audio/')) {
    return { type: 'input_audio', input_audio: { data: f.dataUrl.split(',')[1], format: f.type === 'audio/mpeg' ? 'mp3' : 'wav' } };
  }
  return { type: 'image_url', image_url: { url: f.dataUrl } };
}

/* Takes files (from the button, a drop or a paste) for the next message. */
async function addFiles(files) {
  const target = ui.target.value;
  if (ui.attach.hidden) {
    announce('This model takes no images or audio: its target has no projector (mmproj).');
    return;
  }
  for (const file of files) {
    const image = IMAGE_TYPES.includes(file.type);
    const audio = AUDIO_TYPES.includes(file.type);
    if ((image && !takesImages(target)) || (audio && !takesAudio(target)) || (!image && !audio)) {
      announce(`${file.name} is not a file this model takes (${attachKinds(target)}).`);
      continue;
    }
    if (file.size > IMAGE_MAX_BYTES) {
      announce(`${file.name} is larger than 20 MB.`);
      continue;
    }
    state.pending.push({ name: file.name || 'file', type: file.type, blobUrl: URL.createObjectURL(file), dataUrl: await readAsDataUrl(file) });
  }
  showPending();
}

function attachKinds(target) {
  return [takesImages(target) ? 'PNG, JPEG, GIF or BMP images' : '', takesAudio(target) ? 'WAV or MP3 audio' : '']
    .filter(Boolean).join(', ') || 'nothing';
}

function showPending() {
  ui.attachments.replaceChildren();
  state.pending.forEach((f, i) => {
    const li = document.createElement('li');
    li.append(filesRow([f]).firstChild);
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'secondary';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Remove ${f.name}`);
    remove.addEventListener('click', () => {
      state.pending.splice(i, 1);
      showPending();
    });
    li.append(remove);
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
  addFiles([...event.dataTransfer.files]);
}

function onPaste(event) {
  const files = event.clipboardData ? [...event.clipboardData.files] : [];
  if (!files.length) return;
  event.preventDefault();
  addFiles(files);
}

/* Clear empties the conversation shown (it stays in the list, empty, until deleted). */
async function clearConversation() {
  stop();
  state.generation++;
  clearPending();
  if (state.conv) state.conv.messages = [];
  showConversation();
  announce('Conversation cleared.');
  ui.prompt.focus();
  await saveConversation();
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

/* The three views (Chat, Models, Charts): one shown at a time, its nav button pressed. */
function showView(name) {
  for (const v of ['chat', 'models', 'charts']) {
    document.getElementById(`${v}-view`).hidden = v !== name;
    document.getElementById(`nav-${v}`).setAttribute('aria-pressed', String(v === name));
  }
  if (name === 'models') showModels();
  if (name === 'charts') showCharts();
}

function start() {
  ui.token.value = sessionStorage.getItem(TOKEN_KEY) || '';
  for (const b of document.querySelectorAll('nav.views button')) b.addEventListener('click', () => showView(b.dataset.view));

  ui.composer.addEventListener('submit', onSubmit);
  ui.prompt.addEventListener('keydown', onPromptKey);
  document.addEventListener('keydown', onKey);
  ui.stop.addEventListener('click', stop);
  ui.clear.addEventListener('click', clearConversation);
  ui.target.addEventListener('change', () => {
    state.wantModel = ui.target.value;
    showTarget();
  });
  ui.residency.addEventListener('click', toggleResidency);
  ui.inBrowser.addEventListener('change', toggleBrowser);
  ui.token.addEventListener('change', saveToken);
  ui.attach.addEventListener('click', () => ui.imageFile.click());
  ui.imageFile.addEventListener('change', () => {
    addFiles([...ui.imageFile.files]);
    ui.imageFile.value = '';
  });
  ui.composer.addEventListener('dragover', (event) => event.preventDefault());
  ui.composer.addEventListener('drop', onDrop);
  ui.prompt.addEventListener('paste', onPaste);
  document.querySelector('.skip').addEventListener('click', (event) => {
    event.preventDefault();
    showView('chat');
    ui.prompt.focus();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) pollReady();
  });

  wireConversations();
  wireModels();
  wireVoice();
  restoreConversations();
  loadModels();
  pollReady();
  startCharts();
}

start();
