/**
 * The errors of the sipp package. Every error it raises or rejects with is a SippError whose
 * `code` is libsipp's status name ('invalid_argument', 'not_found', 'model_error', 'backend_error',
 * 'context_full', 'busy', 'cancelled', 'timeout', 'no_memory', 'closed', 'internal_error') or
 * 'gateway' for an HTTP failure of a gateway endpoint, and whose message is libsipp's own.
 *
 * One source for the browser package and the Node binding (bindings/node/lib/errors.js re-exports
 * this module with require()): environment-neutral, no Node or browser API.
 */

class SippError extends Error {
  /**
   * @param {string} message one line: the input, the problem, the next step
   * @param {string} [code] libsipp's status name, or 'gateway'
   * @param {object} [extra] more properties (httpStatus for gateway errors)
   */
  constructor(message, code = 'error', extra = {}) {
    super(message);
    this.name = 'SippError';
    this.code = code;
    Object.assign(this, extra);
  }
}

/** A SippError from the addon's Error (code = status name) or any other thrown value. */
function toSippError(err) {
  if (err instanceof SippError) return err;
  if (err instanceof Error) {
    const e = new SippError(err.message, typeof err.code === 'string' ? err.code : 'internal_error');
    if (err.stack) e.stack = err.stack.replace(/^Error/, 'SippError');
    return e;
  }
  return new SippError(String(err), 'internal_error');
}

const invalid = (message) => new SippError(message, 'invalid_argument');

export { SippError, toSippError, invalid };
