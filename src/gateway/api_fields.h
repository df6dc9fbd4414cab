/*
 * api_fields.h: what each API's request fields get (api_fields.c): honored, ignored (named in the
 * sipp-ignored response header) or refused with a 400 naming them. docs/api-fields.md is the same
 * table in prose, and tests/integration/test_api_fields.py checks every row of it against a
 * running gateway.
 */
#ifndef SIPP_GATEWAY_API_FIELDS_H
#define SIPP_GATEWAY_API_FIELDS_H

#include <jansson.h>
#include <stdbool.h>

#include "gateway/connection.h"

typedef enum gw_field_decision {
    GW_FIELD_HONORED, /* changes what the model is given or how it samples, and is applied */
    GW_FIELD_IGNORED, /* bookkeeping or a hint: accepted and named in sipp-ignored */
    GW_FIELD_REFUSED, /* would change the output and cannot be honoured: a 400 naming it */
} gw_field_decision;

typedef struct gw_field_rule {
    const char *name;
    gw_field_decision decision;
    const char *why; /* ignored: why the output is the same without it; refused: what to do instead */
} gw_field_rule;

/* The top-level fields of each API's request body; each table ends with {NULL}. */
extern const gw_field_rule gw_fields_responses[];
extern const gw_field_rule gw_fields_messages[];
extern const gw_field_rule gw_fields_ollama_chat[];
extern const gw_field_rule gw_fields_ollama_generate[];
extern const gw_field_rule gw_fields_transcriptions[]; /* the form fields of /v1/audio/transcriptions */
extern const gw_field_rule gw_fields_whisper[];        /* those of the audio routes on a whisper.cpp target */
extern const gw_field_rule gw_fields_speech[];         /* /v1/audio/speech */

/* Checks every top-level field of root against rules: an ignored field is named in sipp-ignored, a
 * refused one (when not null) or one in no row is a 400 naming it (api names the route). False
 * after replying. */
bool gw_fields_check(gw_call *call, json_t *root, const gw_field_rule *rules, const char *api);

/* Names something the server accepted without acting on it (a field, "include[0]", "tools[4]") in
 * the call's sipp-ignored header, once; the gateway's debug log (SIPP_LOG=debug) lists them too. */
void gw_ignored_add(gw_call *call, const char *name);
/* The same with a printf-style name. */
void gw_ignored_addf(gw_call *call, const char *fmt, ...) SIPP_PRINTF(2, 3);

#endif
