/*
 * transcription.h: OpenAI's audio routes (/v1/audio/transcriptions and /v1/audio/translations) on a
 * target whose kind transcribes (transcription.c): a whisper.cpp model.
 */
#ifndef SIPP_GATEWAY_TRANSCRIPTION_H
#define SIPP_GATEWAY_TRANSCRIPTION_H

#include <jansson.h>
#include <stdbool.h>

#include "gateway/connection.h"
#include "gateway/multipart.h"

/* Whether t's kind transcribes clips itself (a whisper.cpp model); false for the others, whose
 * audio route turns the clip into a chat (a llama model with an audio projector). */
bool gw_transcription_served(const gw_target *t);

/* Answers the form (its fields as JSON, routes_audio.c) on the target its "model" names: the
 * fields checked and parsed, the target admitted and loaded, the clip transcribed (translated to
 * English when translate) on a thread of its own, cancelled when the client goes away, and the
 * answer rendered in the response format, or streamed as transcript.text.delta / .done events.
 * Replies always. */
void gw_transcription_run(gw_call *call, const gw_form *form, json_t *fields, bool translate);

#endif
