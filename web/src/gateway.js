/*
 * gateway.js: how the page talks to the gateway that served it: the bearer token, errors in the
 * gateway's own words, JSON, and the readers of streamed answers (server-sent events, and Ollama's
 * NDJSON for /api/pull). Every request goes to this origin only.
 */

const TOKEN_KEY = 'sipp.token';

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/* The human message of a failed reply: the gateway's {"error": {"message"}} (or Ollama's {"error"})
 * when there is one. */
async function errorMessage(res) {
  let text = '';
  try {
    text = await res.text();
    const j = JSON.parse(text);
    if (j && j.error && j.error.message) return `${j.error.message} (HTTP ${res.status})`;
    if (j && typeof j.error === 'string') return `${j.error} (HTTP ${res.status})`; // Ollama's routes
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
 * The gateway's [[mcp]] tool servers (GET /v1/mcp/tools): each {name, transport, tools, error}, or
 * none when the route answers no (no permission, or a gateway without it). The Models view lists
 * them; the chat's "Use tool servers" offers those without an error.
 */
async function mcpServers() {
  try {
    return (await getJson('/v1/mcp/tools')).data || [];
  } catch (_) {
    return [];
  }
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

/* Reads a stream of JSON lines (Ollama's NDJSON) and calls onLine(object) per line. */
async function readLines(body, onLine) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    buf += done ? decoder.decode() : decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onLine(JSON.parse(line));
    }
    if (done) break;
  }
  if (buf.trim()) onLine(JSON.parse(buf));
}

/* POSTs (or sends METHOD) a JSON body with the token; the Response, whatever its status. */
function sendJson(path, body, method = 'POST', signal = undefined) {
  return fetch(path, {
    method,
    headers: { 'Content-Type': 'application/json', ...authHeaders() },
    body: JSON.stringify(body),
    signal,
  });
}
