/*
 * tokens.c: what llama-server's routes tell about a model's tokenizer and template, on a local
 * target: /tokenize, /detokenize, /apply-template, and the input_tokens routes of chat completions
 * and Responses.
 *
 * Each is run by the dispatcher (gw_dispatch.local) on the ready target, and answers in
 * llama-server's shape with llama-server's defaults (tools/server/server-context.cpp at the pin):
 *   /tokenize        add_special false, parse_special true; with_pieces gives [{id, piece}], a piece
 *                    that is not valid UTF-8 as its byte values
 *   /detokenize      the tokens' pieces joined (common_token_to_piece: no leading space removed)
 *   /apply-template  the prompt a chat renders to, as the engine renders it for a generation
 *                    (template, tools, switches)
 *   input_tokens     that prompt's length in tokens, {"object": "response.input_tokens", ...}
 * A prompt that renders only with its system turns folded first is rendered so, as generate.c does.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/kinds/kinds.h"
#include "util/util.h"

#define PIECE_CAP 256 /* bytes of one token's text; longer pieces are sized and fetched again */

/* The text of token id into b (appended); false with the model's message when it is not a token. */
static bool append_piece(sipp_model *m, int32_t id, sipp_buf *b) {
    char small[PIECE_CAP];
    size_t need = 0;
    sipp_status st = sipp_token_piece(m, id, true, small, sizeof small, &need);
    if (st == SIPP_OK) return sipp_buf_append(b, small, need);
    if (need < sizeof small) return false; /* not a token */
    char *big = malloc(need + 1);
    bool ok = big && sipp_token_piece(m, id, true, big, need + 1, &need) == SIPP_OK &&
              sipp_buf_append(b, big, need);
    free(big);
    return ok;
}

bool gw_tokens_text(sipp_model *m, const int32_t *tokens, size_t n, sipp_buf *b, size_t *bad) {
    for (size_t i = 0; i < n; i++)
        if (!append_piece(m, tokens[i], b)) {
            if (bad) *bad = i;
            return false;
        }
    return true;
}

/* A piece as llama-server writes it: the text when it is valid UTF-8, else its bytes. */
static json_t *piece_json(const char *s, size_t n) {
    if (sipp_utf8_valid(s, n)) return json_stringn(s, n);
    json_t *bytes = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(bytes, json_integer((unsigned char)s[i]));
    return bytes;
}

/* Tokenizes text and appends its ids to out; false after replying. */
static bool tokenize_into(gw_call *call, gw_target *t, const char *text, bool add_special, bool parse_special,
                          json_t *ids) {
    size_t n = 0, len = strlen(text);
    sipp_status st = sipp_tokenize(t->model, text, len, add_special, parse_special, NULL, 0, &n);
    int32_t *toks = malloc((n ? n : 1) * sizeof *toks);
    if (toks && (st == SIPP_OK || st == SIPP_ERR_INVALID_ARGUMENT))
        st = sipp_tokenize(t->model, text, len, add_special, parse_special, toks, n, &n);
    else
        st = SIPP_ERR_NO_MEMORY;
    for (size_t i = 0; st == SIPP_OK && i < n; i++)
        json_array_append_new(ids, json_integer(toks[i]));
    free(toks);
    if (st != SIPP_OK)
        gw_reply_error(call, gw_error_from_status(st), "model '%s': cannot tokenize 'content': %s",
                       t->cfg->name, sipp_model_last_error(t->model));
    return st == SIPP_OK;
}

/* [{id, piece}] for ids; NULL after replying. */
static json_t *with_pieces(gw_call *call, gw_target *t, json_t *ids) {
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(ids); i++) {
        sipp_buf b = {0};
        json_int_t id = json_integer_value(json_array_get(ids, i));
        if (!append_piece(t->model, (int32_t)id, &b)) {
            sipp_buf_free(&b);
            json_decref(out);
            gw_reply_error(call, GW_E_INVALID_FIELD, "'content': model '%s': %s", t->cfg->name,
                           sipp_model_last_error(t->model));
            return NULL;
        }
        json_array_append_new(
            out, json_pack("{s:I, s:o}", "id", id, "piece", piece_json(b.data ? b.data : "", b.len)));
        sipp_buf_free(&b);
    }
    return out;
}

