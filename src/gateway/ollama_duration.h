/*
 * ollama_duration.h: Ollama's keep_alive values (ollama_duration.c), read the way Ollama reads them.
 */
#ifndef SIPP_GATEWAY_OLLAMA_DURATION_H
#define SIPP_GATEWAY_OLLAMA_DURATION_H

#include <stdbool.h>

#define GW_DURATION_MAX_S 9223372036.854775807 /* Go's limit: int64 nanoseconds */

/* A Go duration ("5m", "10s", "1h30m", "1.5h", "300ms", "0", "-1m"; units ns, us, µs, ms, s, m, h)
 * as seconds. False, leaving *seconds alone, for anything else or beyond about 290 years. */
bool gw_parse_go_duration(const char *s, double *seconds);

#endif
