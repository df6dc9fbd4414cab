/*
 * fields.c: the field tables of the Responses, Messages and Ollama routes (the sipp-ignored header
 * itself is http/connection.c's gw_ignored_add).
 *
 * The honesty rule (docs/api-fields.md): a field that changes what the model is given or how it
 * samples is honoured or refused with a 400 that names it; a field that only carries a client's
 * bookkeeping, or a hint a server may ignore (caching, storage, billing tiers), is accepted and
 * named in the one sipp-ignored response header, because real agents send many of them and
 * refusing them locks the agents out. A field in no row is refused as unknown, so a field the
 * vendors add later is a 400 until it has a row here and in docs/api-fields.md.
 *
 * Chat completions keeps its table beside its decoder (request_parse.c, FIELDS); the decisions of
 * nested fields (reasoning.summary, thinking.display, include entries, built-in tools) are made
 * where the route translates them, and named with gw_ignored_add.
 */
#include <stdio.h>
#include <string.h>

#include "gateway/api/api.h"

#define HONORED(n)                                                                                           \
    { n, GW_FIELD_HONORED, NULL }
#define IGNORED(n, why)                                                                                      \
    { n, GW_FIELD_IGNORED, why }
#define REFUSED(n, why)                                                                                      \
    { n, GW_FIELD_REFUSED, why }

#define WHY_BOOKKEEPING "client bookkeeping; the output is the same without it"
#define WHY_CACHE "a cache hint: sipp reuses a shared prompt prefix by itself"
#define WHY_TIER "the provider's billing or latency tier"
#define WHY_USER "an end-user id for the provider's abuse monitoring"

const gw_field_rule gw_fields_responses[] = {
    HONORED("model"),
    HONORED("input"),
    HONORED("instructions"),
    HONORED("max_output_tokens"),
    HONORED("temperature"),
    HONORED("top_p"),
    HONORED("stream"),
    HONORED("stream_options"),
    HONORED("store"),
    HONORED("previous_response_id"),
    HONORED("text"),
    HONORED("tools"),
    HONORED("tool_choice"),
    HONORED("parallel_tool_calls"),
    HONORED("reasoning"),
    HONORED("include"),
    HONORED("truncation"),
    HONORED("max_tool_calls"), /* the MCP calls a response runs (responses_mcp.h) */
    IGNORED("metadata", WHY_BOOKKEEPING),
    IGNORED("client_metadata", WHY_BOOKKEEPING),
    IGNORED("user", WHY_USER),
    IGNORED("safety_identifier", WHY_USER),
    IGNORED("prompt_cache_key", WHY_CACHE),
    IGNORED("prompt_cache_retention", WHY_CACHE),
    IGNORED("service_tier", WHY_TIER),
    IGNORED("context_management",
            "compaction past a threshold: sipp never compacts, a prompt over the context is a 400"),
    REFUSED("background", "responses run while the request is open; leave it out"),
    REFUSED("conversation", "conversations are not stored here; use previous_response_id"),
    REFUSED("prompt", "stored prompt templates live at the provider; send instructions and input"),
    REFUSED("top_logprobs", "the Responses route renders no logprobs; use /v1/chat/completions"),
    {NULL, GW_FIELD_HONORED, NULL},
};

const gw_field_rule gw_fields_messages[] = {
    HONORED("model"),
    HONORED("messages"),
    HONORED("max_tokens"),
    HONORED("system"),
    HONORED("stop_sequences"),
    HONORED("temperature"),
    HONORED("top_p"),
    HONORED("top_k"),
    HONORED("stream"),
    HONORED("tools"),
    HONORED("tool_choice"),
    HONORED("thinking"),
    HONORED("output_config"),
    HONORED("output_format"),
    HONORED("context_management"),
    IGNORED("metadata", WHY_BOOKKEEPING),
    IGNORED("service_tier", WHY_TIER),
    IGNORED("speed", WHY_TIER),
    IGNORED("inference_geo", "where the provider runs inference; sipp runs it here"),
    IGNORED("cache_control", WHY_CACHE),
    IGNORED("user_profile_id", WHY_USER),
    IGNORED("diagnostics", WHY_BOOKKEEPING),
    IGNORED("fallback_credit_token", WHY_TIER),
    IGNORED("container", "a code-execution container for server tools, which sipp does not run"),
    IGNORED("mcp_servers", "remote MCP servers the provider would call; sipp does not call them"),
    REFUSED("fallbacks", "sipp answers with the model named; name another model yourself"),
    {NULL, GW_FIELD_HONORED, NULL},
};

