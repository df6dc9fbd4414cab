/*
 * chat_media.h: the images and audio of a chat (internal).
 *
 * A chat's message content parts {"type":"image_url","image_url":{"url":"data:...;base64,..."}} and
 * {"type":"input_audio","input_audio":{"data":"...","format":"wav"}} are decoded here, checked
 * against the engine's limits (sipp_schema_limits: bytes, an image's pixels read from its header
 * before anything decodes it, items per request), and replaced in the messages by a text part
 * holding SIPP_MEDIA_MARKER, as llama-server does: the template renders the marker where the item
 * goes, and the model layer (mmproj.c) turns each marker into the item's tokens.
 */
#ifndef SIPP_CHAT_MEDIA_H
#define SIPP_CHAT_MEDIA_H

#include <jansson.h>

#include "model/mmproj.h"
#include "sipp.h"

/* Takes the media out of messages (in place, in order) into *items (malloc'ed, *n of them; free
 * with sipp_media_bytes_free). The model says which kinds it takes (its projector). Errors are
 * SIPP_ERR_INVALID_ARGUMENT naming the part: 'messages[1].content[0].image_url.url' ... */
sipp_status chat_media_extract(json_t *messages, const sipp_schema_limits *limits, const sipp_model *m,
                               sipp_media_bytes **items, size_t *n, char *err);

#endif
