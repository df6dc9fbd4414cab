/*
 * schema_convert.h: llama.cpp's JSON-schema-to-GBNF conversion with a time budget, on a thread of
 * its own (schema_convert.c).
 */
#ifndef SIPP_CHAT_SCHEMA_CONVERT_H
#define SIPP_CHAT_SCHEMA_CONVERT_H

#include "sipp.h"

/* chat_schema_to_grammar (chat_bridge.h) run on a worker thread, waited for until deadline_ms
 * (sipp_now_ms's clock). Past it: SIPP_ERR_TIMEOUT with a message naming field and
 * budget_ms (the [limits] schema_convert_ms that set the deadline); the worker finishes alone and
 * frees what it made. *grammar (malloc'ed) on success. */
sipp_status chat_schema_convert_until(const char *schema_json, const char *field, double deadline_ms,
                                      int budget_ms, char **grammar, char *err);

#endif
