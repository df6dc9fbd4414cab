/*
 * media_parts.c: images and audio in chats, as every route hands them to libsipp.
 *
 * Each API has a shape of its own for an image (OpenAI's image_url part, Responses' input_image,
 * Anthropic's base64 source, Ollama's bare base64 strings); each route translates it into chat's
 * image_url part with a data: URL, which libsipp decodes, checks against [limits] image_max_bytes,
 * image_max_pixels and media_max_items, and gives the target's projector (sipp_model_params.mmproj).
 * Audio is chat's input_audio part. An http(s) image URL is taken only with [media] fetch = true:
 * the gateway then fetches it for a local target before generating (media_fetch.c), bounded, from
 * public addresses only, and hands libsipp the bytes as a data: URL. Off (the default), it is
 * refused where the route reads it, naming the field and the setting, so a request never makes the
 * server reach an address on a client's behalf. Any other scheme (file:, ftp:, ...) is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/media_parts.h"
#include "util/util.h"

#define DATA_SCHEME "data:"
#define REDACTED "?..." /* a query or fragment in a URL a message names: it may carry a token */

static const char *const AUDIO_FORMATS[] = {"wav", "mp3", "flac", NULL};

static bool has_scheme(const char *url, const char *scheme) {
    return strncasecmp(url, scheme, strlen(scheme)) == 0;
}

bool gw_image_url_remote(const char *url) {
    return has_scheme(url, "http://") || has_scheme(url, "https://");
}

const char *gw_image_url_refusal(const char *url, bool fetch) {
    if (has_scheme(url, DATA_SCHEME)) return NULL;
    if (gw_image_url_remote(url))
        return fetch
                   ? NULL
                   : "an http(s) URL: fetching remote images is off on this server ([media] fetch = true in "
                     "its config turns it on); send the image inline as a data URL "
                     "(data:image/png;base64,...)";
    return fetch
               ? "neither a data URL nor an http(s) URL: send the image inline as data:image/png;base64,... "
                 "or give its http(s) URL"
               : "not a data URL: send the image inline as data:image/png;base64,... (fetching URLs is off "
                 "on this server)";
}

/* Appends s[0..n) to out (cap bytes, *len used, room kept for the NUL), control bytes as '?'. */
static void put(char *out, size_t cap, size_t *len, const char *s, size_t n) {
    for (size_t i = 0; i < n && *len + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[(*len)++] = c < ' ' || c == 0x7f ? '?' : (char)c;
    }
    out[*len] = '\0';
}

void gw_media_url_redact(const char *url, char *out, size_t cap) {
    if (!cap) return;
    size_t len = 0, n = strlen(url);
    char *tmp = malloc(n + sizeof REDACTED);
    if (!tmp) {
        out[0] = '\0';
        return;
    }
    const char *p = url, *sep = strstr(url, "://");
    if (sep && (size_t)(sep - url) < strcspn(url, "/?#")) { /* scheme://[userinfo@]host... */
        p = sep + 3;
        put(tmp, n + sizeof REDACTED, &len, url, (size_t)(p - url));
        size_t authority = strcspn(p, "/?#");
        for (size_t i = authority; i > 0; i--)
            if (p[i - 1] == '@') { /* user:password@ goes */
                p += i;
                break;
            }
    }
    size_t kept = strcspn(p, "?#");
    put(tmp, n + sizeof REDACTED, &len, p, kept);
    if (p[kept]) put(tmp, n + sizeof REDACTED, &len, REDACTED, strlen(REDACTED));
    sipp_strlcpy(out, tmp, cap); /* at a UTF-8 character boundary */
    free(tmp);
}

bool gw_audio_format_known(const char *format) {
    for (const char *const *f = AUDIO_FORMATS; *f; f++)
        if (strcmp(*f, format) == 0) return true;
    return false;
}

json_t *gw_image_part(const char *url) {
    return json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url", "url", url);
}

json_t *gw_image_part_base64(const char *media_type, const char *data) {
    const char *type = media_type ? media_type : GW_MEDIA_TYPE_UNKNOWN;
    size_t n = strlen(DATA_SCHEME) + strlen(type) + strlen(";base64,") + strlen(data) + 1;
    char *url = malloc(n);
    if (!url) return NULL;
    snprintf(url, n, DATA_SCHEME "%s;base64,%s", type, data);
    json_t *part = gw_image_part(url);
    free(url);
    return part;
}

json_t *gw_audio_part(const char *data, const char *format) {
    return json_pack("{s:s, s:{s:s, s:s}}", "type", "input_audio", "input_audio", "data", data, "format",
                     format);
}

void gw_parts_add_text(json_t *parts, const char *text, size_t len) {
    if (len) json_array_append_new(parts, json_pack("{s:s, s:s%}", "type", "text", "text", text, len));
}

const char *gw_audio_format_of_type(const char *type, size_t len) {
    static const struct {
        const char *type, *format;
    } types[] = {
        {"audio/wav", "wav"},  {"audio/x-wav", "wav"}, {"audio/wave", "wav"},  {"audio/vnd.wave", "wav"},
        {"audio/mpeg", "mp3"}, {"audio/mp3", "mp3"},   {"audio/flac", "flac"}, {"audio/x-flac", "flac"},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strlen(types[i].type) == len && strncasecmp(types[i].type, type, len) == 0)
            return types[i].format;
    return NULL;
}
