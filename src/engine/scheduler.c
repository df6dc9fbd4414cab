/*
 * scheduler.c: which request goes to which slot, and what each step of the engine decodes.
 *
 * Continuous batching. The context holds `parallel` sequences (slots) in one unified KV cache. Every
 * step is a single llama_decode whose batch carries one token for each slot that is generating and,
 * in what is left of the token budget, chunks of the prompts of slots that are still reading theirs.
 * Decoding goes first because a generating slot's next token is the latency users see; prefill
 * fills the rest of the step, in chunks whose size the policy sets (small chunks keep the token
 * pace steady, large ones finish prompts sooner).
 *
 * Prefix reuse. A slot keeps its KV cells when its request ends, along with the tokens they hold.
 * A new request goes to the idle slot whose tokens share the longest prefix with its prompt, and
 * only the rest is evaluated. When another slot, busy or idle, holds a longer prefix, its cells are
 * shared into the new request's sequence (the cache is unified: sharing copies no data). A
 * context_key pins a conversation to one slot, so its next turn finds its history there; two
 * requests with one key never run at once (the second waits in the queue). Prompts that start
 * together with the same tokens (the n choices of one request) are read once: a slot whose prompt
 * a lower slot is still reading waits for it and then shares its cells (follow_leader).
 *
 * Out of KV space, idle slots give up their cells first (least recently used first); only then does
 * the live request holding the most cells give way, and the others go on.
 *
 * Speculation (engine params.speculative). A generating slot of a greedy request may put a proposal
 * (prompt lookup, speculative.c, or the draft model, draft.c, which proposes for all slots at once
 * before the batch is built) behind its next token, in its own rows of the same batch, each row with
 * logits.
 * After the decode the proposal's longest prefix that the model's own argmax confirms is kept, the
 * rest of its cells are removed from the KV, and the confirmed tokens plus the model's token after
 * them are emitted one by one through the same path as any token (stop strings, limits). Each token
 * is the argmax of the logits after exactly the tokens before it, as without speculation, so the
 * output is the same; a step just yields one to 1 + draft tokens.
 *
 * The draft cut-off (params.draft_cutoff "auto"). Verification rows and draft decodes cost time, and
 * where they cost more than the tokens they save (a compute-bound CPU, several streams whose plain
 * batch already shares the weight reads) speculation loses to plain decoding. So each step, after
 * the slots' rooms are known and before anything is proposed, a cost model (spec_cost.c) fitted to
 * this engine's own decode times and acceptance picks the step's draft length, 0 for a plain step.
 *
 * Everything here runs on the engine thread. Slot assignment (s->req) changes only under e->mu.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/draft.h"
#include "engine/lora.h"
#include "engine/request.h"
#include "engine/sampling.h"
#include "engine/scheduler.h"
#include "engine/slot.h"
#include "engine/state.h"
#include "engine/tokens.h"
#include "model/mmproj.h"

#define PIECE_MAX 256

/* The draft cut-off's exploration. Until the target's and the draft's cost lines have samples at two
 * row counts each, the steps draft as the cut-off "off" does, except every WARMUP_PLAIN_EVERY-th
 * step, which runs plain: with every slot proposing its whole room the target would see one row
 * count only. Afterwards some steps run against the choice, so that it cannot outlive the
 * conditions it was made in. While it drafts, one step in EXPLORE_EVERY runs plain (plain cost is
 * measured only then). While it runs plain, a step drafts EXPLORE_DRAFT tokens (the draft's cost and
 * the acceptance are measured only then) after EXPLORE_EVERY plain steps, then after twice as many
 * each time the choice stays plain, up to EXPLORE_GAP_MAX: such a step is dearer than it looks, as
 * the draft first reads every token the plain steps emitted (one row per slot and step), so a
 * fixed rhythm would charge plain decoding about one draft row per slot and step for ever. */
#define WARMUP_PLAIN_EVERY 2
#define EXPLORE_EVERY 16
#define EXPLORE_GAP_MAX 256
#define EXPLORE_DRAFT 2

/* ---- slots ------------------------------------------------------------------------------------- */

static bool cache_reserve(slot *s, int n) { return sipp_tokens_reserve(&s->cache, &s->cap_cache, n); }

