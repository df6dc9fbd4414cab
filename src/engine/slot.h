/*
 * slot.h: a slot, one llama sequence of the engine's context (the scheduler's unit).
 */
#ifndef SIPP_ENGINE_SLOT_H
#define SIPP_ENGINE_SLOT_H

#include "engine/request.h"
#include "engine/spec_cost.h"
#include "llama.h"
#include "sipp.h"

typedef struct sipp_sampler sipp_sampler;

/* A slot is one llama sequence of the engine's context. Engine thread only, except `req`, which
 * changes under engine->mu so that stats readers see a consistent view. */
typedef struct slot {
    int id;             /* the llama sequence id */
    sipp_request *req;  /* NULL when idle */
    llama_token *cache; /* the tokens whose KV this sequence holds, in order */
    int n_cache;
    int cap_cache;
    int n_prompt_done; /* prompt tokens in the KV so far */
    bool generating;   /* prompt done: next_token is to be fed */
    llama_token next_token;
    int i_logits;      /* index of this slot's output in the current batch, or -1 */
    int n_fed;         /* tokens this slot put in the current batch */
    uint64_t lora_sig; /* the LoRA scales its KV was computed under (lora.h) */
    sipp_sampler *smpl;
    llama_token draft[SIPP_DRAFT_MAX]; /* speculation's proposal riding behind next_token this step */
    int n_draft;
    int draft_room;      /* the most tokens this step may propose (0: the slot does not speculate) */
    llama_token *dcache; /* the tokens whose KV this slot's draft sequence holds, in order (draft.c) */
    int n_dcache;
    int cap_dcache;
    int d_logits;       /* index of this slot's output in the current draft batch, or -1 */
    float *dprobs;      /* a sampled request's draft distributions, draft_max rows of n_vocab (draft.c) */
    spec_accept accept; /* the request's acceptance of proposals so far, for the cut-off (spec_cost.c) */
    char *key;          /* the context_key pinned here, kept after the request ends */
    double last_used;
} slot;

#endif
