/*
 * stop_filter.h: turns generated token pieces into text a client may see (internal).
 *
 * Two things hold text back. A UTF-8 character can be split across tokens (byte-fallback tokens),
 * so a trailing incomplete character waits for the next piece. A stop string can also be split
 * across tokens, so a tail that could still become a stop string waits until it either completes
 * (the text before it is emitted, the stop string never is) or cannot anymore. Released text is
 * always valid UTF-8: bytes that cannot be part of a character (a random or broken model can emit
 * them) become U+FFFD.
 */
#ifndef SIPP_ENGINE_STOP_FILTER_H
#define SIPP_ENGINE_STOP_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#include "util/util.h"

typedef struct sipp_output {
    sipp_buf pending; /* generated, not yet released */
    char **stop;
    size_t n_stop;
    size_t max_stop_len;
    const char *matched; /* the stop string that completed (one of stop), NULL while none has */
} sipp_output;

/* Copies the stop strings (empty ones are ignored). False on allocation failure. */
bool sipp_output_init(sipp_output *o, const char *const *stop, size_t n_stop);
void sipp_output_free(sipp_output *o);

/* Adds a piece. Appends to `emit` the text that can be released now. Returns true when a stop
 * string completed: everything before it was released and the generation should stop. */
bool sipp_output_push(sipp_output *o, const char *piece, size_t len, sipp_buf *emit);

/* At the end of generation: releases what was held back; an incomplete trailing character becomes
 * U+FFFD so that the text stays valid UTF-8. */
void sipp_output_flush(sipp_output *o, sipp_buf *emit);

#endif
