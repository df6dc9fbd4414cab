/*
 * models.js: the Models view: what the gateway serves and how, from the routes every client has.
 *
 *   GET  /v1/models                  each target: state, capabilities, aliases, and for a local one
 *                                    the "sipp" object (memory measured at its load, context, uses)
 *   GET  /v1/backends                backend decision and placement per target; memory budgets per
 *                                    place; backends compiled and available; recipes when listed
 *   POST /v1/models/NAME/load|unload load and unload (an admin token when the gateway has tokens)
 *   POST /api/pull                   Ollama's pull: NDJSON progress lines ({status, total,
 *                                    completed}), shown as a live progress bar, then "success"
 *   GET  /api/tags, DELETE /api/delete  the models served, and removing one from the store
 *   GET  /v1/catalog                 the models the gateway can pull by name
 *   GET  /v1/mcp/tools               the [[mcp]] tool servers and their tools (shown when there are any)
 *
 * Nothing here is cached: opening the view, and each action, reads the gateway again. A refusal is
 * shown in the gateway's own words (a 403 names the admin setting).
 */

const MIB = 1024 * 1024;
const PULL_DONE = 100;

const mv = {
  list: document.getElementById('model-list'),
  note: document.getElementById('models-note'),
  matrix: document.getElementById('matrix'),
  pullForm: document.getElementById('pull-form'),
  catalog: document.getElementById('catalog-list'),
  pullSource: document.getElementById('pull-source'),
  pullButton: document.getElementById('pull'),
  pullRow: document.getElementById('pull-row'),
  pullProgress: document.getElementById('pull-progress'),
  pullStatus: document.getElementById('pull-status'),
  store: document.getElementById('store-list'),
  pulled: new Set(), // store names pulled from this page, listed with Delete beside the served ones
};

function bytes(n) {
  if (!Number.isFinite(n)) return '–';
  if (n >= 1024 * MIB) return `${(n / (1024 * MIB)).toFixed(1)} GiB`;
  return `${(n / MIB).toFixed(n < 10 * MIB ? 1 : 0)} MiB`;
}

function row(dl, name, value) {
  const d = document.createElement('div');
  const dt = document.createElement('dt');
  dt.textContent = name;
  const dd = document.createElement('dd');
  if (value instanceof Node) dd.append(value);
  else dd.textContent = value === undefined || value === null || value === '' ? '–' : String(value);
  d.append(dt, dd);
  dl.append(d);
  return dd;
}

/* A bar of used against total, with its numbers as text beside it (and as the meter's name). */
function memoryBar(used, total, label) {
  const wrap = document.createElement('span');
  wrap.className = 'bar';
  const m = document.createElement('meter');
  m.min = 0;
  m.max = total > 0 ? total : 1;
  m.value = Math.min(used || 0, m.max);
  m.high = m.max * 0.9;
  const text = total > 0 ? `${bytes(used)} of ${bytes(total)}` : bytes(used);
  m.setAttribute('aria-label', `${label}: ${text}`);
  const t = document.createElement('span');
  t.textContent = text;
  wrap.append(m, t);
  return wrap;
}

/* "layers 0–3 + output on CPU (REPACK)", one line per place the weights went. */
function placementText(p) {
  if (!Array.isArray(p) || !p.length) return '';
  return p.map((x) => {
    const layers = x.n_layers > 0 ? `layers ${x.first_layer}–${x.first_layer + x.n_layers - 1}` : 'no layers';
    const where = [x.device, x.layout && x.layout !== 'default' ? x.layout : '', x.host ? `on ${x.host}` : '']
      .filter(Boolean).join(' ');
    return `${layers}${x.output ? ' + output' : ''} · ${where} · ${bytes(x.buffer_bytes)}`;
  }).join('\n');
}

function hostBudget(backends) {
  const host = (backends.memory || []).find((p) => p.place === 'host');
  return host ? host.budget_bytes : 0;
}

