/*
 * media_fetch.h: the images a chat names by http(s) URL, fetched for a local target before it
 * generates ([media] in the config; media_fetch.c).
 */
#ifndef SIPP_GATEWAY_MEDIA_FETCH_H
#define SIPP_GATEWAY_MEDIA_FETCH_H

#include <stdbool.h>

#include "gateway/connection.h"
#include "gateway/request_parse.h"

/* Replaces each http(s) image URL of g's chat by a data: URL of the image fetched from it, on the
 * call's thread, within [media] fetch_max_bytes each and fetch_timeout_ms for all, from public
 * addresses only (unless fetch_allow_private). True when there was none or all were fetched;
 * false after replying 400 naming the URL, what went wrong and what to do (also when [media]
 * fetch is off, naming the field and the setting). */
bool gw_media_fetch(gw_call *call, gw_gen *g);

#endif
