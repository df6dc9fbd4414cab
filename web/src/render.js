/*
 * render.js: a model's answer as a person reads it: Markdown (marked), code highlighted
 * (highlight.js) with a Copy button, reasoning folded away, tool calls and their results as cards.
 *
 * A model's text is untrusted. Three lines keep it from running anything:
 *   1. marked is told to print raw HTML in the text as text (the html renderer escapes it), and to
 *      turn a Markdown image into a plain link, so no answer can make the page fetch anything;
 *   2. what marked writes goes through DOMPurify (no script, no event handlers, no javascript: or
 *      data: links, no SVG or MathML, no forms or frames) into a fragment, never into innerHTML of
 *      the live page, and highlight.js works on that fragment's text only;
 *   3. the gateway's Content-Security-Policy allows no inline script and no other origin.
 * Links open in a new tab with no opener and no referrer. A user's own message stays plain text.
 */

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'img', 'svg', 'math', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'video',
    'audio', 'source', 'object', 'embed', 'link', 'meta', 'base'],
  FORBID_ATTR: ['style', 'srcset', 'action', 'formaction'],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  RETURN_DOM_FRAGMENT: true,
};
const COPIED_MS = 1500;

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const markdown = new marked.Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html: (token) => escapeHtml(token.raw || token.text || ''),
    image: (token) => `<a href="${escapeHtml(token.href || '')}">${escapeHtml(token.text || token.href || 'image')}</a>`,
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});
hljs.configure({ ignoreUnescapedHTML: true });

/* A button that copies text() to the clipboard and says so for a moment. */
function copyButton(text, label = 'Copy') {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'secondary small copy';
  b.textContent = label;
  b.dataset.testid = 'copy';
  b.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text());
      b.textContent = 'Copied';
    } catch (_) {
      b.textContent = 'Copy failed';
    }
    setTimeout(() => (b.textContent = label), COPIED_MS);
  });
  return b;
}

/* Highlights each code block of a sanitised fragment (known languages only) and adds its Copy button. */
function decorateCode(fragment) {
  for (const code of fragment.querySelectorAll('pre > code')) {
    const m = /(?:^|\s)language-([\w+#-]+)/.exec(code.className);
    if (m && hljs.getLanguage(m[1])) hljs.highlightElement(code);
    const pre = code.parentElement;
    const wrap = document.createElement('div');
    wrap.className = 'code';
    pre.replaceWith(wrap);
    const source = code.textContent;
    wrap.append(copyButton(() => source, 'Copy code'), pre);
  }
}

/* Markdown text as a sanitised DOM fragment. */
function renderMarkdown(text) {
  const fragment = DOMPurify.sanitize(markdown.parse(text), PURIFY);
  decorateCode(fragment);
  return fragment;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/* The reasoning of an answer, folded: a <details> the reader opens. */
function reasoningBlock(text, streaming) {
  const d = el('details', 'reasoning');
  d.dataset.testid = 'reasoning';
  d.append(el('summary', '', streaming ? 'Reasoning…' : 'Reasoning'), el('div', 'reasoning-text', text));
  return d;
}

/* Arguments as they came, pretty-printed when they are JSON. */
function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (_) {
    return text;
  }
}

/* A tool call ({id, function: {name, arguments}}), a tool result ({tool_call_id, content}) or a
 * call the gateway ran on an MCP server (kind 'mcp') as a card. */
const TOOL_CARD_IDS = { call: 'tool-call', result: 'tool-result', mcp: 'mcp-call' };
function toolCard(kind, title, body) {
  const card = el('div', `tool-card ${kind}`);
  card.dataset.testid = TOOL_CARD_IDS[kind];
  card.append(el('div', 'tool-title', title), el('pre', 'tool-body', body));
  return card;
}

function toolCallCards(calls) {
  return (calls || []).map((c) => {
    const fn = c.function || {};
    return toolCard('call', `Tool call: ${fn.name || '?'}${c.id ? ` (${c.id})` : ''}`, prettyJson(fn.arguments || ''));
  });
}

/* The calls the gateway ran on its MCP servers for an answer (its Responses mcp_call items:
 * {server_label, name, arguments, output, error}): the tool, its arguments, its output or error. */
function mcpCallCards(calls) {
  return (calls || []).map((c) => {
    const title = `MCP call: ${c.name || 'tools/list'} (server ${c.server_label || '?'})`;
    const card = toolCard('mcp', title, prettyJson(c.arguments || ''));
    const out = el('pre', 'tool-body tool-output', c.error ? `Error: ${c.error}` : `Output: ${c.output ?? ''}`);
    out.dataset.testid = 'mcp-output';
    card.append(out);
    return card;
  });
}

/* Fills an assistant message's body: reasoning, the MCP calls run for it, the Markdown answer, tool calls. */
function renderAnswer(body, msg, streaming) {
  const parts = [];
  if (msg.reasoning) parts.push(reasoningBlock(msg.reasoning, streaming && !msg.content));
  parts.push(...mcpCallCards(msg.mcp_calls));
  const text = el('div', 'md');
  text.append(renderMarkdown(msg.content || ''));
  parts.push(text, ...toolCallCards(msg.tool_calls));
  const open = body.querySelector('details.reasoning[open]');
  body.replaceChildren(...parts);
  if (open && parts[0].tagName === 'DETAILS') parts[0].open = true; // a reader's open fold stays open
}
