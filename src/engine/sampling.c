/*
 * sampling.c: a request's sampler: its sampling parameters as a llama.cpp sampler chain, and beside
 * the chain the grammar, the reasoning budget and the log-probabilities.
 *
 * The order follows llama.cpp's defaults (penalties, top-k, top-p, min-p, temperature, then the
 * random draw), so that a request with the same parameters and seed samples as llama-cli would.
 * Temperature 0 is greedy: deterministic and independent of the seed. ignore_eos is a -inf bias on
 * every end-of-generation token, as llama-server does, so the model cannot pick one.
 *
 * Greedy decoding without penalties skips the chain: the chain would copy all logits into a
 * candidate array (the vocabulary is 128k tokens for Llama 3) to take their maximum, every token.
 * sipp_sample_argmax reads the logits in place and gives the same token.
 *
 * The grammar (a request's GBNF or JSON schema, or the tools' grammar of a chat) is not in the
 * chain. As in llama-server, the chain picks a token from the unconstrained logits and the grammar
 * checks that one token; only when it refuses is the grammar applied to the whole vocabulary and the
 * chain run again on what it allows. Checking one token costs little, applying a grammar to 128k
 * candidates costs much, and under a well-followed schema the first pick is usually allowed. The
 * result is the same distribution as grammar-then-chain: a pick the grammar allows is a pick the
 * constrained chain could make.
 *
 * Log-probabilities are of the distribution the sampler drew from before temperature and
 * truncation, i.e. the model's softmax over the tokens the grammar and the reasoning budget allow
 * (what OpenAI reports too: logprobs do not change with temperature). Asking for them applies the
 * grammar to the whole vocabulary every token, since the alternatives must be the allowed ones.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "engine/request.h"
#include "engine/sampling.h"
#include "engine/state.h"

#define PROMPT_PIECE_MAX 256
#define SPEC_RNG_MUL UINT64_C(0x9E3779B97F4A7C15)       /* spreads a small seed over the state */
#define UNIFORM_BITS 53                                 /* a double's mantissa */
#define XORSHIFT_STAR_MUL UINT64_C(2685821657736338717) /* xorshift64*'s output multiplier */

static uint32_t fresh_seed(void) {
    static atomic_uint counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint32_t)(ts.tv_nsec ^ ts.tv_sec ^ (atomic_fetch_add(&counter, 1) * 2654435761u));
}

static bool has_penalties(const sipp_sampling *s) {
    return s->repeat_last_n != 0 &&
           (s->repeat_penalty != 1.0f || s->frequency_penalty != 0.0f || s->presence_penalty != 0.0f);
}

/* The chain of a request's sampling parameters; with_draw false leaves out the random draw (the
 * distribution speculative sampling reads, sipp_sampler_probs). */
static struct llama_sampler *chain_build(const sipp_model *m, const sipp_sampling *s, bool ignore_eos,
                                         bool with_draw) {
    struct llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = true;
    struct llama_sampler *chain = llama_sampler_chain_init(cp);
    if (!chain) return NULL;
    int n_vocab = llama_vocab_n_tokens(m->vocab);

    if (ignore_eos && m->n_eog > 0) {
        llama_logit_bias *bias = calloc((size_t)m->n_eog, sizeof *bias);
        if (!bias) {
            llama_sampler_free(chain);
            return NULL;
        }
        for (int i = 0; i < m->n_eog; i++)
            bias[i] = (llama_logit_bias){m->eog[i], -INFINITY};
        llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(n_vocab, m->n_eog, bias));
        free(bias);
    }
    if (has_penalties(s))
        llama_sampler_chain_add(chain,
                                llama_sampler_init_penalties(n_vocab, s->repeat_last_n, s->repeat_penalty,
                                                             s->frequency_penalty, s->presence_penalty));
    if (s->temperature <= 0.0f) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
        return chain;
    }
    if (s->top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(s->top_k));
    if (s->top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(s->top_p, 1));
    if (s->min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(s->min_p, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(s->temperature));
    if (with_draw)
        llama_sampler_chain_add(
            chain, llama_sampler_init_dist(s->seed == SIPP_SEED_RANDOM ? fresh_seed() : s->seed));
    return chain;
}

struct llama_sampler *sipp_sampler_chain_new(const sipp_model *m, const sipp_sampling *s, bool ignore_eos) {
    return chain_build(m, s, ignore_eos, true);
}

bool sipp_sampling_is_greedy(const sipp_sampling *s) { return s->temperature <= 0.0f && !has_penalties(s); }

/* The largest of x[0..n) is kept in ARGMAX_LANES running maxima, which the compiler holds in vector
 * registers; the first index holding it is found in a second pass. The obvious loop (compare with
 * x[best], move best) reloads x[best] for every element and took 0.55 ms over a 128k vocabulary
 * where this takes 0.05: four rows of a batch spent 2 ms of a 40 ms step choosing their tokens.
 * NaNs are never the largest; all NaN gives 0. */
