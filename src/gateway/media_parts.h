/*
 * media_parts.h: images and audio in chats (media_parts.c): the content parts every route translates
 * its API's media into, and what a part may hold. Depends on nothing else in the gateway.
 */
#ifndef SIPP_GATEWAY_MEDIA_PARTS_H
#define SIPP_GATEWAY_MEDIA_PARTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Ollama's images carry no media type; libsipp reads the type from the bytes. */
#define GW_MEDIA_TYPE_UNKNOWN "application/octet-stream"

/* Why an image URL cannot be given to a model, or NULL when it can: a data: URL, and an http(s) one
 * when fetch ([media] fetch: the gateway fetches it, media_fetch.c). The reason reads after a
 * field's name: "'FIELD' is ...". */
const char *gw_image_url_refusal(const char *url, bool fetch);
/* Whether url is an http:// or https:// URL (any case): one the gateway would fetch. */
bool gw_image_url_remote(const char *url);
/* url as a message may show it (cap bytes, NUL-terminated, cut at a character boundary): without
 * user:password@, its query and fragment replaced by "?..." (either may carry a token), control
 * characters as '?'. */
void gw_media_url_redact(const char *url, char *out, size_t cap);
/* Whether format is an audio format libsipp decodes (wav, mp3, flac). */
bool gw_audio_format_known(const char *format);
/* The audio format (wav, mp3, flac) of a media type type[0..len) such as audio/wav or audio/mpeg, or
 * NULL when it is no audio type libsipp decodes. */
const char *gw_audio_format_of_type(const char *type, size_t len);
/* chat's image part for a URL: {"type": "image_url", "image_url": {"url": url}}. New reference. */
json_t *gw_image_part(const char *url);
/* chat's image part for base64 data of a media type (NULL: GW_MEDIA_TYPE_UNKNOWN), as a data URL. */
json_t *gw_image_part_base64(const char *media_type, const char *data);
/* chat's audio part: {"type": "input_audio", "input_audio": {"data": data, "format": format}}. */
json_t *gw_audio_part(const char *data, const char *format);
/* Appends text[0..len) to parts as a text part; nothing when len is 0. */
void gw_parts_add_text(json_t *parts, const char *text, size_t len);

#endif