/* Which idle slot a request should take: the one pinned to its key, else the one whose cells it would
 * throw away the fewest of (those past its common prefix with the prompt), preferring unpinned
 * slots, then the longest common prefix, then the least recently used. A prefix another slot holds
 * is shared into the taken slot at start (prefix_donor) wherever it lives, so a new conversation
 * that shares only a system prompt with an idle slot takes an empty slot and copies the prompt's
 * cells, and the idle slot keeps its conversation for its next turn. -1 when none is free, or when
 * its key's slot is busy (it must wait for its own conversation). */
static int pick_slot(sipp_engine *e, const sipp_request *r) {
    if (r->context_key) {
        for (int i = 0; i < e->params.parallel; i++) {
            slot *s = &e->slots[i];
            if (s->key && strcmp(s->key, r->context_key) == 0) return s->req ? -1 : i;
        }
    }
    int best = -1, best_lcp = -1, best_lost = 0;
    bool best_pinned = true;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (s->req) continue;
        int lcp = sipp_common_prefix(s->cache, s->n_cache, r->prompt, r->n_prompt);
        int lost = s->n_cache - lcp;
        bool pinned = s->key != NULL;
        bool better = best < 0 || (best_pinned && !pinned);
        if (!better && pinned == best_pinned)
            better = lost < best_lost ||
                     (lost == best_lost &&
                      (lcp > best_lcp || (lcp == best_lcp && s->last_used < e->slots[best].last_used)));
        if (better) {
            best = i;
            best_lcp = lcp;
            best_lost = lost;
            best_pinned = pinned;
        }
    }
    return best;
}

/* Slot assignment (s->req) changes only under e->mu, so that stats readers see a consistent view. */
static void slot_release(sipp_engine *e, slot *s, const sipp_request *r) {
    sipp_sampler_free(s->smpl);
    s->smpl = NULL;
    s->generating = false;
    s->last_used = sipp_now_ms();
    sipp_engine_lock(e);
    s->req = NULL;
    e->stats.requests_done++;
    e->stats.tokens_out += (uint64_t)r->n_generated;
    sipp_engine_unlock(e);
}

void sipp_slot_finish(sipp_engine *e, slot *s, sipp_finish_reason reason, sipp_status status,
                      const char *error) {
    SIPP_ASSERT_ENGINE_UNLOCKED(e); /* slot_release takes it */
    sipp_request *r = s->req;
    SIPP_ASSERT(r);
    if (r->stats.cutoff_steps > 0 && r->stats.draft_steps == 0) /* the cut-off ran every step of it plain */
        snprintf(r->stats.speculation, sizeof r->stats.speculation, "%s cut off (plain was faster)",
                 e->draft ? "draft" : "ngram");
    if (reason == SIPP_FINISH_STOP || reason == SIPP_FINISH_LENGTH) {
        r->emit.len = 0;
        sipp_output_flush(&r->out, &r->emit);
        sipp_request_publish(r, r->emit.data, r->emit.len);
    }
    slot_release(e, s, r);
    sipp_request_finish(r, reason, status, error);
}

/* How many of a prompt's tokens a slot's KV holds: its common prefix with the slot's tokens, if the
 * sequence still has every cell from position 0 (a sliding-window cache drops old cells), and never
 * the whole prompt: the last prompt token is evaluated again, its logits give the first new token. */
static int usable_prefix(sipp_engine *e, const slot *s, const sipp_request *r) {
    if (s->n_cache == 0 || llama_memory_seq_pos_min(e->mem, s->id) != 0) return 0;
    if (s->lora_sig != r->lora_sig) return 0; /* computed under other LoRA scales (lora.h) */
    int n = sipp_common_prefix(s->cache, s->n_cache, r->prompt, r->n_prompt);
    /* An image or audio span is in the KV whole or not at all. */
    return sipp_media_align(r->media, n < r->n_prompt ? n : r->n_prompt - 1);
}

/* The slot (busy or idle) other than `s` whose KV holds the longest prefix of the prompt, if it is
 * longer than `than`; NULL otherwise. */
static slot *prefix_donor(sipp_engine *e, const slot *s, const sipp_request *r, int than, int *n) {
    slot *best = NULL;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *o = &e->slots[i];
        if (o == s) continue;
        int k = usable_prefix(e, o, r);
        if (k > than) {
            best = o;
            than = k;
        }
    }
    *n = than;
    return best;
}