/* One target's card. */
function modelCard(m, b, budget) {
  const s = m.sipp || {};
  const state = (b && b.state) || m.state || s.state || 'remote';
  const card = document.createElement('article');
  card.className = 'model-card';
  card.dataset.testid = 'model-card';
  card.dataset.name = m.id;
  const head = document.createElement('div');
  head.className = 'model-head';
  const h = document.createElement('h3');
  h.textContent = m.id;
  const badge = document.createElement('span');
  badge.className = 'state';
  badge.dataset.state = state;
  badge.dataset.testid = 'model-state';
  badge.textContent = state;
  head.append(h, badge);
  const dl = document.createElement('dl');
  dl.className = 'facts';
  const recipe = m.recipe || s.recipe || (b && b.recipe);
  row(dl, 'Kind', [recipe, b && b.type].filter(Boolean).join(' · '));
  row(dl, 'Backend', b && b.backend ? `${b.backend}${b.devices ? ` (${b.devices})` : ''}` : (b && b.requested_backend) || '');
  row(dl, 'Placement', placementText(b && b.placement)).classList.add('pre');
  const mem = s.memory;
  const used = mem ? mem.total_bytes : s.memory_estimate ? s.memory_estimate.total_bytes : null;
  if (used !== null && used !== undefined)
    row(dl, mem ? 'Memory (measured)' : 'Memory (estimate)', memoryBar(used, budget, `${m.id} memory`));
  row(dl, 'Context', s.ctx_size ? `${s.ctx_size} tokens${s.ctx_size_auto ? ' (auto)' : ''}` : '');
  row(dl, 'Slots', (live.last && (live.last.m.sipp_engine_slots || {})[m.id]) || '');
  // A chat model's capabilities are what it takes besides text; a speech model's are all it does.
  const caps = m.capabilities || [];
  const speechOnly = caps.includes('transcription') || caps.includes('speech');
  row(dl, 'Capabilities', (speechOnly ? caps : ['text', ...caps]).join(', '));
  row(dl, 'Aliases', (m.aliases || []).join(', '));
  const err = (b && b.error) || s.error;
  if (err) row(dl, 'Error', err);
  card.append(head, dl);
  if (b && b.type === 'local') card.append(residencyButtons(m.id, state));
  return card;
}

function residencyButtons(name, state) {
  const div = document.createElement('div');
  div.className = 'buttons';
  for (const action of ['load', 'unload']) {
    const btn = document.createElement('button');
    btn.type = 'button';
    btn.className = action === 'load' ? '' : 'secondary';
    btn.textContent = action === 'load' ? 'Load' : 'Unload';
    btn.dataset.testid = `model-${action}`;
    btn.setAttribute('aria-label', `${btn.textContent} ${name}`);
    btn.disabled = state === 'loading' || (action === 'load' ? state === 'ready' : state !== 'ready');
    btn.addEventListener('click', () => residency(name, action));
    div.append(btn);
  }
  return div;
}

async function residency(name, action) {
  mv.note.textContent = `${action === 'load' ? 'Loading' : 'Unloading'} ${name}…`;
  let message = '';
  try {
    const res = await sendJson(`/v1/models/${encodeURIComponent(name)}/${action}`, {});
    if (!res.ok) message = await errorMessage(res);
  } catch (err) {
    message = err.message;
  }
  await showModels();
  mv.note.textContent = message ? `${name}: ${message}` : `${name}: ${action === 'load' ? 'loaded' : 'unloaded'}.`;
  loadBackends(); // the chat view's status strip
}

/* Budgets per place: what the loaded models hold of each. */
function budgetsPanel(backends) {
  const dl = document.createElement('dl');
  dl.className = 'facts budgets';
  dl.dataset.testid = 'budgets';
  for (const p of backends.memory || []) row(dl, `Held on ${p.place}`, memoryBar(p.held_bytes, p.budget_bytes, `${p.place} memory held`));
  return dl;
}

function cell(tag, text, scope) {
  const c = document.createElement(tag);
  c.textContent = text;
  if (scope) c.scope = scope;
  return c;
}

