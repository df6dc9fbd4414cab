/**
 * A Query: what client.query() and client.chat() return, for every endpoint kind.
 *
 *   response  Promise<{text, finishReason, usage, stats, endpoint}> (and the fields a package's endpoint
 *             kind adds: the browser's timings, backend, threads); rejects with a SippError
 *   tokens    AsyncIterable<string> of the pieces as they come; iterate it once. Leaving the loop
 *             early (break, return, throw) cancels the request. A chat's are its content.
 *   deltas    a chat's typed pieces, AsyncIterable of {type: 'content', text} | {type: 'reasoning',
 *             text} | {type: 'toolCall', index, id?, name?, arguments} (arguments a fragment); iterate
 *             it or tokens, once. The response of a chat also has toolCalls ([{id, type, function:
 *             {name, arguments}}]; finishReason is then 'tool_calls') and reasoning.
 *   cancel()  asks the request to stop; the response then resolves with finishReason 'cancelled'
 *
 * An endpoint drives it through _piece(text), _end(result) and _fail(error), and binds its way to
 * cancel with _bindCancel(fn). Pieces are buffered until the tokens iterator takes them, so nothing
 * is lost when iteration starts late. The response promise has a handler attached from the start:
 * a caller who only iterates tokens (and sees the error there) gets no unhandled rejection.
 * An endpoint that streams plain text (the browser runtime, a gateway) gives _piece(text); one that
 * parses a chat (libsipp with llama.cpp's chat library) gives _delta(list). A piece is a content
 * delta too, so deltas never stays silently empty.
 *
 * One source for the browser package and the Node binding (bindings/node/lib/query.js re-exports
 * this module with require()): environment-neutral, no Node or browser API.
 */
import { SippError } from './errors.js';

class Query {
  constructor(endpointName, signal) {
    this._endpoint = endpointName;
    this._parts = [];     // every piece, for response.text
    this._typed = [];     // a chat's typed deltas, for the deltas iterator
    this._next = 0;       // index of the next piece the tokens iterator hands out
    this._waiter = null;  // the iterator's pending next()
    this._done = false;
    this._error = null;
    this._cancelFn = null;
    this._cancelAsked = false;
    this._iterated = false;
    this.response = new Promise((resolve, reject) => {
      this._resolve = resolve;
      this._reject = reject;
    });
    this.response.catch(() => {});
    const self = this;
    this.tokens = { [Symbol.asyncIterator]: () => self._iterator(this._parts) };
    this.deltas = { [Symbol.asyncIterator]: () => self._iterator(this._typed) };
    this.cancel = this.cancel.bind(this);
    if (signal) this._watch(signal);
  }

  /** Asks the request to stop. Safe to call any time, also after the end. */
  cancel() {
    if (this._done || this._cancelAsked) return;
    this._cancelAsked = true;
    if (this._cancelFn) this._cancelFn();
  }

  _watch(signal) {
    if (typeof signal.addEventListener !== 'function' || typeof signal.aborted !== 'boolean') {
      this._fail(new SippError('signal must be an AbortSignal (e.g. new AbortController().signal)', 'invalid_argument'));
      return;
    }
    if (signal.aborted) {
      this.cancel();
      return;
    }
    const onAbort = () => this.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    this._unwatch = () => signal.removeEventListener('abort', onAbort);
  }

  _bindCancel(fn) {
    this._cancelFn = fn;
    if (this._cancelAsked && !this._done) fn();
  }

  get cancelRequested() {
    return this._cancelAsked;
  }

  /** Ends a query cancelled before its request was sent: nothing was generated. */
  _endUnsent(backend) {
    this._end({
      finishReason: 'cancelled',
      usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0, cachedTokens: 0 },
      stats: { backend },
    });
  }

  _piece(text) {
    if (this._done) return;
    this._parts.push(text);
    this._typed.push({ type: 'content', text });
    this._wake();
  }

  /** A chat's parsed deltas (OpenAI's {content | reasoning_content | tool_calls}). */
  _delta(list) {
    if (this._done) return;
    for (const d of list) {
      if (d.reasoning_content) this._typed.push({ type: 'reasoning', text: d.reasoning_content });
      if (d.content) {
        this._typed.push({ type: 'content', text: d.content });
        this._parts.push(d.content);
      }
      for (const tc of d.tool_calls || []) {
        const fn = tc.function || {};
        this._typed.push({ type: 'toolCall', index: tc.index, ...(tc.id ? { id: tc.id } : {}),
          ...(fn.name ? { name: fn.name } : {}), arguments: fn.arguments || '' });
      }
    }
    this._wake();
  }

  _end(result) {
    if (this._done) return;
    this._done = true;
    if (this._unwatch) this._unwatch();
    this._resolve({ text: this._parts.join(''), endpoint: this._endpoint, ...result });
    this._wake();
  }

  _fail(err) {
    if (this._done) return;
    this._done = true;
    this._error = err;
    if (this._unwatch) this._unwatch();
    this._reject(err);
    this._wake();
  }

  _wake() {
    const w = this._waiter;
    if (!w) return;
    // a delta may add nothing to the list being iterated (a tool call while tokens is read, a role)
    const next = this._pull();
    if (!next) return;
    this._waiter = null;
    next.then(w.resolve, w.reject);
  }

  _pull() {
    const list = this._list || this._parts;
    if (this._next < list.length) return Promise.resolve({ value: list[this._next++], done: false });
    if (this._error) return Promise.reject(this._error);
    if (this._done) return Promise.resolve({ value: undefined, done: true });
    return null;
  }

  _iterator(list) {
    if (this._iterated) throw new SippError('query.tokens (or deltas) can be iterated only once', 'invalid_argument');
    this._iterated = true;
    this._list = list;
    return {
      next: () => this._pull() || new Promise((resolve, reject) => { this._waiter = { resolve, reject }; }),
      return: () => {
        this.cancel();
        this._next = Infinity;
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]() { return this; },
    };
  }
}

/** A Query that has already failed (bad options, closed client): same shape, no request. */
function failedQuery(endpointName, err) {
  const q = new Query(endpointName);
  q._fail(err);
  return q;
}

/** The parsed message of a chat as the response's fields: text is the content. */
function chatResult(message, finishReason) {
  const toolCalls = message.tool_calls || [];
  return {
    text: message.content || '',
    reasoning: message.reasoning_content || '',
    toolCalls,
    finishReason: toolCalls.length && finishReason === 'stop' ? 'tool_calls' : finishReason,
  };
}

export { Query, failedQuery, chatResult };