sipp_status sipp_slot_start(sipp_engine *e, slot *s, sipp_request *r) {
    SIPP_ASSERT_ENGINE_UNLOCKED(e); /* it builds the sampler (slow): outside the lock */
    SIPP_ASSERT(s->req == r);       /* reserved by sipp_sched_assign */
    r->t_start = sipp_now_ms();
    if (!cache_reserve(s, r->n_prompt + 1)) return SIPP_ERR_NO_MEMORY;
    int keep = usable_prefix(e, s, r), shared;
    /* A longer prefix in another slot (a system prompt or document that several requests share) is
     * shared instead of evaluated again: in the unified KV cache the cells gain this sequence's id,
     * no data moves, and later removals by either sequence leave the other's cells alone. */
    slot *donor = prefix_donor(e, s, r, keep, &shared);
    if (donor) {
        llama_memory_seq_rm(e->mem, s->id, -1, -1);
        llama_memory_seq_cp(e->mem, donor->id, s->id, 0, shared);
        memcpy(s->cache, donor->cache, (size_t)shared * sizeof *s->cache);
        keep = shared;
    } else if (!llama_memory_seq_rm(e->mem, s->id, keep, -1)) {
        llama_memory_seq_rm(e->mem, s->id, -1, -1);
        keep = 0;
    }
    s->n_cache = keep;
    s->n_prompt_done = keep;
    s->lora_sig = r->lora_sig;
    r->stats.cached_tokens = keep;
    s->generating = false;
    s->accept = spec_accept_prior(&e->accept_history);
    char err[SIPP_ERROR_SIZE] = "";
    s->smpl = sipp_sampler_new(e->model, r, err);
    if (!s->smpl) return *err ? SIPP_ERR_INVALID_ARGUMENT : SIPP_ERR_NO_MEMORY;
    const char *spec = e->draft ? "draft" : e->spec_ngram ? "ngram" : "none";
    if (strcmp(spec, "none") != 0 && !s->smpl->greedy_in_place && !s->smpl->spec_sampled)
        spec = s->smpl->grammar || s->smpl->budget || r->top_logprobs >= 0
                   ? "off (grammar, thinking budget or logprobs)"
                   : "off (repeat penalty)";
    if (r->media && strcmp(spec, "none") != 0) spec = "off (images or audio)";
    snprintf(r->stats.speculation, sizeof r->stats.speculation, "%s", spec);
    return SIPP_OK;
}

static bool request_expired(sipp_request *r, double now) {
    if (r->deadline_ms > 0 && now >= r->deadline_ms) r->timed_out = true;
    return r->timed_out || atomic_load(&r->cancel);
}

void sipp_sched_cancel(sipp_engine *e, slot *s, sipp_request *r) {
    const char *why = r->timed_out ? "the request timed out" : "the request was cancelled";
    sipp_status st = r->timed_out ? SIPP_ERR_TIMEOUT : SIPP_ERR_CANCELLED;
    if (s)
        sipp_slot_finish(e, s, SIPP_FINISH_CANCELLED, st, why);
    else
        sipp_request_finish(r, SIPP_FINISH_CANCELLED, st, why);
}

/* Moves queued requests into free slots; drops queued requests that were cancelled. Called with
 * e->mu held; the requests it finishes or starts are handled after the lock is released. */
void sipp_sched_assign(sipp_engine *e, sipp_request **dropped, sipp_request **starting, int *starting_slot,
                       int *n_start) {
    SIPP_ASSERT_ENGINE_LOCKED(e);
    double now = sipp_now_ms();
    sipp_request **link = &e->queue_head, *prev = NULL;
    bool busy = false;
    for (int i = 0; i < e->params.parallel; i++)
        busy = busy || e->slots[i].req != NULL;
    while (*link) {
        sipp_request *r = *link;
        bool expired = request_expired(r, now);
        /* Another LoRA set waits until the running one drains, and so do the requests behind it. */
        if (!expired && !sipp_lora_admit(e, r->lora_scales, r->lora_sig, busy)) break;
        int si = expired ? -2 : pick_slot(e, r);
        if (si == -1) {
            prev = r;
            link = &r->next;
            continue;
        }
        *link = r->next;
        if (e->queue_tail == r) e->queue_tail = prev;
        r->next = NULL;
        e->n_queued--;
        if (si == -2) {
            r->next = *dropped;
            *dropped = r;
        } else {
            /* Reserve the slot and pin its key now, so that a later request with the same key in
             * this very pass sees the slot busy and waits. slot_start runs outside the lock. */
            slot *s = &e->slots[si];
            SIPP_ASSERT(!s->req); /* pick_slot gives a free slot */
            s->req = r;
            busy = true;
            if (r->context_key && (!s->key || strcmp(s->key, r->context_key) != 0)) {
                free(s->key);
                s->key = strdup(r->context_key);
            }
            starting[*n_start] = r;
            starting_slot[(*n_start)++] = si;
        }
    }
}