function table(caption, head, rows) {
  const t = document.createElement('table');
  const thead = document.createElement('thead');
  const tr = document.createElement('tr');
  tr.append(...head.map((h) => cell('th', h, 'col')));
  thead.append(tr);
  const tbody = document.createElement('tbody');
  for (const r of rows) {
    const row = document.createElement('tr');
    row.append(cell('th', r[0], 'row'), ...r.slice(1).map((v) => cell('td', v)));
    tbody.append(row);
  }
  t.append(cell('caption', caption), thead, tbody);
  return t;
}

/*
 * The recipe × backend matrix of this host: /v1/backends' "recipes" ([{name, serves, kind,
 * backends: [{name, compiled, available, state, note?}], auto: {backend, reason}}]), each cell the
 * backend's state for the recipe ("auto" marks the one the auto rule picks). A gateway that lists no
 * recipes shows its backends: compiled, available, devices.
 */
function showMatrix(backends) {
  const recipes = Array.isArray(backends.recipes) ? backends.recipes : null;
  if (!recipes) {
    const rows = (backends.backends || []).map((b) => [b.name, b.compiled ? 'yes' : 'no', b.available ? 'yes' : 'no', String(b.devices ?? '')]);
    mv.matrix.replaceChildren(table('Backends (this gateway lists no recipes)', ['backend', 'compiled', 'available', 'devices'], rows));
    return;
  }
  const names = [...new Set(recipes.flatMap((r) => (r.backends || []).map((b) => b.name)))];
  const rows = recipes.map((r) => {
    const by = new Map((r.backends || []).map((b) => [b.name, b]));
    const auto = r.auto && r.auto.backend;
    return [`${r.name}${r.serves ? ` (${r.serves})` : ''}`, ...names.map((n) => {
      const b = by.get(n);
      return b ? `${b.state}${n === auto ? ' · auto' : ''}${b.note ? ` (${b.note})` : ''}` : '–';
    })];
  });
  mv.matrix.replaceChildren(table('Recipes by backend (installed, installable or unsupported; auto: what the auto rule picks)',
    ['recipe', ...names], rows));
}

async function showModels() {
  let models;
  let backends;
  try {
    [models, backends] = await Promise.all([getJson('/v1/models'), getJson('/v1/backends')]);
  } catch (err) {
    mv.note.textContent = err.status === 401 ? `${err.message}. Enter a bearer token in the chat view's “Advanced and access”.` : err.message;
    return;
  }
  const byName = new Map((backends.targets || []).map((t) => [t.name, t]));
  const budget = hostBudget(backends);
  mv.list.replaceChildren(budgetsPanel(backends), ...(models.data || []).map((m) => modelCard(m, byName.get(m.id), budget)));
  showMatrix(backends);
  showStore(models);
  showCatalog();
  showMcp();
}

/* The catalog (GET /v1/catalog): each name with what it is and a Pull button that pulls it by name. */
async function showCatalog() {
  let entries = [];
  try {
    entries = (await getJson('/v1/catalog')).data || [];
  } catch (err) {
    mv.catalog.replaceChildren(Object.assign(document.createElement('li'), { textContent: `no catalog: ${err.message}` }));
    return;
  }
  mv.catalog.replaceChildren(...entries.map((e) => {
    const li = document.createElement('li');
    const span = document.createElement('span');
    // a recipe other than llama.cpp's says what runs it (whispercpp: a speech-to-text model)
    const recipe = e.recipe && e.recipe !== 'llamacpp' ? e.recipe : '';
    const facts = [e.size ? bytes(e.size) : '', (e.labels || []).join(', '), recipe].filter(Boolean).join('; ');
    span.textContent = `${e.name}${e.description ? ` — ${e.description}` : ''}${facts ? ` (${facts})` : ''}`;
    const get = document.createElement('button');
    get.type = 'button';
    get.className = 'secondary small';
    get.textContent = 'Pull';
    get.dataset.testid = 'catalog-pull';
    get.setAttribute('aria-label', `Pull ${e.name}`);
    get.addEventListener('click', () => {
      mv.pullSource.value = e.name;
      mv.pullForm.requestSubmit();
    });
    li.append(span, get);
    return li;
  }));
}

