/*
 * infill.c: fill-in-the-middle on a local target, for POST /infill, in llama-server's shape.
 *
 * The prompt is built by libsipp as llama-server builds it (sipp_engine_infill_tokens: the model's
 * FIM tokens around the prefix and suffix, the project's other files before them), then generated
 * as a prompt of tokens by the one generation path (generate.c). A model without FIM tokens is a
 * 400 naming the missing ones. The answer is llama-server's /completion object: content, prompt
 * (the FIM prompt's text), stop,
 * stop_type ("eos", "word", "limit"), stopping_word, tokens_predicted, tokens_evaluated,
 * tokens_cached, truncated, has_new_line and timings; streamed, as `data: {"content", "stop":
 * false}` lines and then the final object with content "" and stop true, without [DONE] (as
 * llama-server streams /infill).
 */
#include <string.h>

#include "gateway/http/http.h"
#include "gateway/kinds/kinds.h"

#define INFILL_N_PREDICT_SERVER (-1) /* llama-server's --n-predict default: the extra files' room */

static void infill_begin(const gw_gen_view *v, sipp_buf *out) {}

static json_t *partial(const char *text, size_t len) {
    return json_pack("{s:i, s:s%, s:[], s:b}", "index", 0, "content", text, len, "tokens", "stop", 0);
}

static void infill_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    gw_sse_json(out, NULL, partial(text, len));
}

static void infill_delta(const gw_gen_view *v, size_t index, const sipp_chat_delta *delta, json_t *logprobs,
                         sipp_buf *out) {
    if (delta->content) gw_sse_json(out, NULL, partial(delta->content, strlen(delta->content)));
}

/* How it stopped, in llama-server's words: an end-of-generation token, a stop word, the limit. */
static const char *stop_type(const gw_gen_view *v) {
    if (strcmp(v->choices[0].finish, "length") == 0) return "limit";
    return gw_view_stop_string(v) ? "word" : "eos";
}

static json_t *timings(const sipp_request_stats *s) {
    int evaluated = s->prompt_tokens - s->cached_tokens;
    return json_pack("{s:i, s:i, s:f, s:f, s:i, s:f, s:f}", "cache_n", s->cached_tokens, "prompt_n",
                     evaluated, "prompt_ms", s->prefill_ms, "prompt_per_second", s->prefill_tokens_per_s,
                     "predicted_n", s->generated_tokens, "predicted_ms", s->decode_ms, "predicted_per_second",
                     s->decode_tokens_per_s);
}

/* The prompt's text, as llama-server's "prompt" gives it (valid UTF-8). */
static json_t *prompt_text(const gw_gen_view *v) {
    sipp_buf raw = {0}, safe = {0};
    gw_tokens_text(v->target->model, v->gen->prompt_tokens, v->gen->n_prompt_tokens, &raw, NULL);
    sipp_buf_append_utf8(&safe, raw.data ? raw.data : "", raw.len);
    json_t *j = json_stringn(safe.data ? safe.data : "", safe.len);
    sipp_buf_free(&raw);
    sipp_buf_free(&safe);
    return j;
}

/* The final object, with content (the whole text, or "" after a stream). */
static json_t *final_json(const gw_gen_view *v, const char *content) {
    sipp_request_stats s;
    gw_view_stats(v, &s);
    const char *word = gw_view_stop_string(v);
    return json_pack("{s:i, s:s, s:[], s:b, s:s, s:i, s:i, s:o, s:b, s:b, s:s, s:s, s:i, s:o}", "index", 0,
                     "content", content, "tokens", "stop", 1, "model", v->target->cfg->name,
                     "tokens_predicted", s.generated_tokens, "tokens_evaluated", s.prompt_tokens, "prompt",
                     prompt_text(v), "has_new_line", strchr(v->text, '\n') != NULL, "truncated", 0,
                     "stop_type", stop_type(v), "stopping_word", word ? word : "", "tokens_cached",
                     s.cached_tokens, "timings", timings(&s));
}

static void infill_end(const gw_gen_view *v, sipp_buf *out) { gw_sse_json(out, NULL, final_json(v, "")); }

static void infill_fail(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out) {
    gw_sse_json(out, "error", gw_error_json(kind, message));
}

static json_t *infill_whole(const gw_gen_view *v) { return final_json(v, v->text); }

static const gw_format infill_format = GW_DELTA_FORMAT(infill, "infill-", infill_fail);

void gw_infill(gw_call *call, gw_target *t, gw_gen *g) {
    sipp_infill_request rq = {.prefix = g->input_prefix,
                              .suffix = g->input_suffix,
                              .prompt = g->prompt,
                              .extra = g->input_extra,
                              .n_extra = g->n_input_extra,
                              .n_predict = INFILL_N_PREDICT_SERVER};
    sipp_status st = sipp_engine_infill_tokens(t->engine, &rq, &g->prompt_tokens, &g->n_prompt_tokens);
    if (st != SIPP_OK) {
        gw_reply_error(call, st == SIPP_ERR_MODEL ? GW_E_INVALID_FIELD : gw_error_from_status(st),
                       "model '%s': %s", t->cfg->name, sipp_engine_last_error(t->engine));
        return;
    }
    gw_generate(call, t, g, &infill_format);
}