/* ---- one step ---------------------------------------------------------------------------------- */

static int prefill_chunk(const sipp_engine *e) {
    switch (e->params.policy) {
    case SIPP_POLICY_LATENCY_FIRST: return e->n_batch / 8 > 0 ? e->n_batch / 8 : 1;
    case SIPP_POLICY_THROUGHPUT_FIRST: return e->n_batch;
    default: return e->n_batch / 2 > 0 ? e->n_batch / 2 : 1;
    }
}

/* A special token that is part of the answer's syntax (a chat format's "<tool_call>"): its text is
 * released, where other special tokens render as nothing. */
static bool is_preserved(const sipp_request *r, llama_token t) {
    const chat_plan *p = r->chat.plan;
    if (!p) return false;
    for (size_t i = 0; i < p->n_preserved_tokens; i++)
        if (p->preserved_tokens[i] == t) return true;
    return false;
}

/* A generated token: stop at end-of-generation, release text, stop at a stop string or a limit. */
static void on_token(sipp_engine *e, slot *s, llama_token t) {
    sipp_request *r = s->req;
    r->n_generated++;
    if (!r->ignore_eos && llama_vocab_is_eog(e->model->vocab, t)) {
        sipp_slot_finish(e, s, SIPP_FINISH_STOP, SIPP_OK, NULL);
        return;
    }
    char piece[PIECE_MAX];
    int n = sipp_model_token_piece(e->model, t, is_preserved(r, t), piece, sizeof piece);
    r->emit.len = 0;
    bool stopped = sipp_output_push(&r->out, piece, (size_t)n, &r->emit);
    bool go_on = sipp_request_publish(r, r->emit.data, r->emit.len);
    if (stopped) {
        sipp_slot_finish(e, s, SIPP_FINISH_STOP, SIPP_OK, NULL);
    } else if (!go_on) {
        atomic_store(&r->cancel, true);
        sipp_sched_cancel(e, s, r);
    } else if ((r->max_tokens > 0 && r->n_generated >= r->max_tokens) || s->n_cache + 1 >= e->n_ctx) {
        sipp_slot_finish(e, s, SIPP_FINISH_LENGTH, SIPP_OK, NULL);
    } else {
        s->next_token = t;
        s->generating = true;
    }
}

/* How many tokens a generating slot may have proposed this step: none unless the engine speculates
 * and the request is greedy in place (argmax and nothing else: a grammar, a reasoning budget or
 * logprobs keep it off), and never past the request's max_tokens, the context, or the slot's share
 * of the batch. Puts next_token at s->cache[n_cache], so that the history a proposal continues is
 * s->cache[0..n_cache]. */
static int draft_room(sipp_engine *e, slot *s) {
    sipp_request *r = s->req;
    if ((!e->spec_ngram && !e->draft) || !(s->smpl->greedy_in_place || s->smpl->spec_sampled)) return 0;
    if (r->media) return 0; /* a proposal would continue placeholders, which are no tokens */
    int max = e->params.draft_max;
    int share = e->n_batch / e->params.parallel - 1;
    if (max > share) max = share;
    if (r->max_tokens > 0 && max > r->max_tokens - r->n_generated - 1)
        max = r->max_tokens - r->n_generated - 1;
    if (max > e->n_ctx - s->n_cache - 2) max = e->n_ctx - s->n_cache - 2;
    if (max < e->params.draft_min || !cache_reserve(s, s->n_cache + 1)) return 0;
    s->cache[s->n_cache] = s->next_token; /* in the KV after this step either way */
    return max;
}

/* The longest proposal any slot may make this step by the cut-off "auto": the draft length the cost
 * model finds fastest for the generating slots (0: run the step plain), with the exploration above.
 * SIPP_DRAFT_MAX (no cap) when no slot may propose. */