/* The tool servers the gateway runs for Responses' {"type": "mcp"} tools, each with its tools or its error. */
async function showMcp() {
  const panel = document.getElementById('mcp-panel');
  const servers = await mcpServers();
  panel.hidden = servers.length === 0;
  document.getElementById('mcp-list').replaceChildren(...servers.map((srv) => {
    const li = document.createElement('li');
    const tools = (srv.tools || []).map((t) => t.name).join(', ');
    li.textContent = `${srv.name} (${srv.transport || 'mcp'}): ${srv.error ? `error: ${srv.error}` : tools || 'no tools'}`;
    return li;
  }));
}

/* A store name with its Delete button. */
function storeItem(name, note) {
  const li = document.createElement('li');
  const span = document.createElement('span');
  span.textContent = note ? `${name} (${note})` : name;
  const del = document.createElement('button');
  del.type = 'button';
  del.className = 'secondary small';
  del.textContent = 'Delete';
  del.dataset.testid = 'store-delete';
  del.setAttribute('aria-label', `Delete ${name} from the store`);
  del.addEventListener('click', () => deleteStored(name));
  li.append(span, del);
  return li;
}

/*
 * The models pulled from this page, each with Delete, then the served ones (/api/tags): a served
 * model's Delete is refused by the gateway (a target's file is never removed under it), and says so.
 * The store's other models are deleted by name with the form below the list.
 */
async function showStore() {
  let served = [];
  try {
    served = ((await getJson('/api/tags')).models || []).map((m) => m.name);
  } catch (_) {
    /* a gateway that refuses tags still lists what was pulled here */
  }
  mv.store.replaceChildren(...[...mv.pulled].map((n) => storeItem(n, 'pulled here')),
    ...served.filter((n) => !mv.pulled.has(n)).map((n) => storeItem(n, 'served')));
}

async function deleteStored(name) {
  let message;
  try {
    const res = await sendJson('/api/delete', { model: name }, 'DELETE');
    message = res.ok ? `${name}: deleted from the store.` : `${name}: ${await errorMessage(res)}`;
    if (res.ok || res.status === 404) mv.pulled.delete(name);
  } catch (err) {
    message = `${name}: ${err.message}`;
  }
  await showStore();
  mv.note.textContent = message;
}

/* The store name a pull writes: a catalog name as it is, a URL's file name without .gguf. */
function storeNameOf(source) {
  const last = source.split('?')[0].split('/').pop() || source;
  return last.replace(/\.gguf$/i, '').replace(/-0000\d-of-0000\d$/, '');
}

function pullProgress(line) {
  if (line.error) throw new Error(line.error);
  const pct = line.total > 0 ? Math.floor((PULL_DONE * (line.completed || 0)) / line.total) : null;
  if (pct !== null) mv.pullProgress.value = pct;
  if (line.status === 'success') mv.pullProgress.value = PULL_DONE;
  mv.pullStatus.textContent = pct !== null && line.status !== 'success'
    ? `${line.status}: ${pct}% (${bytes(line.completed || 0)} of ${bytes(line.total)})`
    : line.status || '';
}

async function pull(event) {
  event.preventDefault();
  const source = mv.pullSource.value.trim();
  if (!source) return;
  mv.pullButton.disabled = true;
  mv.pullRow.hidden = false;
  mv.pullProgress.value = 0;
  mv.pullStatus.textContent = 'starting…';
  try {
    const res = await sendJson('/api/pull', { model: source, stream: true });
    if (!res.ok) throw new Error(await errorMessage(res));
    let ok = false;
    await readLines(res.body, (line) => {
      pullProgress(line);
      ok = ok || line.status === 'success';
    });
    if (!ok) throw new Error('the pull ended without "success"');
    mv.pulled.add(storeNameOf(source));
    mv.note.textContent = `Pulled ${source}.`;
  } catch (err) {
    mv.pullStatus.textContent = `failed: ${err.message}`;
    mv.note.textContent = `Pull of ${source} failed: ${err.message}`;
  } finally {
    mv.pullButton.disabled = false;
    showStore();
  }
}

function wireModels() {
  mv.pullForm.addEventListener('submit', pull);
  document.getElementById('delete-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const name = document.getElementById('delete-name').value.trim();
    if (name) deleteStored(name);
  });
}
