/*
 * infill.c: the prompt of a fill-in-the-middle request, built token for token as llama-server's
 * format_prompt_infill builds it (tools/server/server-common.cpp at the pin), so that the same
 * request gives the same prompt, hence the same greedy text, in both.
 *
 * The repo-level pattern (https://arxiv.org/pdf/2409.12186):
 *
 *   [FIM_REP]myproject\n [FIM_SEP]filename0\n extra 0 ... [FIM_SEP]filename\n
 *   [BOS] [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]
 *
 * [FIM_REP] and [FIM_SEP] only where the vocabulary has them (without FIM_SEP an extra chunk is
 * introduced by a "--- snippet ---" line instead), [BOS] where it adds one. The prefix keeps its last
 * 3/4 n_batch tokens, the suffix its first n_batch/4 - 2 - prompt tokens, and the extra chunks what
 * the context leaves past n_batch and twice n_predict (their last tokens), as llama-server does.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/infill.h"
#include "model/model.h"
#include "util/util.h"

#define INFILL_N_BATCH_DEFAULT 2048 /* llama-server's --batch-size default */
#define FIM_REPO "myproject\n"
#define FIM_FILE_DEFAULT "tmp"
#define FIM_CURRENT_FILE "filename\n"
#define FIM_SNIPPET "\n\n--- snippet ---\n\n"

/* A growable token list. */
typedef struct toks {
    llama_token *t;
    int n, cap;
} toks;

static bool push(toks *v, const llama_token *t, int n) {
    if (v->n + n > v->cap) {
        int cap = (v->n + n) * 2 + 16;
        llama_token *bigger = realloc(v->t, (size_t)cap * sizeof *bigger);
        if (!bigger) return false;
        v->t = bigger;
        v->cap = cap;
    }
    memcpy(v->t + v->n, t, (size_t)n * sizeof *t);
    v->n += n;
    return true;
}

static bool push1(toks *v, llama_token t) { return push(v, &t, 1); }

/* Appends the tokens of text (no BOS; special texts parsed when parse_special). */
static sipp_status push_text(sipp_model *m, toks *v, const char *text, bool parse_special, char *err) {
    llama_token *t;
    int n;
    sipp_status st = sipp_model_tokenize_alloc(m, text, false, parse_special, &t, &n, err);
    if (st != SIPP_OK) return st;
    if (!push(v, t, n)) st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    free(t);
    return st;
}

/* Appends a special token, then the tokens of text. */
static sipp_status push_marked(sipp_model *m, toks *v, llama_token mark, const char *text, char *err) {
    return push1(v, mark) ? push_text(m, v, text, false, err)
                          : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
}

/* The repository part: [FIM_REP]myproject, each extra chunk under its file name, the current file. */
static sipp_status extra_tokens(sipp_model *m, const sipp_infill_extra *extra, size_t n_extra, toks *out,
                                char *err) {
    const struct llama_vocab *v = m->vocab;
    llama_token rep = llama_vocab_fim_rep(v), sep = llama_vocab_fim_sep(v);
    sipp_status st = SIPP_OK;
    if (rep != LLAMA_TOKEN_NULL) st = push_marked(m, out, rep, FIM_REPO, err);
    for (size_t i = 0; st == SIPP_OK && i < n_extra; i++) {
        if (sep != LLAMA_TOKEN_NULL) {
            sipp_buf name = {0};
            sipp_buf_appendf(&name, "%s\n", extra[i].filename ? extra[i].filename : FIM_FILE_DEFAULT);
            st = push_marked(m, out, sep, name.data ? name.data : "\n", err);
            sipp_buf_free(&name);
        } else {
            st = push_text(m, out, FIM_SNIPPET, false, err);
        }
        if (st == SIPP_OK) st = push_text(m, out, extra[i].text ? extra[i].text : "", false, err);
    }
    if (st == SIPP_OK && sep != LLAMA_TOKEN_NULL) st = push_marked(m, out, sep, FIM_CURRENT_FILE, err);
    return st;
}