static int cutoff_length(sipp_engine *e) {
    int n = 0, proposing = 0;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (!s->req || !s->generating) continue;
        e->spec_p[n] = spec_accept_p(&s->accept);
        e->spec_room[n++] = s->draft_room;
        proposing += s->draft_room > 0;
    }
    if (!proposing) return SIPP_DRAFT_MAX;
    if (!spec_fit_ready(&e->target_fit) || (e->draft && !spec_fit_ready(&e->draft_fit)))
        return ++e->spec_tick % WARMUP_PLAIN_EVERY == 0 ? 0 : SIPP_DRAFT_MAX;
    spec_line no_cost = {0, 0}; /* prompt lookup decodes nothing to propose */
    int k = spec_choose_k(spec_fit_line(&e->target_fit), e->draft ? spec_fit_line(&e->draft_fit) : no_cost,
                          e->spec_p, e->spec_room, n, e->params.draft_min);
    e->spec_since++;
    if (k > 0) {
        e->spec_gap = EXPLORE_EVERY;
        if (e->spec_since < EXPLORE_EVERY) return k;
        e->spec_since = 0;
        return 0;
    }
    if (e->spec_gap < EXPLORE_EVERY) e->spec_gap = EXPLORE_EVERY;
    if (e->spec_since < e->spec_gap) return 0;
    e->spec_since = 0;
    if (e->spec_gap < EXPLORE_GAP_MAX) e->spec_gap *= 2;
    return EXPLORE_DRAFT > e->params.draft_min ? EXPLORE_DRAFT : e->params.draft_min;
}

/* The proposals of this step, in every slot's s->draft: prompt lookup per slot, or the draft model
 * for all slots at once. One shorter than draft_min is dropped. */
static void propose_drafts(sipp_engine *e) {
    if (e->draft) sipp_draft_propose(e);
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (!s->req || s->draft_room <= 0) continue;
        if (e->spec_ngram) s->n_draft = sipp_spec_ngram(s->cache, s->n_cache + 1, s->draft_room, s->draft);
        if (s->n_draft < e->params.draft_min) s->n_draft = 0;
    }
}

/* After a decode that carried s's proposal behind next_token (already counted in s->cache): keeps the
 * confirmed prefix, drops the rest from the KV, emits the confirmed tokens and the model's next one. */
/* Speculative sampling (Leviathan et al., Chen et al. 2023): proposal x at a position, drawn from the
 * draft's q (prompt lookup: q is all on x), is accepted with probability min(1, p(x) / q(x)) under
 * the target's p; the first rejected one is replaced by a draw from max(0, p - q), normalised, and
 * when all are accepted the token after them is drawn from p. Each token so emitted follows p given
 * the tokens before it, as without speculation. Returns the token after the *accepted ones. */
static llama_token verify_sampled(sipp_engine *e, slot *s, int n, int *accepted) {
    sipp_sampler *ss = s->smpl;
    float *p = ss->probs;
    for (int a = 0;; a++) {
        sipp_sampler_probs(ss, llama_get_logits_ith(e->ctx, s->i_logits + a), p);
        *accepted = a;
        if (a == n) return sipp_sampler_draw(ss, p);
        llama_token x = s->draft[a];
        const float *q = e->draft ? s->dprobs + (size_t)a * (size_t)ss->n_vocab : NULL;
        float qx = q ? q[x] : 1.0f;
        if (sipp_sampler_uniform(ss) * qx < p[x]) continue;
        double left = 0;
        for (int t = 0; t < ss->n_vocab; t++) {
            float d = p[t] - (q ? q[t] : t == x ? 1.0f : 0.0f);
            p[t] = d > 0 ? d : 0;
            left += p[t];
        }
        if (left <= 0) /* p <= q everywhere, so p = q and no rejection was possible: rounding */
            sipp_sampler_probs(ss, llama_get_logits_ith(e->ctx, s->i_logits + a), p);
        return sipp_sampler_draw(ss, p);
    }
}

static void verify_drafts(sipp_engine *e, slot *s) {
    sipp_request *r = s->req;
    int n = s->n_draft, a = 0;
    s->n_draft = 0;
    llama_token t;
    if (!s->smpl->greedy_in_place) {
        t = verify_sampled(e, s, n, &a);
    } else {
        for (;;) {
            t = sipp_sample_argmax(e->model, llama_get_logits_ith(e->ctx, s->i_logits + a), r->ignore_eos);
            if (a == n || t != s->draft[a]) break;
            a++;
        }
    }
    for (int j = 0; j <= a && j <= n; j++) /* the chain sees every emitted token, as sampling does */
        llama_sampler_accept(s->smpl->chain, j < a ? s->draft[j] : t);
    llama_memory_seq_rm(e->mem, s->id, s->n_cache + a, -1);
    memcpy(s->cache + s->n_cache, s->draft, (size_t)a * sizeof *s->cache);
    s->n_cache += a;
    r->stats.draft_tokens += n;
    r->stats.accepted_tokens += a;
    r->stats.draft_steps++;
    spec_accept_add(&s->accept, n, a);
    spec_accept_add(&e->accept_history, n, a);
    sipp_engine_lock(e);
    e->stats.draft_tokens += (uint64_t)n;
    e->stats.accepted_tokens += (uint64_t)a;
    sipp_engine_unlock(e);
    for (int j = 0; j < a; j++) {
        on_token(e, s, s->draft[j]);
        if (s->req != r) return; /* it ended at a confirmed token: a stop, a limit, a cancel */
    }
    on_token(e, s, t);
}

