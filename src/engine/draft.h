/*
 * draft.h: speculation's proposals: a draft model's (draft.c) and prompt lookup's
 * (speculative.c).
 */
#ifndef SIPP_ENGINE_DRAFT_H
#define SIPP_ENGINE_DRAFT_H

#include "llama.h"
#include "sipp.h"

/* The draft model (draft.c). sipp_draft_open loads params.draft_model on the target's backend,
 * checks that it shares the target's vocabulary and makes its context; sipp_draft_close frees them. */
sipp_status sipp_draft_open(sipp_engine *e, char *errbuf);
void sipp_draft_close(sipp_engine *e);
/* Writes the draft model's proposal into s->draft / s->n_draft for every generating slot whose
 * draft_room > 0 (at most draft_room tokens each), in batched draft decodes shared by the slots. The
 * history of a slot is s->cache[0..n_cache] (next_token at n_cache). */
void sipp_draft_propose(sipp_engine *e);

/* Prompt lookup (speculative.c): up to max tokens that followed the latest earlier occurrence of
 * the last few tokens of hist[0..n); returns how many were written to out. */
int sipp_spec_ngram(const llama_token *hist, int n, int max, llama_token *out);

#endif
