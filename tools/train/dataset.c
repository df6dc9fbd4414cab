/*
 * dataset.c: from a corpus file to the windows sipp-train trains on.
 *
 * The whole corpus is tokenized once into one stream (a few MB of text is a few million tokens,
 * 4 bytes each), and a window is only an offset into it: ggml's dataset object (ggml_opt_dataset)
 * would hold a copy of every window, and with windows that overlap by half, as training's are,
 * twice the stream. The trainer copies one window at a time into its graph's input, so memory
 * stays the stream's and the order of the windows is sipp-train's own seeded shuffle.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/splitmix.h"
#include "dataset.h"
#include "train.h"

#define READ_CHUNK ((size_t)1 << 20)
#define TOKEN_SLACK 16 /* tokens a document may take past one per byte: BOS, a leading space */
#define JSONL_SUFFIX ".jsonl"
#define TEXT_FIELD "text"

/* The file's bytes, NUL-terminated; read in chunks so that a pipe or /dev/stdin works too. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        train_report("--corpus %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < READ_CHUNK) {
            char *grown = realloc(buf, cap + READ_CHUNK + 1);
            if (!grown) break;
            buf = grown;
            cap += READ_CHUNK;
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    const bool failed = ferror(f) || !buf;
    const int err = errno;
    fclose(f);
    if (failed) {
        train_report("--corpus %s: cannot read it: %s", path, buf ? strerror(err) : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static bool is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

static bool has_suffix(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool reserve(struct token_stream *ts, size_t extra) {
    if (ts->cap - ts->n >= extra) return true;
    size_t cap = ts->cap ? ts->cap * 2 : extra;
    if (cap < ts->n + extra) cap = ts->n + extra;
    llama_token *tok = realloc(ts->tok, cap * sizeof *tok);
    if (!tok) return false;
    ts->tok = tok;
    ts->cap = cap;
    return true;
}

static int32_t room(const struct token_stream *ts) {
    const size_t r = ts->cap - ts->n;
    return r > INT32_MAX ? INT32_MAX : (int32_t)r;
}

/* Appends one document: its tokens, then EOS unless the tokenizer already ended it with one. */
static bool tokenize_document(const struct llama_vocab *vocab, const char *text, size_t len,
                              struct token_stream *ts) {
    if (len > (size_t)INT32_MAX - TOKEN_SLACK) {
        train_report("a document of %zu bytes is longer than the tokenizer takes (2 GiB); split it", len);
        return false;
    }
    if (!reserve(ts, len + TOKEN_SLACK)) goto oom;
    int32_t n = llama_tokenize(vocab, text, (int32_t)len, ts->tok + ts->n, room(ts), true, true);
    if (n < 0) {
        if (!reserve(ts, (size_t)-n + 1)) goto oom;
        n = llama_tokenize(vocab, text, (int32_t)len, ts->tok + ts->n, room(ts), true, true);
        if (n < 0) goto oom;
    }
    ts->n += (size_t)n;
    const llama_token eos = llama_vocab_eos(vocab);
    if (eos != LLAMA_TOKEN_NULL && (n == 0 || ts->tok[ts->n - 1] != eos)) {
        if (!reserve(ts, 1)) goto oom;
        ts->tok[ts->n++] = eos;
    }
    ts->documents++;
    return true;
oom:
    train_report("out of memory tokenizing the corpus (%zu tokens so far)", ts->n);
    return false;
}

static bool tokenize_record(const char *path, size_t line_no, const char *line, size_t n,
                            const struct llama_vocab *vocab, struct token_stream *ts) {
    json_error_t jerr;
    json_t *obj = json_loadb(line, n, 0, &jerr);
    if (!obj) {
        train_report("--corpus %s line %zu: not JSON (%s)", path, line_no, jerr.text);
        return false;
    }
    const json_t *text = json_object_get(obj, TEXT_FIELD);
    bool ok = json_is_string(text);
    if (!ok)
        train_report("--corpus %s line %zu: expected an object with a \"" TEXT_FIELD
                     "\" string, like {\"text\": \"...\"}",
                     path, line_no);
    else if (!is_blank(json_string_value(text), json_string_length(text)))
        ok = tokenize_document(vocab, json_string_value(text), json_string_length(text), ts);
    json_decref(obj);
    return ok;
}

static bool tokenize_jsonl(const char *path, const char *buf, size_t len, const struct llama_vocab *vocab,
                           struct token_stream *ts) {
    size_t line_no = 0;
    for (const char *p = buf, *end = buf + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line_no++;
        if (!is_blank(p, n) && !tokenize_record(path, line_no, p, n, vocab, ts)) return false;
        p += n + 1;
    }
    return true;
}

bool corpus_tokenize(const char *path, const struct llama_vocab *vocab, struct token_stream *ts) {
    size_t len = 0;
    char *buf = read_file(path, &len);
    if (!buf) return false;
    bool ok;
    if (has_suffix(path, JSONL_SUFFIX))
        ok = tokenize_jsonl(path, buf, len, vocab, ts);
    else
        ok = is_blank(buf, len) || tokenize_document(vocab, buf, len, ts);
    free(buf);
    if (ok && ts->documents == 0) {
        train_report("--corpus %s is empty: it has no text to train on%s", path,
                     has_suffix(path, JSONL_SUFFIX) ? " (no line with a non-empty \"text\")" : "");
        ok = false;
    }
    return ok;
}

void token_stream_free(struct token_stream *ts) {
    free(ts->tok);
    *ts = (struct token_stream){0};
}

bool windows_make(struct windows *w, size_t begin, size_t end, size_t ctx, size_t stride) {
    *w = (struct windows){0};
    if (end < begin || end - begin < ctx + 1) return true;
    const size_t n = (end - begin - ctx - 1) / stride + 1;
    w->start = malloc(n * sizeof *w->start);
    if (!w->start) return false;
    for (size_t i = 0; i < n; i++)
        w->start[i] = begin + i * stride;
    w->n = n;
    return true;
}

void windows_shuffle(struct windows *w, uint64_t *rng) {
    for (size_t i = w->n; i > 1; i--) {
        const size_t j = (size_t)(splitmix_next(rng) % i);
        const size_t tmp = w->start[i - 1];
        w->start[i - 1] = w->start[j];
        w->start[j] = tmp;
    }
}

void windows_free(struct windows *w) {
    free(w->start);
    *w = (struct windows){0};
}