#define ARGMAX_LANES 16

int sipp_argmax(const float *x, int n) {
    float lane[ARGMAX_LANES];
    for (int k = 0; k < ARGMAX_LANES; k++)
        lane[k] = -INFINITY;
    int i = 0;
    for (; i + ARGMAX_LANES <= n; i += ARGMAX_LANES)
        for (int k = 0; k < ARGMAX_LANES; k++)
            lane[k] = x[i + k] > lane[k] ? x[i + k] : lane[k];
    float max = -INFINITY;
    for (int k = 0; k < ARGMAX_LANES; k++)
        max = lane[k] > max ? lane[k] : max;
    for (; i < n; i++)
        max = x[i] > max ? x[i] : max;
    for (i = 0; i < n; i++)
        if (x[i] == max) return i;
    return 0;
}

llama_token sipp_sample_argmax(const sipp_model *m, const float *logits, bool ignore_eos) {
    int n_vocab = m->info.n_vocab;
    llama_token best = sipp_argmax(logits, n_vocab);
    if (!ignore_eos || !llama_vocab_is_eog(m->vocab, best)) return best;
    /* The rare case: the best is an end-of-generation token that must not be chosen. */
    best = -1;
    for (llama_token t = 0; t < n_vocab; t++)
        if (!llama_vocab_is_eog(m->vocab, t) && (best < 0 || logits[t] > logits[best])) best = t;
    return best < 0 ? 0 : best;
}

/* ---- grammar, budget and logprobs ------------------------------------------------------------- */

/* Feeds the template's generation prompt (what it put after the last message) to a sampler that
 * follows the answer's syntax from its very start. */
static sipp_status prefill(const sipp_model *m, const chat_plan *p, struct llama_sampler *smpl, char *err) {
    if (!p || !*p->generation_prompt) return SIPP_OK;
    llama_token *toks = NULL;
    int n = 0;
    sipp_status st =
        sipp_model_tokenize_alloc((sipp_model *)m, p->generation_prompt, false, true, &toks, &n, err);
    /* Some tokenizers (SentencePiece) put a space before the first token: not part of the prompt's
     * text, so not fed (as llama-server skips it). */
    int from = 0;
    if (st == SIPP_OK && n > 0 && !isspace((unsigned char)p->generation_prompt[0])) {
        char piece[PROMPT_PIECE_MAX];
        int k = sipp_model_token_piece(m, toks[0], true, piece, sizeof piece);
        if (k > 0 && isspace((unsigned char)piece[0])) from = 1;
    }
    for (int i = from; st == SIPP_OK && i < n; i++)
        if (!chat_sampler_accept(smpl, toks[i], err)) st = SIPP_ERR_INVALID_ARGUMENT;
    free(toks);
    return st;
}

sipp_status sipp_request_grammar(const sipp_model *m, sipp_request *r, char *err) {
    const chat_request *c = &r->chat;
    if (!c->grammar) return SIPP_OK;
    char why[SIPP_ERROR_SIZE] = "";
    sipp_log_capture(why);
    if (c->grammar_lazy) {
        const chat_plan *p = c->plan;
        r->grammar = llama_sampler_init_grammar_lazy_patterns(
            m->vocab, c->grammar, "root", (const char **)p->trigger_patterns, p->n_trigger_patterns,
            p->trigger_tokens, p->n_trigger_tokens);
    } else {
        r->grammar = llama_sampler_init_grammar(m->vocab, c->grammar, "root");
    }
    sipp_log_capture(NULL);
    if (!r->grammar)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'grammar' does not parse as GBNF%s%s",
                         *why ? ": " : "", why);
    if (!c->grammar_prefill) return SIPP_OK;
    /* The grammar of a chat may start with the template's generation prompt (e.g. an opened
     * "<think>" block): feed it those tokens, on a copy, since grammars that do not start there
     * refuse them; the copy that took them replaces the original. */
    struct llama_sampler *copy = llama_sampler_clone(r->grammar);
    if (copy && prefill(m, c->plan, copy, why) == SIPP_OK) {
        llama_sampler_free(r->grammar);
        r->grammar = copy;
    } else if (copy) {
        llama_sampler_free(copy);
    }
    return SIPP_OK;
}

/* text ends with tag, trailing whitespace aside. */
static bool ends_with_tag(const char *text, const char *tag) {
    size_t n = strlen(text), k = strlen(tag);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\t'))
        n--;
    return k > 0 && n >= k && memcmp(text + n - k, tag, k) == 0;
}

/* The penalties count the prompt's last repeat_last_n tokens as well as the generated ones, as
 * llama-server's do (it feeds every prompt token to the chain before the first pick): a prompt that
 * repeats a word makes the penalties avoid it from the first generated token on. */
