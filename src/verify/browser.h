/*
 * browser.h: the browser as a backend of verify (browser.c).
 */
#ifndef SIPP_VERIFY_BROWSER_H
#define SIPP_VERIFY_BROWSER_H

#include <stdbool.h>

#include "sipp.h"
#include "verify/verify_types.h"

/* "browser": the WebAssembly runtime (make web) in headless Chromium, compared like a backend
 * (browser.c). Same contract as verify_run_backend. */
bool verify_is_browser(const char *name);
sipp_status verify_run_browser(const verify_config *cfg, const verify_prompt *prompts, int n_prompts,
                               const verify_result *ref, verify_result *out, char *err);

#endif