void gw_tokenize(gw_call *call, gw_target *t, gw_gen *g) {
    json_t *ids = json_array();
    bool ok = true;
    if (json_is_string(g->content))
        ok = tokenize_into(call, t, json_string_value(g->content), g->add_special, g->parse_special, ids);
    /* As tokenize_mixed: the first element alone may add BOS, token ids pass as they are. */
    for (size_t i = 0; ok && i < json_array_size(g->content); i++) {
        json_t *e = json_array_get(g->content, i);
        if (json_is_string(e))
            ok =
                tokenize_into(call, t, json_string_value(e), g->add_special && i == 0, g->parse_special, ids);
        else
            json_array_append(ids, e);
    }
    json_t *tokens = ok && g->with_pieces ? with_pieces(call, t, ids) : ok ? json_incref(ids) : NULL;
    json_decref(ids);
    if (tokens) gw_reply_json(call, 200, json_pack("{s:o}", "tokens", tokens));
}

void gw_detokenize(gw_call *call, gw_target *t, gw_gen *g) {
    size_t n = json_array_size(g->token_ids), bad = 0;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(g->token_ids, i));
    sipp_buf text = {0};
    bool ok = ids && gw_tokens_text(t->model, ids, n, &text, &bad);
    free(ids);
    if (!ok) {
        sipp_buf_free(&text);
        gw_reply_error(call, GW_E_INVALID_FIELD, "'tokens[%zu]': model '%s': %s", bad, t->cfg->name,
                       sipp_model_last_error(t->model));
        return;
    }
    sipp_buf safe = {0}; /* a cut multi-byte character, as JSON can carry it */
    sipp_buf_append_utf8(&safe, text.data ? text.data : "", text.len);
    gw_reply_json(call, 200, json_pack("{s:s%}", "content", safe.data ? safe.data : "", safe.len));
    sipp_buf_free(&text);
    sipp_buf_free(&safe);
}

/* The prompt g's chat renders to on t (and its length), folding the system turns when the template
 * wants them first; false after replying. */
static bool render(gw_call *call, gw_target *t, gw_gen *g, char **prompt, int *n_prompt) {
    sipp_request_params p = sipp_request_default_params();
    char *chat_json = json_dumps(g->chat, JSON_COMPACT);
    p.chat_json = chat_json;
    p.chat_template = t->cfg->chat_template;
    sipp_status st =
        chat_json ? sipp_engine_render_prompt(t->engine, &p, prompt, n_prompt) : SIPP_ERR_NO_MEMORY;
    if (st == SIPP_ERR_INVALID_ARGUMENT && gw_chat_fold_system(g->chat)) {
        free(chat_json);
        p.chat_json = chat_json = json_dumps(g->chat, JSON_COMPACT);
        st = chat_json ? sipp_engine_render_prompt(t->engine, &p, prompt, n_prompt) : SIPP_ERR_NO_MEMORY;
    }
    free(chat_json);
    /* A prompt past the context is rendered and counted all the same: the client asks how long it is. */
    if (st == SIPP_ERR_CONTEXT_FULL) st = SIPP_OK;
    if (st != SIPP_OK)
        gw_reply_error(call, gw_error_from_status(st), "model '%s': %s", t->cfg->name,
                       sipp_engine_last_error(t->engine));
    return st == SIPP_OK;
}

void gw_apply_template(gw_call *call, gw_target *t, gw_gen *g) {
    char *prompt = NULL;
    if (!render(call, t, g, &prompt, NULL)) return;
    gw_reply_json(call, 200, json_pack("{s:s}", "prompt", prompt));
    sipp_free(prompt);
}

void gw_input_tokens(gw_call *call, gw_target *t, gw_gen *g) {
    char *prompt = NULL;
    int n = 0;
    if (!render(call, t, g, &prompt, &n)) return;
    sipp_free(prompt);
    gw_reply_json(call, 200, json_pack("{s:s, s:i}", "object", "response.input_tokens", "input_tokens", n));
}
