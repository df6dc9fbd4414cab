/*
 * sampling.h: the sampler of a request: its chain, grammar, reasoning budget and logprobs
 * (sampling.c).
 */
#ifndef SIPP_ENGINE_SAMPLING_H
#define SIPP_ENGINE_SAMPLING_H

#include "engine/request.h"
#include "llama.h"
#include "model/model.h"
#include "sipp.h"

/* A request's sampler: the chain of its sampling parameters, and beside it the grammar (checked on
 * the chain's pick first, applied to the whole vocabulary only when it rejects the pick) and the
 * reasoning budget. */
typedef struct sipp_sampler {
    struct llama_sampler *chain;
    struct llama_sampler *grammar; /* NULL: unconstrained */
    struct llama_sampler *budget;  /* NULL: no thinking budget */
    llama_token_data *cand;        /* n_vocab candidates, reused every token */
    int n_vocab;
    bool greedy_in_place; /* argmax over the logits, nothing else to apply */
    /* Speculative sampling (temperature > 0, no penalty, grammar, budget or logprobs): the chain
     * without its draw, a distribution's room and the generator of the acceptance tests. */
    bool spec_sampled;
    struct llama_sampler *transform;
    float *probs;
    uint64_t rng;
} sipp_sampler;

/* Builds the sampler chain of a request. NULL on allocation failure. */
struct llama_sampler *sipp_sampler_chain_new(const sipp_model *model, const sipp_sampling *s,
                                             bool ignore_eos);

/* The sampler of a request (takes r->grammar). NULL with err on failure. */
sipp_sampler *sipp_sampler_new(const sipp_model *model, sipp_request *r, char *err);
void sipp_sampler_free(sipp_sampler *ss);
/* Samples the token of output idx, records its logprobs when the request wants them, and accepts
 * it into every sampler. LLAMA_TOKEN_NULL when the grammar cannot take the token. */
llama_token sipp_sampler_sample(sipp_sampler *ss, sipp_engine *e, struct llama_context *ctx, int idx,
                                sipp_request *r);
/* Makes the grammar sampler a request asks for (r->chat), checking the GBNF. */
sipp_status sipp_request_grammar(const sipp_model *m, sipp_request *r, char *err);

/* Speculative sampling (sampling.c). The distribution the request draws from at these logits (its
 * chain without the draw), dense over the vocabulary; a uniform number in [0, 1) of the sampler's
 * own generator; a token drawn in proportion to non-negative weights (not normalised). */
void sipp_sampler_probs(sipp_sampler *ss, const float *logits, float *probs);
double sipp_sampler_uniform(sipp_sampler *ss);
llama_token sipp_sampler_draw(sipp_sampler *ss, const float *weights);

/* Greedy without penalties: the token is the argmax of the logits, read in place (the chain's
 * result, without its copy of the whole vocabulary). ignore_eos excludes end-of-generation tokens. */
bool sipp_sampling_is_greedy(const sipp_sampling *s);
llama_token sipp_sample_argmax(const sipp_model *model, const float *logits, bool ignore_eos);
/* The index of the first largest of x[0..n) (NaNs never are; 0 for none). */
int sipp_argmax(const float *x, int n);

#endif