/* Out of KV space, idle slots' cells go first: they are only a cache of earlier prompts. The least
 * recently used idle slot that holds cells is emptied and the step is tried again; true when there
 * was one. (Cells an idle slot shares with a live one stay, as the live sequence still holds them.) */
static bool free_idle_lru(sipp_engine *e) {
    slot *lru = NULL;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (!s->req && s->n_cache > 0 && (!lru || s->last_used < lru->last_used)) lru = s;
    }
    if (!lru) return false;
    llama_memory_seq_rm(e->mem, lru->id, -1, -1);
    lru->n_cache = 0;
    return true;
}

/* Out of KV space with no idle cells left: the request holding the most cells gives way, the others
 * go on. A request without max_tokens that is generating asked for "until the context is full", and
 * it is: it finishes with "length" and keeps its output. Any other victim fails with the reason. */
static void evict_largest(sipp_engine *e) {
    slot *victim = NULL;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (s->req && (!victim || s->n_cache + s->n_fed > victim->n_cache + victim->n_fed)) victim = s;
    }
    if (!victim) return;
    bool until_full = victim->generating && victim->req->max_tokens < 0;
    llama_memory_seq_rm(e->mem, victim->id, -1, -1);
    victim->n_cache = 0;
    if (until_full) {
        sipp_slot_finish(e, victim, SIPP_FINISH_LENGTH, SIPP_OK, NULL);
        return;
    }
    char msg[SIPP_ERROR_SIZE];
    snprintf(
        msg, sizeof msg,
        "the context is full (%d tokens shared by %d slots); raise ctx_size or lower parallel or max_tokens",
        e->n_ctx, e->params.parallel);
    sipp_slot_finish(e, victim, SIPP_FINISH_ERROR, SIPP_ERR_CONTEXT_FULL, msg);
}

/* Prompt sharing while prompts are being read: when another busy slot's KV holds more of s's
 * prompt than s has read, s takes those cells (shared, no data moves); when a lower slot is still
 * reading tokens of s's prompt, s waits this step for them. Lower slots never wait on higher ones,
 * so no two wait on each other. Returns whether s waits. */
static bool follow_leader(sipp_engine *e, slot *s) {
    sipp_request *r = s->req;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *o = &e->slots[i];
        if (o == s || !o->req) continue;
        int have = usable_prefix(e, o, r);
        if (have <= s->n_prompt_done) continue;
        llama_memory_seq_cp(e->mem, o->id, s->id, s->n_prompt_done, have);
        memcpy(s->cache + s->n_cache, r->prompt + s->n_prompt_done,
               (size_t)(have - s->n_prompt_done) * sizeof *s->cache);
        r->stats.cached_tokens += have - s->n_prompt_done;
        s->n_cache = s->n_prompt_done = have;
    }
    for (slot *o = e->slots; o < s; o++) {
        if (!o->req || o->generating) continue;
        int lead = sipp_common_prefix(o->req->prompt, o->req->n_prompt, r->prompt, r->n_prompt);
        if (lead > r->n_prompt - 1) lead = r->n_prompt - 1; /* the last token is s's own to evaluate */
        if (lead > s->n_prompt_done) return true;
    }
    return false;
}

/* What one step found while building its batch, for the stats and the cut-off's cost line after the
 * decode. Lives on the engine thread's stack: a step allocates nothing. */
typedef struct {
    int busy;         /* slots holding a live request */
    bool cut;         /* the cut-off ran some slot plain that could have proposed */
    bool drafted;     /* some slot's proposal rides in the batch */
    bool prompt_rows; /* some slot reads its prompt in the batch */
} step_state;

/* Plan: clear each slot's rows of the last step, cancel requests whose client left or whose deadline
 * passed, and find how many tokens each generating slot may propose (the cut-off may lower it, to 0
 * for a plain step); then the proposals are made. */
