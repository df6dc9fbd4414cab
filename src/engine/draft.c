/*
 * draft.c: speculative decoding's proposals from a draft model.
 *
 * The draft is a smaller model of the target's vocabulary, loaded by the engine beside the target
 * on the same backend, with a context of its own: one sequence per slot (the slot's id), in a
 * unified KV cache of the engine's size. Each step, before the target's batch is built, the draft
 * proposes for every slot the scheduler lets speculate (s->draft_room > 0):
 *
 *   1. Catch up. The draft sequence holds the tokens in s->dcache; the slot's history is its
 *      tokens with next_token after them. The common prefix of the two stays in the draft's KV, the
 *      rest of the draft's cells are removed (a rejected proposal, another prompt in the slot) and
 *      the missing tokens are fed, the last with logits. Comparing the two arrays instead of
 *      mirroring every change the scheduler makes to the target keeps the draft right whatever
 *      happened to the slot (prefix reuse, eviction, a restored state): the draft's KV is always
 *      exactly its tokens, and its tokens a prefix of what it catches up to.
 *   2. Propose. The draft's argmax (a sampled request: a draw from the draft's distribution under
 *      the request's sampling parameters, kept in s->dprobs for the acceptance test) is the next
 *      proposed token; it is fed back for the one after, until draft_room tokens, an
 *      end-of-generation token, or a token whose draft probability is below draft_p_min. Every
 *      slot's catch-up shares the first draft decode and every slot's next token the following
 *      ones: a step costs at most draft_max draft decodes whatever the number of slots.
 *
 * The target then verifies all the slots' proposals in its one batch (scheduler.c, verify_drafts).
 * The proposed tokens the target rejects stay in the draft's cells until the next catch-up drops
 * them. A catch-up longer than the batch (a long prompt) is fed in batch-sized chunks over several
 * steps, without proposals until it is complete. A failed draft decode empties the draft's memory
 * (the next steps catch up from scratch) and keeps what was proposed so far: a proposal is only ever
 * a guess for the target to check.
 *
 * The vocabulary check at load compares the token count, the special tokens and a sample of token
 * texts spread over the vocabulary, so that a draft of another tokenizer is refused with both file
 * names instead of proposing tokens that mean something else to the target.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "engine/draft.h"
#include "engine/sampling.h"
#include "engine/slot.h"
#include "engine/state.h"
#include "engine/tokens.h"

#define VOCAB_SAMPLES 512 /* token texts compared at load, spread evenly over the vocabulary */

/* ---- load and the vocabulary check ------------------------------------------------------------- */

typedef struct special_token {
    const char *name;
    llama_token (*get)(const struct llama_vocab *);
} special_token;

static const special_token SPECIALS[] = {{"bos", llama_vocab_bos}, {"eos", llama_vocab_eos},
                                         {"eot", llama_vocab_eot}, {"sep", llama_vocab_sep},
                                         {"nl", llama_vocab_nl},   {"pad", llama_vocab_pad}};

/* Why the draft's vocabulary is not the target's, in why; "" when they agree. */
static void vocab_difference(const sipp_model *t, const sipp_model *d, char *why, size_t cap) {
    *why = 0;
    int n = llama_vocab_n_tokens(t->vocab), nd = llama_vocab_n_tokens(d->vocab);
    if (n != nd) {
        snprintf(why, cap, "%d tokens against %d", nd, n);
        return;
    }
    if (llama_vocab_type(t->vocab) != llama_vocab_type(d->vocab)) {
        snprintf(why, cap, "another tokenizer type");
        return;
    }
    for (size_t i = 0; i < sizeof SPECIALS / sizeof *SPECIALS; i++) {
        llama_token a = SPECIALS[i].get(t->vocab), b = SPECIALS[i].get(d->vocab);
        if (a != b) {
            snprintf(why, cap, "its %s token is %d, the target's %d", SPECIALS[i].name, b, a);
            return;
        }
    }
    int samples = n < VOCAB_SAMPLES ? n : VOCAB_SAMPLES;
    for (int i = 0; i < samples; i++) {
        llama_token tok = samples > 1 ? (llama_token)((int64_t)i * (n - 1) / (samples - 1)) : 0;
        const char *a = llama_vocab_get_text(t->vocab, tok), *b = llama_vocab_get_text(d->vocab, tok);
        if (strcmp(a ? a : "", b ? b : "") != 0) {
            snprintf(why, cap, "token %d is '%.40s' there and '%.40s' in the target", tok, b ? b : "",
                     a ? a : "");
            return;
        }
    }
}