static void penalise_prompt(struct llama_sampler *chain, const sipp_request *r) {
    int last_n = r->sampling.repeat_last_n;
    int from = last_n > 0 && r->n_prompt > last_n ? r->n_prompt - last_n : 0;
    for (int i = from; i < r->n_prompt; i++)
        if (r->prompt[i] >= 0) llama_sampler_accept(chain, r->prompt[i]); /* not an image's placeholders */
}

sipp_sampler *sipp_sampler_new(const sipp_model *m, sipp_request *r, char *err) {
    sipp_sampler *ss = calloc(1, sizeof *ss);
    if (!ss) return NULL;
    ss->n_vocab = llama_vocab_n_tokens(m->vocab);
    ss->chain = sipp_sampler_chain_new(m, &r->sampling, r->ignore_eos);
    if (ss->chain && has_penalties(&r->sampling)) penalise_prompt(ss->chain, r);
    ss->grammar = r->grammar;
    r->grammar = NULL;
    const chat_plan *p = r->chat.plan;
    if (r->chat.thinking_budget >= 0 && p) {
        /* A generation prompt that opens the block ("...<think>\n") starts the count at once: the
         * tag's tokens inside the prompt need not be the tag's tokens alone. */
        bool in_thinking = ends_with_tag(p->generation_prompt, p->thinking_start);
        ss->budget =
            chat_budget_sampler_new(m->vocab, p->thinking_start, (const char *const *)p->thinking_end,
                                    p->n_thinking_end, r->chat.thinking_budget, in_thinking, err);
        if (!ss->budget || (!in_thinking && prefill(m, p, ss->budget, err) != SIPP_OK)) {
            sipp_sampler_free(ss);
            return NULL;
        }
    }
    bool plain = !ss->grammar && !ss->budget && r->top_logprobs < 0;
    ss->greedy_in_place = sipp_sampling_is_greedy(&r->sampling) && plain;
    /* Sampled speculation reads the distribution of each position, which a repeat penalty would make
     * depend on the proposed tokens before them: penalties keep it off. */
    ss->spec_sampled = plain && r->sampling.temperature > 0.0f && !has_penalties(&r->sampling);
    if (ss->spec_sampled) {
        ss->transform = chain_build(m, &r->sampling, r->ignore_eos, false);
        ss->probs = malloc((size_t)ss->n_vocab * sizeof *ss->probs);
        uint64_t seed = r->sampling.seed == SIPP_SEED_RANDOM ? fresh_seed() : r->sampling.seed;
        ss->rng = seed * SPEC_RNG_MUL + 1; /* never 0: xorshift's fixed point */
    }
    if (!ss->greedy_in_place) ss->cand = malloc((size_t)ss->n_vocab * sizeof *ss->cand);
    if (!ss->chain || (!ss->greedy_in_place && !ss->cand) ||
        (ss->spec_sampled && (!ss->transform || !ss->probs))) {
        sipp_sampler_free(ss);
        return NULL;
    }
    return ss;
}

void sipp_sampler_free(sipp_sampler *ss) {
    if (!ss) return;
    if (ss->chain) llama_sampler_free(ss->chain);
    if (ss->grammar) llama_sampler_free(ss->grammar);
    if (ss->budget) llama_sampler_free(ss->budget);
    if (ss->transform) llama_sampler_free(ss->transform);
    free(ss->probs);
    free(ss->cand);
    free(ss);
}

static llama_token_data_array fill(sipp_sampler *ss, const float *logits) {
    for (int t = 0; t < ss->n_vocab; t++)
        ss->cand[t] = (llama_token_data){t, logits[t], 0.0f};
    return (llama_token_data_array){ss->cand, (size_t)ss->n_vocab, -1, false};
}

static llama_token pick(struct llama_sampler *chain, llama_token_data_array *a) {
    llama_sampler_apply(chain, a);
    return a->selected >= 0 && (size_t)a->selected < a->size ? a->data[a->selected].id : a->data[0].id;
}

/* The log-softmax of the allowed candidates: its normaliser, and the k most likely in *lp. */
static void top_logprobs(const llama_token_data_array *a, int k, sipp_logprob *lp, double *lse_out) {
    float max = -INFINITY;
    for (size_t i = 0; i < a->size; i++)
        if (a->data[i].logit > max) max = a->data[i].logit;
    double sum = 0;
    for (size_t i = 0; i < a->size; i++)
        if (isfinite(a->data[i].logit)) sum += exp((double)(a->data[i].logit - max));
    double lse = (double)max + log(sum > 0 ? sum : 1);
    *lse_out = lse;
    lp->n_top = 0;
    for (size_t i = 0; i < a->size && k > 0; i++) {
        float l = a->data[i].logit;
        if (!isfinite(l)) continue;
        int at = lp->n_top;
        if (at == k && l <= lp->top_logprob[k - 1] + (float)lse) continue;
        if (at < k)
            lp->n_top++;
        else
            at = k - 1;
        while (at > 0 && lp->top_logprob[at - 1] < (float)(l - lse)) {
            lp->top[at] = lp->top[at - 1];
            lp->top_logprob[at] = lp->top_logprob[at - 1];
            at--;
        }
        lp->top[at] = a->data[i].id;
        lp->top_logprob[at] = (float)(l - lse);
    }
}

