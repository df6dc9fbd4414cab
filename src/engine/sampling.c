/*
 * sampling.c: a request's sampling parameters as a llama.cpp sampler chain.
 *
 * The order follows llama.cpp's defaults (penalties, top-k, top-p, min-p, temperature, then the
 * random draw), so that a request with the same parameters and seed samples as llama-cli would.
 * Temperature 0 is greedy: deterministic and independent of the seed. ignore_eos is a -inf bias on
 * every end-of-generation token, as llama-server does, so the model cannot pick one.
 *
 * Greedy decoding without penalties skips the chain: the chain would copy all logits into a
 * candidate array (the vocabulary is 128k tokens for Llama 3) to take their maximum, every token.
 * sipp_sample_argmax reads the logits in place and gives the same token.
 */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine_internal.h"

static uint32_t fresh_seed(void) {
    static atomic_uint counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint32_t)(ts.tv_nsec ^ ts.tv_sec ^ (atomic_fetch_add(&counter, 1) * 2654435761u));
}

struct llama_sampler *sipp_sampler_new(const sipp_model *m, const sipp_sampling *s, bool ignore_eos) {
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
        for (int i = 0; i < m->n_eog; i++) bias[i] = (llama_logit_bias){m->eog[i], -INFINITY};
        llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(n_vocab, m->n_eog, bias));
        free(bias);
    }
    if (s->repeat_penalty != 1.0f && s->repeat_last_n != 0)
        llama_sampler_chain_add(chain, llama_sampler_init_penalties(n_vocab, s->repeat_last_n, s->repeat_penalty, 0.0f, 0.0f));
    if (s->temperature <= 0.0f) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
        return chain;
    }
    if (s->top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(s->top_k));
    if (s->top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(s->top_p, 1));
    if (s->min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(s->min_p, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(s->temperature));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(s->seed == SIPP_SEED_RANDOM ? fresh_seed() : s->seed));
    return chain;
}

bool sipp_sampling_is_greedy(const sipp_sampling *s) {
    return s->temperature <= 0.0f && (s->repeat_penalty == 1.0f || s->repeat_last_n == 0);
}

llama_token sipp_sample_argmax(const sipp_model *m, const float *logits, bool ignore_eos) {
    int n_vocab = m->info.n_vocab;
    llama_token best = 0;
    for (llama_token t = 1; t < n_vocab; t++)
        if (logits[t] > logits[best]) best = t;
    if (!ignore_eos || !llama_vocab_is_eog(m->vocab, best)) return best;
    /* The rare case: the best is an end-of-generation token that must not be chosen. */
    best = -1;
    for (llama_token t = 0; t < n_vocab; t++)
        if (!llama_vocab_is_eog(m->vocab, t) && (best < 0 || logits[t] > logits[best])) best = t;
    return best < 0 ? 0 : best;
}