sipp_status sipp_draft_open(sipp_engine *e, char *errbuf) {
    const sipp_model *t = e->model;
    sipp_model_params mp = sipp_model_default_params();
    /* The target's backend, as its load decided it; an rpc split keeps its small draft local. */
    mp.backend = t->rpc ? "cpu" : t->decision.backend;
    char err[SIPP_ERROR_SIZE] = "";
    if (sipp_model_load(e->params.draft_model, &mp, &e->draft, err) != SIPP_OK)
        return sipp_fail(errbuf, SIPP_ERR_MODEL, "draft model: %s", err);
    /* The target's flash attention exactly, as its policy decided it (auto included). A load that
     * names its backend, as the draft's does, would keep it off on the CPU under auto; attention
     * computed two ways rounds two ways, and a draft that is exactly the target's first layers then
     * disagreed with it on near-tied tokens: 82% acceptance instead of 100%. */
    e->draft->flash_attn = t->flash_attn;
    if (llama_model_is_recurrent(e->draft->lm) || llama_model_is_hybrid(e->draft->lm))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "draft model '%s' keeps a recurrent state, which cannot drop a rejected proposal; "
                         "give a transformer draft",
                         e->draft->path);
    char why[SIPP_ERROR_SIZE / 2];
    vocab_difference(t, e->draft, why, sizeof why);
    if (*why)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "draft model '%s' does not share the vocabulary of '%s' (%s); give a draft made for "
                         "this model",
                         e->draft->path, t->path, why);

    struct llama_context_params cp = sipp_model_context_params(e->draft);
    cp.n_ctx = (uint32_t)e->n_ctx;
    cp.n_batch = (uint32_t)e->n_batch;
    cp.n_ubatch = (uint32_t)e->n_batch;
    cp.n_seq_max = (uint32_t)e->params.parallel;
    cp.n_threads = e->params.threads;
    cp.n_threads_batch = e->params.threads;
    cp.kv_unified = true;
    char llama_err[SIPP_ERROR_SIZE];
    sipp_log_capture(llama_err);
    e->dctx = llama_init_from_model(e->draft->lm, cp);
    sipp_log_capture(NULL);
    if (!e->dctx)
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY,
                         "cannot create a context of %d tokens for draft model '%s': %s", e->n_ctx,
                         e->draft->path, *llama_err ? llama_err : "llama.cpp gave no reason");
    if (e->threadpool) llama_attach_threadpool(e->dctx, e->threadpool, e->threadpool);
    e->dmem = llama_get_memory(e->dctx);
    e->dbatch = llama_batch_init(e->n_batch, 0, 1);
    return SIPP_OK;
}

void sipp_draft_close(sipp_engine *e) {
    if (e->dctx) {
        llama_batch_free(e->dbatch);
        llama_free(e->dctx);
        e->dctx = NULL;
    }
    sipp_model_free(e->draft);
    e->draft = NULL;
}

/* ---- proposals --------------------------------------------------------------------------------- */

/* Forgets every draft sequence: the next steps catch up from nothing. */
static void draft_reset(sipp_engine *e) {
    llama_memory_clear(e->dmem, true);
    for (int i = 0; i < e->params.parallel; i++) {
        e->slots[i].n_dcache = 0;
        e->slots[i].d_logits = -1;
    }
}

/* Puts what the draft sequence of s lacks of its history into the draft batch, within *budget rows;
 * true when the history's last token is in (with logits), so the slot can propose this step. */
