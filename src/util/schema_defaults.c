/*
 * schema_defaults.c: the schema and grammar limits a request is held to unless its engine or the
 * gateway's [limits] set others (sipp_schema_limits_default, sipp.h): none that a real client's
 * request meets (an agent's 20 tools with nested schemas pass), all far below what stalls llama.cpp's
 * converter or grammar sampler (docs/gateway.md, [limits]).
 *
 * In util, the lowest layer, since every layer that builds a grammar reads them (the chat layer's
 * sipp_json_schema_to_grammar as well as the engine); in a file of their own rather than beside the
 * checks (schema_limits.c), which need jansson, since the browser runtime's engine has the limits too.
 */
#include <stddef.h>

#include "sipp.h"

#define SCHEMA_KIB 1024u
#define DEFAULT_SCHEMA_MAX_BYTES (512u * SCHEMA_KIB)
#define DEFAULT_SCHEMA_MAX_DEPTH 64u
#define DEFAULT_SCHEMA_MAX_PROPERTIES 128u
#define DEFAULT_SCHEMA_MAX_TOTAL_PROPERTIES 2048u
#define DEFAULT_SCHEMA_MAX_ENUM 256u
#define DEFAULT_SCHEMA_MAX_REFS 256u
#define DEFAULT_GRAMMAR_MAX_BYTES (64u * SCHEMA_KIB)
#define DEFAULT_GRAMMAR_MAX_ALTERNATIVES 256u
#define DEFAULT_SCHEMA_CONVERT_MS 5000
#define DEFAULT_IMAGE_MAX_BYTES ((size_t)20 << 20)     /* OpenAI's limit for one image */
#define DEFAULT_IMAGE_MAX_PIXELS ((size_t)8192 * 8192) /* llama-server decodes what stb takes */
#define DEFAULT_MEDIA_MAX_ITEMS 16
#define DEFAULT_MAX_AUDIO_SECONDS 600.0               /* ten minutes: 38 MB of samples at 16 kHz */
#define DEFAULT_MEDIA_MAX_DECODED ((size_t)512 << 20) /* two 8192 x 8192 images, or one and much audio */

sipp_schema_limits sipp_schema_limits_default(void) {
    return (sipp_schema_limits){.schema_max_bytes = DEFAULT_SCHEMA_MAX_BYTES,
                                .schema_max_depth = DEFAULT_SCHEMA_MAX_DEPTH,
                                .schema_max_properties = DEFAULT_SCHEMA_MAX_PROPERTIES,
                                .schema_max_total_properties = DEFAULT_SCHEMA_MAX_TOTAL_PROPERTIES,
                                .schema_max_enum = DEFAULT_SCHEMA_MAX_ENUM,
                                .schema_max_refs = DEFAULT_SCHEMA_MAX_REFS,
                                .grammar_max_bytes = DEFAULT_GRAMMAR_MAX_BYTES,
                                .grammar_max_alternatives = DEFAULT_GRAMMAR_MAX_ALTERNATIVES,
                                .schema_convert_ms = DEFAULT_SCHEMA_CONVERT_MS,
                                .image_max_bytes = DEFAULT_IMAGE_MAX_BYTES,
                                .image_max_pixels = DEFAULT_IMAGE_MAX_PIXELS,
                                .media_max_items = DEFAULT_MEDIA_MAX_ITEMS,
                                .max_audio_seconds = DEFAULT_MAX_AUDIO_SECONDS,
                                .media_max_decoded_bytes = DEFAULT_MEDIA_MAX_DECODED};
}
