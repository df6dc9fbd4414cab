/**
 * Checks of the options and inputs the client takes, shared by the endpoint kinds and by both
 * packages: the browser package imports this module, the Node binding re-exports it with require()
 * (bindings/node/lib/options.js). Environment-neutral, no Node or browser API.
 *
 * Both accept the chat-library options (tools, responseFormat, grammar, ...) and tool messages
 * here; an endpoint without llama.cpp's chat library (the browser runtime) refuses them by name
 * with chatLibraryOption and toolMessage, one that has it passes them on under CHAT_FIELDS' names.
 */
import { invalid } from './errors.js';

const SEED_MAX = 0xFFFFFFFE; // 0xFFFFFFFF means "random" to libsipp

const GENERATION = {
  endpoint: 'any', signal: 'any', maxTokens: 'int', temperature: 'number', topK: 'int', topP: 'number',
  minP: 'number', repeatPenalty: 'number', seed: 'seed', stop: 'stop', contextKey: 'string',
  chatTemplate: 'string', ignoreEos: 'boolean', timeoutMs: 'int',
  // chats: OpenAI's and llama.cpp's fields, passed as they are (libsipp checks them) where the
  // endpoint has llama.cpp's chat library, refused by name where it has not
  tools: 'any', toolChoice: 'any', parallelToolCalls: 'boolean', responseFormat: 'any', grammar: 'string',
  jsonSchema: 'any', reasoningFormat: 'string', chatTemplateKwargs: 'any', thinkingBudgetTokens: 'int',
};

/** The chat options under their wire names (the OpenAI request's fields). */
const CHAT_FIELDS = {
  tools: 'tools', toolChoice: 'tool_choice', parallelToolCalls: 'parallel_tool_calls',
  responseFormat: 'response_format', grammar: 'grammar', jsonSchema: 'json_schema',
  reasoningFormat: 'reasoning_format', chatTemplateKwargs: 'chat_template_kwargs',
  thinkingBudgetTokens: 'thinking_budget_tokens',
};

/** The first chat-library option given in opts, as [name, wire name], or null. */
function chatLibraryOption(opts) {
  const k = Object.keys(CHAT_FIELDS).find((name) => opts[name] !== undefined);
  return k ? [k, CHAT_FIELDS[k]] : null;
}

/** An assistant message with tool_calls, or a tool message, needs the chat library to render. */
const isToolMessage = (m) => !!m && (Array.isArray(m.tool_calls) || m.role === 'tool');

/** The index of the first such message in checked messages, or -1. */
function toolMessage(messages) {
  return messages.findIndex(isToolMessage);
}

const SNAKE_HINT = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/** The generation options, checked; unknown keys (e.g. max_tokens for maxTokens) are errors. */
function generationOptions(opts, allowed = GENERATION) {
  if (opts === undefined || opts === null) return {};
  if (typeof opts !== 'object') throw invalid(`options must be an object such as { maxTokens: 64 }, not ${typeof opts}`);
  const out = {};
  for (const [k, v] of Object.entries(opts)) {
    const kind = allowed[k];
    if (!kind) {
      const hint = allowed[SNAKE_HINT(k)] ? `; did you mean ${SNAKE_HINT(k)}?` : '';
      throw invalid(`unknown option '${k}'${hint} (known: ${Object.keys(allowed).join(', ')})`);
    }
    if (v === undefined || v === null) continue;
    switch (kind) {
      case 'int':
        if (!Number.isInteger(v)) throw invalid(`${k} must be an integer, not ${JSON.stringify(v)}`);
        break;
      case 'number':
        if (typeof v !== 'number' || !Number.isFinite(v)) throw invalid(`${k} must be a finite number, not ${JSON.stringify(v)}`);
        break;
      case 'seed':
        if (!Number.isInteger(v) || v < 0 || v > SEED_MAX) throw invalid(`seed must be an integer in [0, ${SEED_MAX}], not ${JSON.stringify(v)}`);
        break;
      case 'string':
        if (typeof v !== 'string') throw invalid(`${k} must be a string, not ${typeof v}`);
        if (v.includes('\0')) throw invalid(`${k} contains a NUL character`);
        break;
      case 'boolean':
        if (typeof v !== 'boolean') throw invalid(`${k} must be true or false, not ${JSON.stringify(v)}`);
        break;
      case 'stop': {
        const list = typeof v === 'string' ? [v] : v;
        if (!Array.isArray(list) || !list.every((s) => typeof s === 'string' && s.length > 0)) {
          throw invalid(`stop must be a string or an array of non-empty strings, not ${JSON.stringify(v)}`);
        }
        out.stop = list;
        continue;
      }
      default:
        break;
    }
    out[k] = v;
  }
  if (out.timeoutMs !== undefined && out.timeoutMs <= 0) throw invalid(`timeoutMs must be positive, not ${out.timeoutMs}`);
  return out;
}

function checkPrompt(prompt) {
  if (typeof prompt !== 'string') throw invalid(`the prompt must be a string, not ${typeof prompt}`);
  if (prompt.includes('\0')) throw invalid('the prompt contains a NUL character');
  return prompt;
}

/** [{role, content}] from the messages given, or throws naming the bad one. */
function checkMessages(messages) {
  if (!Array.isArray(messages)) {
    throw invalid('messages must be an array of { role, content } objects, e.g. [{ role: "user", content: "Hello" }]');
  }
  if (messages.length === 0) throw invalid('messages is empty; give at least one message');
  return messages.map((m, i) => {
    // assistant messages may carry tool_calls (content null), tool messages a tool_call_id
    const toolish = isToolMessage(m);
    // content parts: text, and image_url / input_audio for a model with a projector (libsipp checks them)
    const parts = m && Array.isArray(m.content) && m.content.every((p) => p && typeof p.type === 'string');
    if (!m || typeof m.role !== 'string' || (typeof m.content !== 'string' && !parts && !toolish)) {
      throw invalid(`messages[${i}] needs a string role and a string content (or content parts), got ${JSON.stringify(m)}`);
    }
    return toolish ? { ...m } : { role: m.role, content: m.content };
  });
}

/** The texts to embed, and whether a single string was given. */
function checkEmbedInput(input) {
  const single = typeof input === 'string';
  const texts = single ? [input] : input;
  if (!Array.isArray(texts) || !texts.every((t) => typeof t === 'string')) {
    throw invalid(`embed takes a string or an array of strings, not ${JSON.stringify(input)}`);
  }
  return { texts, single };
}

export {
  CHAT_FIELDS, GENERATION, generationOptions, checkPrompt, checkMessages, checkEmbedInput, chatLibraryOption,
  toolMessage,
};