static void record_logprob(sipp_request *r, const sipp_logprob *lp) {
    pthread_mutex_lock(&r->mu);
    if (r->n_logprobs == r->cap_logprobs) {
        size_t cap = r->cap_logprobs ? r->cap_logprobs * 2 : 64;
        sipp_logprob *g = realloc(r->logprobs, cap * sizeof *g);
        if (g) {
            r->logprobs = g;
            r->cap_logprobs = cap;
        }
    }
    if (r->n_logprobs < r->cap_logprobs) r->logprobs[r->n_logprobs++] = *lp;
    pthread_mutex_unlock(&r->mu);
}

llama_token sipp_sampler_sample(sipp_sampler *ss, sipp_engine *e, struct llama_context *ctx, int idx,
                                sipp_request *r) {
    const sipp_model *m = e->model;
    const float *logits = llama_get_logits_ith(ctx, idx);
    if (ss->greedy_in_place) return sipp_sample_argmax(m, logits, r->ignore_eos);
    bool want_lp = r->top_logprobs >= 0;
    llama_token_data_array a = fill(ss, logits);
    if (ss->budget) llama_sampler_apply(ss->budget, &a);
    llama_token t;
    if (ss->grammar && !want_lp) {
        t = pick(ss->chain, &a);
        llama_token_data one = {t, 1.0f, 0.0f};
        llama_token_data_array single = {&one, 1, -1, false};
        llama_sampler_apply(ss->grammar, &single);
        if (!isfinite(one.logit)) { /* refused: choose among what the grammar allows */
            a = fill(ss, logits);
            if (ss->budget) llama_sampler_apply(ss->budget, &a);
            llama_sampler_apply(ss->grammar, &a);
            t = pick(ss->chain, &a);
        }
    } else {
        if (ss->grammar) llama_sampler_apply(ss->grammar, &a);
        sipp_logprob lp = {0};
        double lse = 0;
        if (want_lp) top_logprobs(&a, r->top_logprobs, &lp, &lse);
        t = pick(ss->chain, &a);
        if (want_lp) {
            lp.token = t;
            lp.logprob = (float)((double)logits[t] - lse);
            record_logprob(r, &lp);
        }
    }
    char err[SIPP_ERROR_SIZE];
    if ((ss->grammar && !chat_sampler_accept(ss->grammar, t, err)) ||
        (ss->budget && !chat_sampler_accept(ss->budget, t, err)))
        return LLAMA_TOKEN_NULL;
    llama_sampler_accept(ss->chain, t);
    return t;
}

/* ---- speculative sampling ---------------------------------------------------------------------- */

void sipp_sampler_probs(sipp_sampler *ss, const float *logits, float *probs) {
    llama_token_data_array a = fill(ss, logits);
    llama_sampler_apply(ss->transform, &a);
    float max = -INFINITY;
    for (size_t i = 0; i < a.size; i++)
        if (a.data[i].logit > max) max = a.data[i].logit;
    memset(probs, 0, (size_t)ss->n_vocab * sizeof *probs);
    if (!isfinite(max)) return;
    double sum = 0;
    for (size_t i = 0; i < a.size; i++)
        sum += exp((double)(a.data[i].logit - max));
    for (size_t i = 0; i < a.size; i++)
        probs[a.data[i].id] = (float)(exp((double)(a.data[i].logit - max)) / sum);
}

double sipp_sampler_uniform(sipp_sampler *ss) {
    uint64_t x = ss->rng; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    ss->rng = x;
    return (double)((x * XORSHIFT_STAR_MUL) >> (64 - UNIFORM_BITS)) / (double)(UINT64_C(1) << UNIFORM_BITS);
}

llama_token sipp_sampler_draw(sipp_sampler *ss, const float *weights) {
    double total = 0;
    llama_token last = 0;
    for (int t = 0; t < ss->n_vocab; t++)
        if (weights[t] > 0) {
            total += weights[t];
            last = t;
        }
    double u = sipp_sampler_uniform(ss) * total, acc = 0;
    for (int t = 0; t < ss->n_vocab; t++) {
        if (weights[t] <= 0) continue;
        acc += weights[t];
        if (u < acc) return t;
    }
    return last; /* rounding at the very end */
}
