'use strict';
/** The option and input checks and the chat options' wire names: bindings/web/options.js, shared with the browser package. */
module.exports = require('./shared').shared('options');
