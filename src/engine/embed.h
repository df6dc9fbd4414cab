/*
 * embed.h: the embedding context of an engine (embed.c).
 */
#ifndef SIPP_ENGINE_EMBED_H
#define SIPP_ENGINE_EMBED_H

#include "model/model.h"
#include "sipp.h"

typedef struct sipp_embedder sipp_embedder;

/* The embedding context (embed.c), with pooling (a llama_pooling_type; UNSPECIFIED: the model's). */
sipp_embedder *sipp_embedder_new(int pooling);
/* sipp_engine_params.pooling as a llama_pooling_type (NULL or "": UNSPECIFIED); false when unknown. */
bool sipp_embed_pooling_parse(const char *name, int *out);
void sipp_embedder_free(sipp_embedder *em);
sipp_status sipp_embed_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads,
                           const char *const *texts, size_t n_texts, const sipp_embed_options *opt,
                           float **out, int *n_embd, int *n_tokens, char *err);
sipp_status sipp_rerank_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads, const char *query,
                            const char *const *docs, size_t n_docs, const sipp_embed_options *opt,
                            float **scores, int *n_tokens, char *err);

#endif
