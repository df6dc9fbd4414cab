/*
 * chat_media.c: a chat's images and audio, decoded and checked (see chat_media.h).
 */
#include "chat/chat_media.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/audio_decode.h"
#include "model/model.h"
#include "util/base64.h"
#include "util/media_sniff.h"
#include "util/util.h"

#define DATA_PREFIX "data:"
#define BASE64_MARK ";base64,"
#define WHERE_MAX 96

typedef struct media_list {
    sipp_media_bytes *items;
    size_t n, cap;
    size_t decoded; /* the items' decoded bytes together */
    const sipp_schema_limits *limits;
    const sipp_model *m;
} media_list;

/* Decodes base64 text (b64, len) as the item at `where`, within the byte limit. */
static sipp_status decode(media_list *l, const char *where, const char *b64, size_t len, unsigned char **out,
                          size_t *n_out, char *err) {
    size_t max = l->limits->image_max_bytes;
    if (len / 4 * 3 > max + 3)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is about %zu bytes, over the limit of %zu ([limits] image_max_bytes)", where,
                         len / 4 * 3, max);
    unsigned char *buf = malloc(sipp_base64_max_decoded(len));
    if (!buf) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    if (!sipp_base64_decode(b64, len, buf, n_out)) {
        free(buf);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' is not valid base64", where);
    }
    if (*n_out > max) {
        free(buf);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is %zu bytes, over the limit of %zu ([limits] image_max_bytes)", where, *n_out,
                         max);
    }
    *out = buf;
    return SIPP_OK;
}

#define IMAGE_CHANNELS 3 /* libmtmd keeps an image as 8-bit RGB */
#define MB(x) ((x) >> 20)

/* What an image or audio part's bytes will take decoded, read from the header alone: *decoded is
 * the bytes; an error names the part and what its header claims. */
static sipp_status measure_item(media_list *l, const char *where, const unsigned char *data, size_t n,
                                bool audio, size_t *decoded, char *err) {
    sipp_media_info info;
    const char *kind = audio ? "audio clip (WAV, MP3 or FLAC)" : "image (PNG, JPEG, GIF or BMP)";
    bool sniffed = sipp_media_sniff(data, n, &info);
    if (info.kind == SIPP_MEDIA_UNKNOWN || sipp_media_is_audio(info.kind) != audio)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' is not an %s%s%s", where, kind,
                         info.kind ? "; it looks like " : "",
                         info.kind ? sipp_media_kind_name(info.kind) : "");
    if (!sniffed)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is a %s whose header gives no size (0 x 0, or the file ends before it says); "
                         "send the whole image",
                         where, sipp_media_kind_name(info.kind));
    if (audio) {
        int rate = sipp_mmproj_audio_rate(l->m->mmproj);
        sipp_audio_info ai;
        sipp_status st = sipp_audio_probe(data, n, rate > 0 ? (uint32_t)rate : SIPP_AUDIO_RATE_MIN,
                                          l->limits->max_audio_seconds, where, &ai, err);
        *decoded = (size_t)ai.frames * sizeof(float);
        return st;
    }
    if ((uint64_t)info.width * info.height > l->limits->image_max_pixels)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is %ux%u pixels, over the limit of %zu ([limits] image_max_pixels)", where,
                         info.width, info.height, l->limits->image_max_pixels);
    *decoded = (size_t)info.width * info.height * IMAGE_CHANNELS;
    return SIPP_OK;
}

/* Checks the model takes the kind of item, and that the request's media stay within the limits. */
static sipp_status check_item(media_list *l, const char *where, bool audio, size_t decoded, char *err) {
    size_t max = l->limits->media_max_decoded_bytes;
    if (l->n >= l->limits->media_max_items)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s': the chat has more than %zu images and audio clips ([limits] media_max_items)",
                         where, l->limits->media_max_items);
    if (!l->m->mmproj)
        return sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "'%s' is an %s, but model '%s' was loaded without a projector; load it with its mmproj "
            "file (--mmproj, target key mmproj)",
            where, audio ? "audio clip" : "image", l->m->path);
    if (audio ? !l->m->info.audio : !l->m->info.vision)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' is an %s, but projector '%s' takes %s only",
                         where, audio ? "audio clip" : "image", l->m->info.mmproj,
                         audio ? "images" : "audio");
    if (decoded > max || l->decoded > max - decoded)
        return sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "'%s' decodes to %zu MB, which brings the request's media to %zu MB, over the limit of "
            "%zu MB ([limits] media_max_decoded_mb); send fewer or smaller images or clips",
            where, MB(decoded), MB(l->decoded + decoded), MB(max));
    return SIPP_OK;
}

/* Checks decoded bytes are what the part says (an image within the pixel limit, or audio within the
 * length limit, measured from the header) and what the model takes, and adds them to the list.
 * Takes data. */
