'use strict';
/** SippError, toSippError, invalid: bindings/web/errors.js, shared with the browser package. */
module.exports = require('./shared').shared('errors');
