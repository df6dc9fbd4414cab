/*
 * conversations.js: the side list of conversations (store.js keeps them): new, open, rename,
 * delete, search by title, export and import. The list is one Tab stop; the arrow keys, Home and
 * End move between conversations and Enter opens one (a roving tabindex), so a long list does not
 * stand between the keyboard and the message box. Delete asks once more on the same button.
 */

const TITLE_CHARS = 60;
const CONFIRM_MS = 4000;

const side = {
  list: document.getElementById('conversations'),
  search: document.getElementById('search'),
  title: document.getElementById('chat-title'),
  rename: document.getElementById('rename'),
  remove: document.getElementById('delete'),
  importFile: document.getElementById('import-file'),
  confirmTimer: 0,
  // id -> {id, title, updated}: what the list shows, read from the store once at start and kept up
  // to date by each change here, so a save does not read every conversation (and its files) again.
  index: new Map(),
};

function indexEntry(c) {
  side.index.set(c.id, { id: c.id, title: c.title, updated: c.updated });
}

/* Reads the list from the store again (at start, and after an import). */
async function reindex() {
  side.index.clear();
  for (const c of await convStore.all()) indexEntry(c);
}

function titleFrom(text) {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > TITLE_CHARS ? `${t.slice(0, TITLE_CHARS - 1)}…` : t || 'Untitled';
}

/* Draws the list from the store, filtered by the search box. */
async function refreshList() {
  const q = side.search.value.trim().toLowerCase();
  const all = [...side.index.values()].sort((a, b) => b.updated - a.updated);
  const shown = all.filter((c) => !q || c.title.toLowerCase().includes(q));
  const current = state.conv && state.conv.id;
  const items = shown.map((c) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'conversation';
    b.dataset.testid = 'conversation';
    b.dataset.id = c.id;
    b.textContent = c.title;
    b.title = c.title;
    if (c.id === current) b.setAttribute('aria-current', 'true');
    b.tabIndex = -1;
    li.append(b);
    return li;
  });
  side.list.replaceChildren(...items);
  const focusable = side.list.querySelector('[aria-current="true"]') || side.list.querySelector('button');
  if (focusable) focusable.tabIndex = 0;
  if (!items.length) {
    const li = document.createElement('li');
    li.className = 'hint';
    li.textContent = q ? 'No conversation has that in its title.' : 'No conversations yet.';
    side.list.append(li);
  }
}

function showTitle() {
  side.title.textContent = state.conv ? state.conv.title : 'New conversation';
  side.rename.disabled = !state.conv;
  side.remove.disabled = !state.conv;
  resetDelete();
}

/* Keeps the current conversation (its settings as the page shows them now). */
async function saveConversation() {
  if (!state.conv) return;
  state.conv.updated = Date.now();
  state.conv.settings = currentSettings();
  await convStore.put(state.conv);
  indexEntry(state.conv);
  await refreshList();
}

/* The conversation for a first message: made and listed then, so empty ones do not pile up. */
function ensureConversation(firstText) {
  if (!state.conv) {
    const now = Date.now();
    state.conv = { id: newId(), title: titleFrom(firstText), created: now, updated: now, settings: {}, messages: [] };
    showTitle();
  }
  return state.conv;
}

async function openConversation(id) {
  const conv = await convStore.get(id);
  if (!conv) return;
  stop();
  state.generation++;
  state.conv = conv;
  applySettings(conv.settings || {});
  showConversation();
  showTitle();
  await refreshList();
}

function newConversation() {
  stop();
  state.generation++;
  state.conv = null;
  clearPending();
  showConversation();
  showTitle();
  refreshList();
  announce('New conversation.');
  ui.prompt.focus();
}

/* Rename in place: the title becomes a text field; Enter keeps it, Escape leaves it as it was. */
function startRename() {
  if (!state.conv) return;
  const input = document.createElement('input');
  input.id = 'rename-input';
  input.value = state.conv.title;
  input.setAttribute('aria-label', 'Conversation title');
  input.dataset.testid = 'rename-input';
  side.title.replaceChildren(input);
  input.focus();
  input.select();
  let done = false;
  const finish = async (keep) => {
    if (done) return;
    done = true;
    const t = input.value.trim();
    if (keep && t) {
      state.conv.title = t.slice(0, 200);
      await saveConversation();
    }
    showTitle();
    side.rename.focus();
  };
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      finish(e.key === 'Enter');
    }
  });
  input.addEventListener('blur', () => finish(true));
}

function resetDelete() {
  clearTimeout(side.confirmTimer);
  side.remove.textContent = 'Delete';
  delete side.remove.dataset.confirm;
}

async function deleteConversation() {
  if (!state.conv) return;
  if (!side.remove.dataset.confirm) {
    side.remove.dataset.confirm = '1';
    side.remove.textContent = 'Delete: sure?';
    side.confirmTimer = setTimeout(resetDelete, CONFIRM_MS);
    return;
  }
  const title = state.conv.title;
  await convStore.remove(state.conv.id);
  side.index.delete(state.conv.id);
  newConversation();
  announce(`Deleted “${title}”.`);
}

async function exportAll() {
  const blob = new Blob([await exportConversations()], { type: 'application/json' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = `sipp-conversations-${new Date().toISOString().slice(0, 10)}.json`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 0);
  announce('Conversations exported.');
}

async function importFrom(file) {
  try {
    const n = await importConversations(await file.text());
    await reindex();
    await refreshList();
    announce(`Imported ${n} conversation${n === 1 ? '' : 's'} from ${file.name}.`);
  } catch (err) {
    announce(`Cannot import ${file.name}: ${err.message}`);
  }
}

/* Arrow keys, Home and End move along the list; the focused one keeps the list's Tab stop. */
function onListKey(event) {
  const buttons = [...side.list.querySelectorAll('button.conversation')];
  const i = buttons.indexOf(document.activeElement);
  if (i < 0) return;
  const to = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: buttons.length - 1 }[event.key];
  if (to === undefined) return;
  event.preventDefault();
  const next = buttons[Math.max(0, Math.min(buttons.length - 1, to))];
  buttons.forEach((b) => (b.tabIndex = b === next ? 0 : -1));
  next.focus();
}

function wireConversations() {
  document.getElementById('new-chat').addEventListener('click', newConversation);
  side.search.addEventListener('input', refreshList);
  side.rename.addEventListener('click', startRename);
  side.remove.addEventListener('click', deleteConversation);
  side.list.addEventListener('click', (e) => {
    const b = e.target.closest('button.conversation');
    if (b) openConversation(b.dataset.id);
  });
  side.list.addEventListener('keydown', onListKey);
  document.getElementById('export').addEventListener('click', exportAll);
  document.getElementById('import').addEventListener('click', () => side.importFile.click());
  side.importFile.addEventListener('change', () => {
    if (side.importFile.files[0]) importFrom(side.importFile.files[0]);
    side.importFile.value = '';
  });
}

/* On start: the most recent conversation, if any. */
async function restoreConversations() {
  try {
    await reindex();
    const newest = [...side.index.values()].sort((a, b) => b.updated - a.updated)[0];
    if (newest) await openConversation(newest.id);
    else await refreshList();
  } catch (err) {
    announce(`Conversations are not kept: this browser's IndexedDB failed (${err.message || err}).`);
  }
}
