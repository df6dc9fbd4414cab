/*
 * model.h: the inside of a sipp_model (internal). The engine needs the llama handles and the
 * decisions the load made (CPU-only loads turn off every kind of offload in the context too).
 */
#ifndef SIPP_ENGINE_MODEL_H
#define SIPP_ENGINE_MODEL_H

#include <limits.h>
#include <pthread.h>

#include "llama.h"
#include "sipp.h"
#include "util/last_error.h"

struct sipp_model {
    struct llama_model *lm;
    const struct llama_vocab *vocab;
    char path[PATH_MAX];
    sipp_backend_decision decision;
    sipp_model_info info;
    bool cpu_only;
    char lease[96];    /* the GPU residency lease this model holds, "" for none */
    llama_token *eog;  /* every end-of-generation token, for ignore_eos */
    int n_eog;
    sipp_last_error error;   /* per thread: tokenize and chat render are [any thread] */
    struct chat_cache *chat; /* parsed chat templates (src/chat), cached as they are used */
    sipp_memory mem;         /* the weight buffers llama.cpp allocated (memory.c) */
};

/* Sets the calling thread's last error on the model and returns status. */
sipp_status sipp_model_fail(sipp_model *m, sipp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* llama.cpp's context defaults with the load's backend policy applied: a CPU load keeps the KV cache,
 * every op and attention on the CPU (no KV, op or flash-attention offload). Every context sipp makes
 * of a model (generation, embeddings, inspection) starts from here. */
struct llama_context_params sipp_model_context_params(const sipp_model *m);

/* Tokenizes into a malloc'ed array; *n_out tokens. */
sipp_status sipp_model_tokenize_alloc(sipp_model *m, const char *text, bool add_special, bool parse_special,
                                      llama_token **out, int *n_out, char *errbuf);

/* The text of one token (special tokens rendered only when render_special). Appends to buf. */
int sipp_model_token_piece(const sipp_model *m, llama_token t, bool render_special, char *buf, int cap);

#endif