static void plan_step(sipp_engine *e, step_state *st) {
    double now = sipp_now_ms();
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        s->i_logits = -1;
        s->n_fed = 0;
        s->n_draft = 0;
        s->draft_room = 0;
        if (!s->req) continue;
        if (request_expired(s->req, now)) {
            sipp_sched_cancel(e, s, s->req);
            continue;
        }
        st->busy++;
        if (s->generating) s->draft_room = draft_room(e, s);
    }
    int cap = e->spec_auto ? cutoff_length(e) : SIPP_DRAFT_MAX;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (!s->req || s->draft_room <= cap) continue;
        s->draft_room = cap;
        if (cap == 0) {
            s->req->stats.cutoff_steps++;
            st->cut = true;
        }
    }
    propose_drafts(e);
}

/* Generation rows: one token for each generating slot, its proposal (if any) behind it, every row
 * with logits. They go first: they are the latency users see. */
static void add_generation_rows(sipp_engine *e, step_state *st) {
    llama_batch *b = &e->batch;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (!s->req || !s->generating) continue;
        st->drafted |= s->n_draft > 0;
        s->i_logits = b->n_tokens;
        s->n_fed = 1 + s->n_draft;
        sipp_batch_add(b, s->next_token, s->n_cache, s->id, true);
        for (int k = 0; k < s->n_draft; k++)
            sipp_batch_add(b, s->draft[k], s->n_cache + 1 + k, s->id, true);
    }
}

/* Prompt rows: chunks of the prompts being read, in what is left of the batch, each at most the
 * policy's chunk; logits only on a prompt's last token. */
static void add_prompt_rows(sipp_engine *e, step_state *st) {
    llama_batch *b = &e->batch;
    int budget = e->n_batch - b->n_tokens;
    int chunk_max = prefill_chunk(e);
    for (int i = 0; i < e->params.parallel && budget > 0; i++) {
        slot *s = &e->slots[i];
        if (!s->req || s->generating || follow_leader(e, s)) continue;
        sipp_request *r = s->req;
        int left = sipp_media_next_start(r->media, s->n_prompt_done);
        left = (left < r->n_prompt ? left : r->n_prompt) - s->n_prompt_done; /* up to the next image */
        int take = left < budget ? left : budget;
        if (take > chunk_max) take = chunk_max;
        for (int k = 0; k < take; k++) {
            int idx = s->n_prompt_done + k;
            bool last = idx == r->n_prompt - 1;
            if (last) s->i_logits = b->n_tokens;
            sipp_batch_add(b, r->prompt[idx], idx, s->id, last);
        }
        s->n_fed = take;
        budget -= take;
        st->prompt_rows |= take > 0;
    }
}

/* Media: a slot whose prompt has reached an image or audio span has it encoded by the projector and
 * its embeddings decoded into its sequence (mmproj.c), one span per step, before the step's batch:
 * the other slots' tokens wait one encode, not a whole prompt's. */
static void eval_media(sipp_engine *e) {
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        sipp_request *r = s->req;
        if (!r || s->generating || !r->media) continue;
        int span = sipp_media_span_at(r->media, s->n_prompt_done);
        if (span < 0 || follow_leader(e, s) || sipp_media_span_at(r->media, s->n_prompt_done) != span)
            continue;
        char err[SIPP_ERROR_SIZE];
        double ms = 0;
        sipp_status st =
            sipp_media_eval(e->model->mmproj, e->ctx, r->media, span, s->id, e->n_batch, &ms, err);
        r->stats.encode_ms += ms;
        if (st != SIPP_OK) {
            llama_memory_seq_rm(e->mem, s->id, s->n_cache, -1);
            sipp_slot_finish(e, s, SIPP_FINISH_ERROR, st, err);
            return;
        }
        int n = sipp_media_span_get(r->media, span)->n;
        memcpy(s->cache + s->n_cache, r->prompt + s->n_prompt_done, (size_t)n * sizeof *s->cache);
        s->n_cache += n;
        s->n_prompt_done += n;
        r->stats.media_encoded++;
        sipp_engine_lock(e);
        e->stats.tokens_in += (uint64_t)n;
        sipp_engine_unlock(e);
        return;
    }
}

/* Decode: the one llama_decode of the step. Out of KV space, cells are freed (idle ones first) and
 * the next step retries; any other failure ends the requests that had rows in the batch. Returns
 * whether the batch is in the KV. */
