/*
 * fuzz_request.c: libFuzzer harness for the gateway's request-body decoder (src/gateway/request_parse.c),
 * the code that turns untrusted HTTP bodies into generation requests.
 *
 * Each input is parsed once (gw_parse_body, as a route does) and the tree decoded as every route's
 * body (chat, completion, embeddings, the native routes) and read for routing (gw_body_model). The decoder
 * must never crash, leak or read out of bounds; when it accepts a body, every string it hands on must be a
 * NUL-terminated C string and every count within its bound; when it refuses one, the message must be
 * non-empty (it names the field).
 *
 * Build and run (about a minute, from the repository root, after `make`):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_request.c src/gateway/request_parse.c src/gateway/errors.c -o build/fuzz_request \
 *     -Lbuild/lib -lsipp -Wl,-rpath,$PWD/build/lib -ljansson
 *   mkdir -p build/fuzz-corpus/request
 *   build/fuzz_request -max_total_time=60 -max_len=4096 build/fuzz-corpus/request tests/fuzz/corpus/request
 *
 * tests/integration/test_gateway_fuzz.py does the same for a few seconds in the test suite.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/request_parse.h"

#define ERR_SIZE 512

static const gw_api apis[] = {GW_API_CHAT,        GW_API_COMPLETION,   GW_API_EMBEDDINGS, GW_API_NATIVE_QUERY,
                              GW_API_NATIVE_CHAT, GW_API_NATIVE_EMBED, GW_API_RERANK,     GW_API_TOKENIZE,
                              GW_API_DETOKENIZE,  GW_API_INFILL};

static void touch(const char *s) {
    if (s) (void)strlen(s); /* ASan reports a string without its NUL */
}

static void check_accepted(const gw_gen *g) {
    touch(g->model);
    touch(g->prompt);
    touch(g->context_key);
    if (g->n_stop > GW_MAX_STOP || g->n_messages > GW_MAX_MESSAGES || g->n_inputs > GW_MAX_EMBED_INPUTS)
        abort();
    for (size_t i = 0; i < g->n_stop; i++)
        touch(g->stop[i]);
    for (size_t i = 0; i < g->n_messages; i++) {
        touch(g->messages[i].role);
        touch(g->messages[i].content);
    }
    for (size_t i = 0; i < g->n_inputs; i++)
        touch(g->inputs[i]);
    if (g->max_tokens == 0 || g->max_tokens < -1) abort();
    if (!(g->sampling.temperature >= 0) || !(g->sampling.top_p > 0) || g->sampling.top_k < 0) abort();
    touch(g->query);
    touch(g->input_prefix);
    touch(g->input_suffix);
    for (size_t i = 0; i < g->n_input_extra; i++) {
        touch(g->input_extra[i].filename);
        touch(g->input_extra[i].text);
    }
    switch (g->api) {
    case GW_API_EMBEDDINGS:
    case GW_API_NATIVE_EMBED:
        if (!g->n_inputs) abort();
        break;
    case GW_API_RERANK: /* documents, a query, and top_n results of them */
        if (!g->n_inputs || !g->query || g->top_n < 1 || (size_t)g->top_n > g->n_inputs) abort();
        break;
    case GW_API_TOKENIZE:
        if (!g->content) abort();
        break;
    case GW_API_DETOKENIZE:
        if (!g->token_ids) abort();
        break;
    case GW_API_INFILL:
        if (!g->input_prefix || !g->input_suffix) abort();
        break;
    default:
        if (!g->prompt && !g->n_messages) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[ERR_SIZE];
    err[0] = '\0';
    json_t *root = gw_parse_body((const char *)data, size, err, sizeof err);
    if (!root) {
        if (!err[0]) abort();
        return 0;
    }
    for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++) {
        gw_gen g;
        gw_error_kind kind;
        err[0] = '\0';
        if (gw_decode(apis[i], root, &g, &kind, err, sizeof err)) {
            check_accepted(&g);
            gw_gen_free(&g);
        } else {
            if (!err[0]) abort();
            if (kind != GW_E_INVALID_FIELD) abort();
            if (g.root || g.messages || g.owned) abort(); /* refused means nothing is held */
        }
    }
    touch(gw_body_model(root));
    (void)gw_body_stream(root, true);
    json_decref(root);
    return 0;
}