static bool catch_up(sipp_engine *e, slot *s, int *budget) {
    const llama_token *hist = s->cache;
    int n_hist = s->n_cache + 1;
    if (s->n_dcache > 0 && llama_memory_seq_pos_min(e->dmem, s->id) != 0) s->n_dcache = 0;
    int keep = sipp_common_prefix(s->dcache, s->n_dcache, hist, n_hist);
    if (keep == n_hist) keep--; /* fed again: its logits give the first proposal */
    if (!llama_memory_seq_rm(e->dmem, s->id, keep, -1)) {
        llama_memory_seq_rm(e->dmem, s->id, -1, -1);
        keep = 0;
    }
    s->n_dcache = keep;
    int take = n_hist - keep < *budget ? n_hist - keep : *budget;
    if (take <= 0 || !sipp_tokens_reserve(&s->dcache, &s->cap_dcache, n_hist + s->draft_room)) return false;
    for (int k = 0; k < take; k++) {
        sipp_batch_add(&e->dbatch, hist[keep + k], keep + k, s->id, keep + k == n_hist - 1);
        s->dcache[s->n_dcache++] = hist[keep + k];
    }
    *budget -= take;
    if (s->n_dcache < n_hist) return false;
    s->d_logits = e->dbatch.n_tokens - 1;
    return true;
}

/* The draft's probability of token t: its softmax over the vocabulary. */
static float draft_prob(const sipp_model *d, const float *logits, llama_token t) {
    double sum = 0;
    for (int i = 0; i < d->info.n_vocab; i++)
        sum += exp((double)(logits[i] - logits[t]));
    return (float)(1.0 / sum);
}

void sipp_draft_propose(sipp_engine *e) {
    llama_batch *b = &e->dbatch;
    b->n_tokens = 0;
    int budget = e->n_batch;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        s->d_logits = -1;
        if (!s->req || !s->generating || s->draft_room <= 0) continue;
        if (!s->smpl->greedy_in_place && !s->dprobs &&
            !(s->dprobs = malloc((size_t)e->params.draft_max * (size_t)s->smpl->n_vocab * sizeof *s->dprobs)))
            continue; /* no room for the distributions: no proposal */
        catch_up(e, s, &budget);
    }
    while (b->n_tokens > 0) {
        double t0 = sipp_now_ms();
        if (llama_decode(e->dctx, *b) != 0) {
            draft_reset(e);
            return;
        }
        int rows = b->n_tokens;
        b->n_tokens = 0;
        for (int i = 0; i < e->params.parallel; i++) {
            slot *s = &e->slots[i];
            if (s->d_logits < 0) continue;
            const float *logits = llama_get_logits_ith(e->dctx, s->d_logits);
            s->d_logits = -1;
            llama_token t;
            float p;
            if (s->smpl->greedy_in_place) {
                t = sipp_sample_argmax(e->draft, logits, s->req->ignore_eos);
                p = e->params.draft_p_min > 0 ? draft_prob(e->draft, logits, t) : 1.0f;
            } else { /* a sampled request: a draw from the draft's distribution, kept for the test */
                float *q = s->dprobs + (size_t)s->n_draft * (size_t)s->smpl->n_vocab;
                sipp_sampler_probs(s->smpl, logits, q);
                t = sipp_sampler_draw(s->smpl, q);
                p = q[t];
            }
            if (p < e->params.draft_p_min) continue;
            s->draft[s->n_draft++] = t;
            if (s->n_draft >= s->draft_room || llama_vocab_is_eog(e->draft->vocab, t)) continue;
            s->d_logits = b->n_tokens;
            sipp_batch_add(b, t, s->n_dcache, s->id, true);
            s->dcache[s->n_dcache++] = t;
        }
        /* A sample of the draft's cost for the cut-off (spec_cost.c): the decode and the slots' picks
         * from it; not the draft's first decode, which also pages in its weights. */
        if (e->spec_auto && e->draft_warm) spec_fit_add(&e->draft_fit, rows, sipp_now_ms() - t0);
        e->draft_warm = true;
    }
}
