'use strict';
/** Query, failedQuery, chatResult: bindings/web/query.js, shared with the browser package. */
module.exports = require('./shared').shared('query');
