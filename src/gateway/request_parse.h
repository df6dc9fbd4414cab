/*
 * request_parse.h: request bodies (one parsed JSON tree) into gw_gen, the form every generation
 * route runs on (request_parse.c). Depends only on errors.h.
 */
#ifndef SIPP_GATEWAY_REQUEST_PARSE_H
#define SIPP_GATEWAY_REQUEST_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gateway/errors.h"
#include "sipp.h"

typedef enum gw_api {
    GW_API_CHAT,         /* POST /v1/chat/completions */
    GW_API_COMPLETION,   /* POST /v1/completions */
    GW_API_EMBEDDINGS,   /* POST /v1/embeddings */
    GW_API_NATIVE_QUERY, /* POST /v1/query */
    GW_API_NATIVE_CHAT,  /* POST /v1/chat */
    GW_API_NATIVE_EMBED, /* POST /v1/embed */
    GW_API_RERANK,       /* POST /v1/rerank (/rerank, /v1/reranking) */
    GW_API_TOKENIZE,     /* POST /tokenize */
    GW_API_DETOKENIZE,   /* POST /detokenize */
    GW_API_INFILL,       /* POST /infill */
} gw_api;

#define GW_MAX_STOP 16
#define GW_MAX_LORA 64
#define GW_MAX_MESSAGES 4096
#define GW_MAX_EMBED_INPUTS 2048
#define GW_MAX_IGNORED 32

/* A decoded request body. Strings borrow from root (or from owned) and live until gw_gen_free. */
typedef struct gw_gen {
    gw_api api;
    json_t *root;      /* a reference to the parsed body */
    const char *model; /* the target name; NULL when the body has none */
    bool stream;
    bool include_usage;
    const char *prompt;     /* completions and /v1/query */
    sipp_message *messages; /* chats */
    size_t n_messages;
    const char *stop[GW_MAX_STOP];
    size_t n_stop;
    int max_tokens; /* -1 = until the context is full */
    sipp_sampling sampling;
    bool ignore_eos;
    const char *context_key;
    const char **inputs; /* embeddings */
    size_t n_inputs;
    bool normalize; /* embeddings: unit L2 norm (always for OpenAI's route) */
    bool base64;    /* embeddings: encoding_format "base64" (little-endian float32) */
    /* rerank: the query; the documents' texts are inputs (strings, or objects' "text") */
    const char *query;
    int top_n;             /* results returned, the best first; the number of documents by default */
    bool return_documents; /* each result carries its document as given (a string as {"text": ...}) */
    /* tokenize: content (a string, or an array of strings and token ids), borrowed from root */
    json_t *content;
    bool add_special;   /* BOS/EOS as the vocabulary adds them (default false) */
    bool parse_special; /* "<|im_start|>" as its special token (default true) */
    bool with_pieces;   /* [{id, piece}] instead of ids */
    json_t *token_ids;  /* detokenize: the token ids, borrowed from root */
    /* infill: the code around the hole and the project's other files (borrowed from root), and the
     * prompt tokens built from them for the target (owned), which a generation takes instead of
     * prompt */
    const char *input_prefix, *input_suffix;
    sipp_infill_extra *input_extra;
    size_t n_input_extra;
    int32_t *prompt_tokens;
    size_t n_prompt_tokens;
    char **owned; /* strings made while decoding (joined content parts, ignored fields' paths) */
    size_t n_owned;
    void *route;                     /* a route's own state for rendering (translate.c); NULL mostly */
    void (*route_free)(void *route); /* frees it with the request, when set */

    /* The chat interface, what every chat API (chat completions, native chat, and the routes that
     * translate Responses, Anthropic and Ollama requests onto chat completions) hands to libsipp:
     *   chat      an OpenAI chat body (owned), given to the engine as sipp_request_params.chat_json:
     *             "messages" (with assistant "tool_calls" and "tool" messages), "tools",
     *             "tool_choice", "parallel_tool_calls", "response_format", "json_schema", "grammar",
     *             "reasoning_format", "chat_template_kwargs", "thinking_budget_tokens". libsipp
     *             checks these fields and its errors name them.
     *   prompts (completions, /v1/query) carry their constraint in grammar / json_schema instead.
     * The answer's side is gw_choice (generate.h): the parsed message (content, reasoning_content,
     * tool_calls), finish_reason "tool_calls" when it called tools, and the logprobs. */
    json_t *chat;        /* chats; NULL for prompts */
    size_t n_images;     /* chats: image_url parts (data: and http(s) URLs), all messages together */
    size_t n_audio;      /* chats: input_audio parts */
    const char *grammar; /* prompts: GBNF */
    char *json_schema;   /* prompts: a JSON Schema text (owned) */
    int n;               /* choices, 1 by default; at most the target's parallel */
    int logprobs;        /* -1: none; else how many alternatives per token (top_logprobs) */
    sipp_lora_scale lora[GW_MAX_LORA]; /* llama-server's "lora": [{id, scale}]; n_lora 0: the target's */
    size_t n_lora;
    /* Fields the body carried that the table accepts without acting on them (user, metadata, ...,
     * an image's detail), borrowed from root or owned: the route names them in sipp-ignored
     * (api/api.h). */
    const char *ignored[GW_MAX_IGNORED];
    size_t n_ignored;
} gw_gen;

/* Parses a body as JSON the way every route reads it: duplicate keys and NUL characters refused.
 * NULL (with a message naming line and column in err) when it is not JSON. New reference. */
json_t *gw_parse_body(const char *body, size_t len, char *err, size_t errlen);
/* Decodes a parsed body (borrowed; gw_gen takes a reference) for api. On failure returns false
 * with kind set (GW_E_INVALID_FIELD) and a message naming the field in err (errlen bytes); *out
 * is then empty. */
bool gw_decode(gw_api api, json_t *root, gw_gen *out, gw_error_kind *kind, char *err, size_t errlen);
void gw_gen_free(gw_gen *g);
/* The "model" of a parsed body (NULL when it has none or it is not a string), and whether it asks
 * for a stream (stream_default when it does not say): what routing needs, read from the same tree
 * gw_decode reads. */
const char *gw_body_model(json_t *root);
bool gw_body_stream(json_t *root, bool stream_default);
/* Folds (in a chat body, gw_gen.chat) the system messages a chat has after its first message into its leading
 * system message (made when there is none), in order: for templates that take a system prompt only at the
 * start and refuse one among the turns. False when there was nothing to fold. */
bool gw_chat_fold_system(json_t *chat);

#endif
