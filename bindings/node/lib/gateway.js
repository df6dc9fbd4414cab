'use strict';
/**
 * The gateway endpoint: bindings/web/gateway.js, shared with the browser package; this binding
 * opens it with NODE_PROFILE (its User-Agent, the chat-library options passed to the gateway).
 */
module.exports = require('./shared').shared('gateway');