const gw_field_rule gw_fields_ollama_chat[] = {
    HONORED("model"),
    HONORED("messages"),
    HONORED("tools"),
    HONORED("format"),
    HONORED("options"),
    HONORED("stream"),
    HONORED("keep_alive"),
    HONORED("think"),
    REFUSED("logprobs", "the Ollama route renders no logprobs; use /v1/chat/completions"),
    REFUSED("top_logprobs", "the Ollama route renders no logprobs; use /v1/chat/completions"),
    {NULL, GW_FIELD_HONORED, NULL},
};

const gw_field_rule gw_fields_ollama_generate[] = {
    HONORED("model"),
    HONORED("prompt"),
    HONORED("suffix"),
    HONORED("system"),
    HONORED("template"),
    HONORED("context"),
    HONORED("stream"),
    HONORED("raw"),
    HONORED("format"),
    HONORED("images"),
    HONORED("options"),
    HONORED("keep_alive"),
    HONORED("think"),
    REFUSED("logprobs", "the Ollama route renders no logprobs; use /v1/completions"),
    REFUSED("top_logprobs", "the Ollama route renders no logprobs; use /v1/completions"),
    {NULL, GW_FIELD_HONORED, NULL},
};

/* The fields OpenAI's audio form has on every path: the clip, the target, and how it is decoded. */
#define AUDIO_FORM_FIELDS                                                                                    \
    HONORED("file"), HONORED("model"), HONORED("language"), HONORED("prompt"), HONORED("response_format"),   \
        HONORED("temperature"), HONORED("stream")

/* OpenAI's transcription form (api/audio.c). A repeated field's name ends in "[]", as the
 * clients write arrays into a form. */
const gw_field_rule gw_fields_transcriptions[] = {
    AUDIO_FORM_FIELDS,
    REFUSED("timestamp_granularities[]", "the model gives text without times; leave it out"),
    REFUSED("timestamp_granularities", "the model gives text without times; leave it out"),
    REFUSED("include[]", "the transcription route renders no logprobs; use /v1/chat/completions with the "
                         "audio as an input_audio part"),
    REFUSED("include", "the transcription route renders no logprobs; use /v1/chat/completions with the "
                       "audio as an input_audio part"),
    REFUSED("chunking_strategy", "the clip is given to the model whole; leave it out"),
    REFUSED("known_speaker_names[]", "sipp does not tell speakers apart; leave it out"),
    REFUSED("known_speaker_references[]", "sipp does not tell speakers apart; leave it out"),
    {NULL, GW_FIELD_HONORED, NULL},
};

/* The same routes on a whisper.cpp target (transcription.c), and /v1/audio/translations: OpenAI's
 * fields, and whisper-server's decoding knobs. */
const gw_field_rule gw_fields_whisper[] = {
    AUDIO_FORM_FIELDS,
    HONORED("timestamp_granularities[]"),
    HONORED("timestamp_granularities"),
    HONORED("temperature_inc"),
    HONORED("beam_size"),
    HONORED("best_of"),
    HONORED("entropy_thold"),
    HONORED("logprob_thold"),
    HONORED("no_speech_thold"),
    REFUSED("include[]", "whisper's answer here carries no logprobs; leave it out"),
    REFUSED("include", "whisper's answer here carries no logprobs; leave it out"),
    REFUSED("chunking_strategy",
            "the clip is transcribed whole, in whisper's own 30 s windows; leave it out"),
    REFUSED("known_speaker_names[]", "sipp does not tell speakers apart; leave it out"),
    REFUSED("known_speaker_references[]", "sipp does not tell speakers apart; leave it out"),
    {NULL, GW_FIELD_HONORED, NULL},
};

/* OpenAI's speech request (api/speech.c); seed is sipp's own (a GGUF pair's sampling seed). */
const gw_field_rule gw_fields_speech[] = {
    HONORED("model"),
    HONORED("input"),
    HONORED("voice"),
    HONORED("response_format"),
    HONORED("speed"),
    HONORED("stream_format"),
    HONORED("seed"),
    IGNORED("instructions", "neither flite nor the Qwen3-TTS / Pocket TTS pipelines have a style input"),
    {NULL, GW_FIELD_HONORED, NULL},
};

bool gw_fields_check(gw_call *call, json_t *root, const gw_field_rule *rules, const char *api) {
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        const gw_field_rule *rule = NULL;
        for (const gw_field_rule *r = rules; r->name && !rule; r++)
            if (strcmp(r->name, key) == 0) rule = r;
        if (!rule)
            return gw_reply_invalid_field(call,
                                          "'%s' is not a field %s knows on this server; leave it out "
                                          "(docs/api-fields.md lists each API's fields)",
                                          key, api);
        if (rule->decision == GW_FIELD_REFUSED && !json_is_null(v))
            return gw_reply_invalid_field(call, "'%s' is not supported by %s on this server: %s", key, api,
                                          rule->why);
        if (rule->decision == GW_FIELD_IGNORED) gw_ignored_add(call, key);
    }
    return true;
}
