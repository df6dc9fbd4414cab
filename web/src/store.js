/*
 * store.js: conversations kept in this browser's IndexedDB (database "sipp", object store
 * "conversations", one record per conversation), so they survive a reload and never leave the
 * browser but in the requests the user sends. A record:
 *
 *   {id, title, created, updated,                  times in ms since the epoch
 *    settings: {model, system, temperature, maxTokens, ignoreEos},
 *    messages: [{role, content, reasoning?, tool_calls?, tool_call_id?, note?,
 *                files?: [{name, type, dataUrl}]}]}
 *
 * Export writes every record as one JSON file ({"sipp_conversations": 1, "conversations": [...]});
 * import reads that shape back and gives each imported conversation a new id, so importing twice
 * adds twice rather than overwriting what the user has.
 */

const DB_NAME = 'sipp';
const DB_VERSION = 1;
const DB_STORE = 'conversations';
const EXPORT_FORMAT = 1;

let dbPromise = null;

function openDb() {
  if (!dbPromise) {
    dbPromise = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB_NAME, DB_VERSION);
      req.onupgradeneeded = () => req.result.createObjectStore(DB_STORE, { keyPath: 'id' });
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }
  return dbPromise;
}

/* Runs fn(store) in a transaction; resolves with the request's result when the transaction ends. */
async function withStore(mode, fn) {
  const db = await openDb();
  return new Promise((resolve, reject) => {
    const tx = db.transaction(DB_STORE, mode);
    const req = fn(tx.objectStore(DB_STORE));
    tx.oncomplete = () => resolve(req ? req.result : undefined);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error || new Error('the browser aborted the IndexedDB transaction'));
  });
}

const convStore = {
  all: async () => ((await withStore('readonly', (s) => s.getAll())) || []).sort((a, b) => b.updated - a.updated),
  get: (id) => withStore('readonly', (s) => s.get(id)),
  put: (conv) => withStore('readwrite', (s) => s.put(conv)),
  remove: (id) => withStore('readwrite', (s) => s.delete(id)),
};

function newId() {
  return `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

/* The conversations as an export file's text. */
async function exportConversations() {
  return JSON.stringify({ sipp_conversations: EXPORT_FORMAT, conversations: await convStore.all() }, null, 1);
}

/* Reads an export file's text; resolves with how many conversations it added, or throws saying why not. */
async function importConversations(text) {
  let j;
  try {
    j = JSON.parse(text);
  } catch (err) {
    throw new Error(`the file is not JSON (${err.message})`);
  }
  const list = j && j.sipp_conversations === EXPORT_FORMAT ? j.conversations : null;
  if (!Array.isArray(list))
    throw new Error('the file is not a sipp conversations export (it needs "sipp_conversations": 1 and "conversations")');
  let n = 0;
  for (const c of list) {
    if (!c || typeof c.title !== 'string' || !Array.isArray(c.messages)) continue;
    const now = Date.now();
    await convStore.put({
      id: newId(), title: c.title, created: Number(c.created) || now, updated: Number(c.updated) || now,
      settings: c.settings && typeof c.settings === 'object' ? c.settings : {},
      messages: c.messages.filter((m) => m && typeof m.role === 'string'),
    });
    n++;
  }
  return n;
}