/* SIPP_ERR_MODEL naming the FIM tokens the vocabulary lacks, as llama-server words it. */
static sipp_status check_fim(const sipp_model *m, char *err) {
    const struct llama_vocab *v = m->vocab;
    sipp_buf missing = {0};
    if (llama_vocab_fim_pre(v) == LLAMA_TOKEN_NULL) sipp_buf_appendf(&missing, "prefix token is missing. ");
    if (llama_vocab_fim_suf(v) == LLAMA_TOKEN_NULL) sipp_buf_appendf(&missing, "suffix token is missing. ");
    if (llama_vocab_fim_mid(v) == LLAMA_TOKEN_NULL) sipp_buf_appendf(&missing, "middle token is missing. ");
    sipp_status st = SIPP_OK;
    if (missing.len)
        st = sipp_fail(err, SIPP_ERR_MODEL,
                       "infill is not supported by '%s': %s(its vocabulary has no tokenizer.ggml.fim_pre/suf/"
                       "mid_token_id, nor tokens llama.cpp knows as such, e.g. <|fim_prefix|>)",
                       m->path, missing.data);
    sipp_buf_free(&missing);
    return st;
}

/* Assembles the prompt from its tokenized parts, cut as llama-server cuts them. */
static sipp_status assemble(sipp_model *m, toks *pre, toks *suf, const toks *prompt, const toks *extra,
                            int n_batch, int n_ctx, int n_predict, toks *out, char *err) {
    const struct llama_vocab *v = m->vocab;
    int n_pre = pre->n < 3 * (n_batch / 4) ? pre->n : 3 * (n_batch / 4);
    int room = n_batch / 4 - (2 + prompt->n);
    int n_suf = suf->n < (room > 0 ? room : 0) ? suf->n : (room > 0 ? room : 0);
    int left = n_ctx - n_batch - 2 * n_predict;
    int n_extra = (left > 0 ? left : 0) < extra->n ? (left > 0 ? left : 0) : extra->n;
    bool ok = push(out, extra->t + extra->n - n_extra, n_extra);
    if (ok && llama_vocab_get_add_bos(v)) ok = push1(out, llama_vocab_bos(v));
    ok = ok && push1(out, llama_vocab_fim_pre(v)) && push(out, pre->t + pre->n - n_pre, n_pre) &&
         push(out, prompt->t, prompt->n) && push1(out, llama_vocab_fim_suf(v)) && push(out, suf->t, n_suf) &&
         push1(out, llama_vocab_fim_mid(v));
    return ok ? SIPP_OK : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
}

sipp_status sipp_infill_build(sipp_model *m, int n_ctx, const sipp_infill_request *rq, int32_t **tokens,
                              size_t *n_tokens, char *err) {
    *tokens = NULL;
    *n_tokens = 0;
    sipp_status st = check_fim(m, err);
    toks pre = {0}, suf = {0}, prompt = {0}, extra = {0}, out = {0};
    if (st == SIPP_OK) st = push_text(m, &pre, rq->prefix ? rq->prefix : "", false, err);
    if (st == SIPP_OK) st = push_text(m, &suf, rq->suffix ? rq->suffix : "", false, err);
    if (st == SIPP_OK) st = push_text(m, &prompt, rq->prompt ? rq->prompt : "", true, err);
    if (st == SIPP_OK) st = extra_tokens(m, rq->extra, rq->n_extra, &extra, err);
    int n_batch = rq->n_batch > 0 ? rq->n_batch : INFILL_N_BATCH_DEFAULT;
    if (st == SIPP_OK)
        st = assemble(m, &pre, &suf, &prompt, &extra, n_batch, n_ctx, rq->n_predict, &out, err);
    free(pre.t);
    free(suf.t);
    free(prompt.t);
    free(extra.t);
    if (st != SIPP_OK) {
        free(out.t);
        return st;
    }
    *tokens = out.t;
    *n_tokens = (size_t)out.n;
    return SIPP_OK;
}
