/*
 * whisper_info_json.h: a whisper.cpp model's header (sipp_whisper_inspect) as JSON, written once for
 * `sipp models info --json` and sipp verify's manifests.
 */
#ifndef SIPP_UTIL_WHISPER_INFO_JSON_H
#define SIPP_UTIL_WHISPER_INFO_JSON_H

#include <jansson.h>

#include "sipp.h"

/* {"size", "multilingual", "n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
 *  "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype", "ftype_name",
 *  "qnt_version", "n_tensors"}: a new reference (NULL when out of memory). */
json_t *sipp_whisper_info_json(const sipp_whisper_info *w);

#endif
