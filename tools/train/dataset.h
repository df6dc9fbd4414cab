/*
 * dataset.h: a corpus file as one stream of tokens, and the windows of it that sipp-train trains on.
 */
#ifndef SIPP_TRAIN_DATASET_H
#define SIPP_TRAIN_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h"

/* The corpus's documents one after the other, each as the model's tokenizer reads it (its BOS
 * first when the vocabulary adds one), followed by the vocabulary's EOS, so that the model learns
 * where a text ends. */
struct token_stream {
    llama_token *tok;
    size_t n, cap;
    size_t documents;
};

/* Reads and tokenizes a corpus: PATH ending in .jsonl holds one JSON object a line whose "text" is
 * a document (blank lines are skipped); any other file is one document of plain UTF-8 text.
 * Special tokens written as text (ChatML's <|im_start|> in a vocabulary that has it) become those
 * tokens. False after reporting what is wrong (unreadable, a bad line, no text at all). */
bool corpus_tokenize(const char *path, const struct llama_vocab *vocab, struct token_stream *ts);
void token_stream_free(struct token_stream *ts);

/* Windows: start offsets into a token stream, each of ctx + 1 tokens (ctx inputs, and as labels
 * the same tokens shifted by one). */
struct windows {
    size_t *start;
    size_t n;
};

/* The windows of [begin, end) every stride tokens; none when the range is shorter than ctx + 1. */
bool windows_make(struct windows *w, size_t begin, size_t end, size_t ctx, size_t stride);
/* A Fisher-Yates shuffle drawn from *rng (splitmix64 state): the seed fixes the order. */
void windows_shuffle(struct windows *w, uint64_t *rng);
void windows_free(struct windows *w);

#endif