static sipp_status add_item(media_list *l, const char *where, unsigned char *data, size_t n, bool audio,
                            char *err) {
    size_t decoded = 0;
    sipp_status st = measure_item(l, where, data, n, audio, &decoded, err);
    if (st == SIPP_OK) st = check_item(l, where, audio, decoded, err);
    if (st == SIPP_OK && l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        sipp_media_bytes *grown = realloc(l->items, cap * sizeof *grown);
        if (!grown)
            st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        else {
            l->items = grown;
            l->cap = cap;
        }
    }
    if (st != SIPP_OK) {
        free(data);
        return st;
    }
    l->decoded += decoded;
    l->items[l->n++] = (sipp_media_bytes){.data = data,
                                          .len = n,
                                          .audio = audio,
                                          .decoded = decoded,
                                          .max_seconds = l->limits->max_audio_seconds};
    return SIPP_OK;
}

/* An image_url part: its url (a string, or {"url": ...}) must be a base64 data: URL. */
static sipp_status image_part(media_list *l, json_t *part, const char *where, char *err) {
    json_t *iu = json_object_get(part, "image_url");
    json_t *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
    char at[WHERE_MAX + 32];
    snprintf(at, sizeof at, "%s.image_url%s", where, json_is_object(iu) ? ".url" : "");
    if (!json_is_string(url))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' must be a URL string", at);
    const char *u = json_string_value(url);
    const char *mark = strstr(u, BASE64_MARK);
    if (strncmp(u, DATA_PREFIX, strlen(DATA_PREFIX)) != 0 || !mark)
        return sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "'%s' must be a data: URL with base64 data (\"data:image/png;base64,...\"); sipp does "
            "not fetch images from the network",
            at);
    const char *b64 = mark + strlen(BASE64_MARK);
    unsigned char *data;
    size_t n;
    sipp_status st = decode(l, at, b64, json_string_length(url) - (size_t)(b64 - u), &data, &n, err);
    return st == SIPP_OK ? add_item(l, at, data, n, false, err) : st;
}

/* An input_audio part: {"data": base64, "format": "wav" | "mp3" | "flac"}. */
static sipp_status audio_part(media_list *l, json_t *part, const char *where, char *err) {
    json_t *ia = json_object_get(part, "input_audio");
    json_t *data = json_object_get(ia, "data"), *format = json_object_get(ia, "format");
    char at[WHERE_MAX + 32];
    snprintf(at, sizeof at, "%s.input_audio", where);
    if (!json_is_object(ia) || !json_is_string(data))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' must be {\"data\": base64, \"format\": \"wav\"}", at);
    const char *f = json_is_string(format) ? json_string_value(format) : "";
    if (strcmp(f, "wav") != 0 && strcmp(f, "mp3") != 0 && strcmp(f, "flac") != 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s.format' must be wav, mp3 or flac", at);
    unsigned char *bytes;
    size_t n;
    snprintf(at, sizeof at, "%s.input_audio.data", where);
    sipp_status st = decode(l, at, json_string_value(data), json_string_length(data), &bytes, &n, err);
    return st == SIPP_OK ? add_item(l, at, bytes, n, true, err) : st;
}

/* messages[i].content[j]: a media part becomes a text part holding the marker. */
static sipp_status take_part(media_list *l, json_t *part, size_t i, size_t j, char *err) {
    json_t *type = json_object_get(part, "type");
    if (!json_is_string(type)) return SIPP_OK; /* the chat check names it */
    const char *t = json_string_value(type);
    bool image = strcmp(t, "image_url") == 0, audio = strcmp(t, "input_audio") == 0;
    if (!image && !audio) return SIPP_OK;
    char where[WHERE_MAX];
    snprintf(where, sizeof where, "messages[%zu].content[%zu]", i, j);
    sipp_status st = image ? image_part(l, part, where, err) : audio_part(l, part, where, err);
    if (st != SIPP_OK) return st;
    json_object_clear(part);
    json_object_set_new(part, "type", json_string("text"));
    json_object_set_new(part, "text", json_string(SIPP_MEDIA_MARKER));
    return SIPP_OK;
}

sipp_status chat_media_extract(json_t *messages, const sipp_schema_limits *limits, const sipp_model *m,
                               sipp_media_bytes **items, size_t *n, char *err) {
    *items = NULL;
    *n = 0;
    media_list l = {.limits = limits, .m = m};
    size_t i, j;
    json_t *msg, *part;
    sipp_status st = SIPP_OK;
    json_array_foreach(messages, i, msg) {
        json_t *content = json_object_get(msg, "content");
        if (!json_is_array(content)) continue;
        json_array_foreach(content, j, part) {
            if (json_is_object(part) && (st = take_part(&l, part, i, j, err)) != SIPP_OK) break;
        }
        if (st != SIPP_OK) break;
    }
    if (st != SIPP_OK) {
        sipp_media_bytes_free(l.items, l.n);
        return st;
    }
    *items = l.items;
    *n = l.n;
    return SIPP_OK;
}
