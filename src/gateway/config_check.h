/*
 * config_check.h: what `sipp serve --check` finds beyond the file's own keys (config_check.c).
 * Depends only on config.h.
 */
#ifndef SIPP_GATEWAY_CONFIG_CHECK_H
#define SIPP_GATEWAY_CONFIG_CHECK_H

#include <stdbool.h>

#include "gateway/config.h"
#include "util/util.h"

/* Checks a validated configuration against what it names, reading only file headers: every local
 * target's model as a load would check it first, its projector (a projector, of the model's width),
 * and with aliases, aliases that can never route (one that is another target's name, or that an
 * earlier alias of another target always catches: a mistake --check names, which a running server
 * survives, so a reload leaves it out). Problems are appended to errs as "CONFIG: target 'NAME': ..."
 * lines; false when there was any. */
bool gw_config_check_deep(const gw_config *cfg, const char *config, bool aliases, sipp_buf *errs);

#endif
