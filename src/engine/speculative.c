/*
 * speculative.c: proposals for speculative decoding without a draft model (n-gram / prompt lookup).
 *
 * Output that repeats its input (an edit, a summary quoting its source, code that reuses names)
 * continues the way an earlier occurrence of its last few tokens continued. The proposal is what
 * followed the latest earlier occurrence of the longest suffix of NGRAM_MAX down to NGRAM_MIN
 * tokens, searched over everything the slot holds: the prompt and the output so far. The scheduler
 * puts the proposal behind the slot's next token in the same batch and keeps the prefix the model
 * confirms (scheduler.c, verify_drafts), so a wrong proposal costs batch rows, never a wrong token.
 *
 * One-token suffixes match too often by chance (a space, a comma) to pay for the rows they take,
 * so the shortest suffix is two tokens.
 */
#include "engine/draft.h"
#include "model/model.h"

#define NGRAM_MAX 3
#define NGRAM_MIN 2

/* The latest start i < n - g of hist[n-g..n) earlier in hist, or -1. */
static int latest_match(const llama_token *hist, int n, int g) {
    const llama_token *tail = hist + n - g;
    for (int i = n - g - 1; i >= 0; i--) {
        int k = 0;
        while (k < g && hist[i + k] == tail[k])
            k++;
        if (k == g) return i;
    }
    return -1;
}

int sipp_spec_ngram(const llama_token *hist, int n, int max, llama_token *out) {
    for (int g = NGRAM_MAX; g >= NGRAM_MIN; g--) {
        if (n <= g) continue;
        int i = latest_match(hist, n, g);
        if (i < 0) continue;
        int from = i + g, k = 0;
        while (k < max && from + k < n) {
            out[k] = hist[from + k];
            k++;
        }
        if (k > 0) return k;
    }
    return 0;
}
