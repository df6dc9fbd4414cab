/*
 * whisper_info_json.c: a whisper.cpp model's header as JSON (whisper_info_json.h).
 */
#include "util/whisper_info_json.h"

#include <stddef.h>

/* The header's sizes, in the file's order. */
static const struct {
    const char *key;
    size_t offset;
} sizes[] = {
    {"n_vocab", offsetof(sipp_whisper_info, n_vocab)},
    {"n_audio_ctx", offsetof(sipp_whisper_info, n_audio_ctx)},
    {"n_audio_state", offsetof(sipp_whisper_info, n_audio_state)},
    {"n_audio_head", offsetof(sipp_whisper_info, n_audio_head)},
    {"n_audio_layer", offsetof(sipp_whisper_info, n_audio_layer)},
    {"n_text_ctx", offsetof(sipp_whisper_info, n_text_ctx)},
    {"n_text_state", offsetof(sipp_whisper_info, n_text_state)},
    {"n_text_head", offsetof(sipp_whisper_info, n_text_head)},
    {"n_text_layer", offsetof(sipp_whisper_info, n_text_layer)},
    {"n_mels", offsetof(sipp_whisper_info, n_mels)},
};

json_t *sipp_whisper_info_json(const sipp_whisper_info *w) {
    json_t *o = json_pack("{s:s, s:b}", "size", w->size_name, "multilingual", w->multilingual);
    if (!o) return NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        json_object_set_new(o, sizes[i].key,
                            json_integer(*(const int32_t *)((const char *)w + sizes[i].offset)));
    json_object_set_new(o, "ftype", json_integer(w->ftype));
    json_object_set_new(o, "ftype_name", json_string(w->ftype_name));
    json_object_set_new(o, "qnt_version", json_integer(w->qnt_version));
    json_object_set_new(o, "n_tensors", json_integer(w->n_tensors));
    return o;
}