static bool decode_step(sipp_engine *e) {
    int rc = llama_decode(e->ctx, e->batch);
    if (rc == 0) return true;
    if (rc == 1) { /* no KV space for this batch; llama.cpp rolled it back, the next step retries */
        if (!free_idle_lru(e)) evict_largest(e);
        return false;
    }
    char msg[SIPP_ERROR_SIZE];
    snprintf(msg, sizeof msg, "llama_decode failed (code %d)", rc);
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (!s->req || !s->n_fed) continue;
        llama_memory_seq_rm(e->mem, s->id, s->n_cache, -1);
        sipp_slot_finish(e, s, SIPP_FINISH_ERROR, SIPP_ERR_INTERNAL, msg);
    }
    return false;
}

/* The fed rows of s are now in the KV: count them into s->cache. A generating slot with a proposal
 * has it verified (and its tokens emitted) here. Returns whether s goes on to sample a token. */
static bool absorb_rows(sipp_engine *e, slot *s) {
    sipp_request *r = s->req;
    if (!s->generating) {
        memcpy(s->cache + s->n_cache, r->prompt + s->n_prompt_done, (size_t)s->n_fed * sizeof *s->cache);
        s->n_cache += s->n_fed;
        s->n_prompt_done += s->n_fed;
        sipp_engine_lock(e);
        e->stats.tokens_in += (uint64_t)s->n_fed;
        sipp_engine_unlock(e);
        return true;
    }
    s->cache[s->n_cache++] = s->next_token;
    if (s->n_draft == 0) return true;
    if (!cache_reserve(s, s->n_cache + s->n_draft + 2)) {
        s->n_draft = 0;
        llama_memory_seq_rm(e->mem, s->id, s->n_cache, -1);
        sipp_slot_finish(e, s, SIPP_FINISH_ERROR, SIPP_ERR_NO_MEMORY, "out of memory");
        return false;
    }
    verify_drafts(e, s);
    return false;
}

/* Sample s's next token from its logits row and pass it on. */
static void sample_next(sipp_engine *e, slot *s) {
    sipp_request *r = s->req;
    if (!cache_reserve(s, s->n_cache + 2)) {
        sipp_slot_finish(e, s, SIPP_FINISH_ERROR, SIPP_ERR_NO_MEMORY, "out of memory");
        return;
    }
    /* A grammar's step over the vocabulary is the costly part of sampling: a request whose client
     * left or whose deadline passed (maybe during another slot's step) stops before it. */
    if (request_expired(r, sipp_now_ms())) {
        sipp_sched_cancel(e, s, r);
        return;
    }
    llama_token t = sipp_sampler_sample(s->smpl, e, e->ctx, s->i_logits, r);
    if (t == LLAMA_TOKEN_NULL) {
        sipp_slot_finish(e, s, SIPP_FINISH_ERROR, SIPP_ERR_INTERNAL,
                         "the grammar could not take the sampled token (no allowed continuation)");
        return;
    }
    if (!r->t_first) r->t_first = sipp_now_ms();
    on_token(e, s, t);
}

/* Absorb: after a decode, every slot that had rows takes them into its cache, and one with logits
 * samples (or verifies) what comes next. */
static void absorb_step(sipp_engine *e) {
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (!s->req || !s->n_fed) continue;
        if (absorb_rows(e, s) && s->i_logits >= 0) sample_next(e, s);
    }
}

/* One step: plan, generation rows, prompt rows, decode, absorb. */
void sipp_sched_step(sipp_engine *e) {
    step_state st = {0, false, false, false};
    e->batch.n_tokens = 0;
    sipp_lora_apply(e); /* the running set of LoRA scales, before anything of this step is evaluated */
    plan_step(e, &st);
    eval_media(e);
    add_generation_rows(e, &st);
    add_prompt_rows(e, &st);
    if (e->batch.n_tokens == 0) return;

    double t0 = sipp_now_ms();
    if (!decode_step(e)) return;
    sipp_engine_lock(e);
    e->stats.decode_steps++;
    e->stats.draft_steps += st.drafted;
    e->stats.cutoff_steps += st.cut && !st.drafted;
    e->busy_slot_steps += (uint64_t)st.busy;
    sipp_engine_unlock(e);

    absorb_step(e);
    /* A generation step is a sample of the target's cost for the cut-off: its decode with the
     * verification and sampling of its rows (reading every row's logits costs per row too). */
    if (e->spec_auto && !st.prompt_rows) spec_fit_add(&e->target_fit, e->batch.n_tokens, sipp_now_ms() - t0);
}

bool sipp_sched_has_active(const sipp_engine *e) {
    SIPP_ASSERT_ENGINE_LOCKED(e);
    for (int i = 0; i < e->params.parallel; i++)
        if (e->slots[i].req) return true;
    return false;
}
