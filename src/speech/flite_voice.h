/*
 * flite_voice.h: Debian's flite as a voice that needs no model file (internal to src/speech).
 */
#ifndef SIPP_SPEECH_FLITE_VOICE_H
#define SIPP_SPEECH_FLITE_VOICE_H

#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

/* The voices linked in, by flite's short names; NULL past the last. */
const char *sipp_flite_voice_name(size_t i);
/* The rate a voice speaks at, 0 when there is no voice of that name. */
int sipp_flite_voice_rate(const char *name);
/* The known voices as "kal, kal16, ..." in buf. */
void sipp_flite_voice_list(char *buf, size_t cap);

/* Speaks one piece of text with the named voice, stretched to play at speed (flite's own duration
 * control, so the pitch stays). *out is malloc'ed (*n samples, possibly 0 for text with nothing to
 * say), at *rate. Serialised process-wide: flite keeps global state. err: SIPP_ERROR_SIZE bytes. */
sipp_status sipp_flite_speak(const char *voice, const char *text, float speed, int16_t **out, size_t *n,
                             int *rate, char *err);

#endif
