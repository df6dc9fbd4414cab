/*
 * tokvec.c: checks sipp's tokenizer against llama.cpp's test vectors.
 *
 *   build/tests/tokvec VOCAB.gguf
 *
 * VOCAB.gguf is one of llama.cpp's vocabulary-only models (models/ggml-vocab-*.gguf); beside it lie
 * VOCAB.gguf.inp, the texts, each followed by a line "__ggml_vocab_test__", and VOCAB.gguf.out, the
 * expected token ids of each text on one line, space-separated. They are read exactly as llama.cpp's
 * tests/test-tokenizer-0.cpp reads them: the texts are split on "\n__ggml_vocab_test__\n" (so a
 * text's own trailing newlines are kept and only the one before the separator is dropped), each .out
 * line is stripped of surrounding whitespace, and texts are tokenized with add_special = false and
 * parse_special = false.
 *
 * The model is loaded through the public API only (sipp_model_load with vocab_only), so this checks
 * the whole path a client uses: sipp_tokenize's buffer sizing included. It also checks that
 * detokenize(tokenize(text)) gives back multi-byte UTF-8 text unchanged.
 *
 * Prints "tokvec VOCAB: N passed, M failed" last and exits 1 on any failure (2 on bad usage or
 * unreadable files).
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"

#define SEPARATOR "\n__ggml_vocab_test__\n"
#define MAX_REPORTED_FAILURES 10

/* Round-trip texts: every UTF-8 length, and text without a leading space (an SPM tokenizer adds a
 * space prefix when tokenizing and must remove it again when detokenizing). */
static const char *const ROUND_TRIP[] = {
    "h\xC3\xA9llo w\xC3\xB6rld \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x8E\x89",
    "\xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE \xD0\xBD\xD0\xB0 "
    "\xD0\x91\xD1\x8A\xD0\xBB\xD0\xB3\xD0\xB0\xD1\x80\xD1\x81\xD0\xBA\xD0\xB8",
    "\xF0\x9F\x9A\x80 (normal) \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F emoji \xE2\x9C\x85",
    "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8"
    "apple\xE5\xB7\xA5\xE4\xBD\x9C"
    "1314151\xE5\xA4\xA9\xEF\xBD\x9E",
};

typedef struct counts {
    int passed;
    int failed;
} counts;

static char *read_file(const char *path, size_t *len_out) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tokvec: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "tokvec: out of memory reading '%s'\n", path);
        return NULL;
    }
    buf[len] = '\0';
    *len_out = len;
    return buf;
}

/* Splits the .inp contents in place into texts (pointers and lengths), as test-tokenizer-0 does. */
static size_t split_inputs(char *raw, size_t len, char ***texts, size_t **lens) {
    size_t sep_len = strlen(SEPARATOR), n = 0, cap = 16;
    *texts = malloc(cap * sizeof **texts);
    *lens = malloc(cap * sizeof **lens);
    size_t pos = 0;
    while (*texts && *lens && pos < len) {
        if (n == cap) {
            cap *= 2;
            char **t = realloc(*texts, cap * sizeof **texts);
            size_t *l = realloc(*lens, cap * sizeof **lens);
            if (t) *texts = t;
            if (l) *lens = l;
            if (!t || !l) return 0;
        }
        char *next = memmem(raw + pos, len - pos, SEPARATOR, sep_len);
        size_t end = next ? (size_t)(next - raw) : len;
        (*texts)[n] = raw + pos;
        (*lens)[n] = end - pos;
        n++;
        if (!next) break;
        raw[end] = '\0'; /* texts are also usable as C strings for messages */
        pos = end + sep_len;
    }
    return n;
}

/* Splits the .out contents in place into lines. */
static size_t split_lines(char *raw, char ***lines) {
    size_t n = 0, cap = 16;
    *lines = malloc(cap * sizeof **lines);
    char *p = raw;
    while (*lines && *p) {
        if (n == cap) {
            char **l = realloc(*lines, (cap *= 2) * sizeof **lines);
            if (!l) return 0;
            *lines = l;
        }
        char *nl = strchr(p, '\n');
        (*lines)[n++] = p;
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

/* Parses a line of space-separated token ids; returns the count or -1 on a malformed line. */
static int parse_ids(const char *line, int32_t *ids, int cap) {
    int n = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (!*p) return n;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || n == cap) return -1;
        ids[n++] = (int32_t)v;
        p = end;
    }
}

/* Tokenizes with sipp_tokenize's sizing protocol: a call with cap 0 says how many are needed. */
static int32_t *tokenize(sipp_model *m, const char *text, size_t len, size_t *n_out) {
    size_t need = 0;
    sipp_status st = sipp_tokenize(m, text, len, false, false, NULL, 0, &need);
    if (st != SIPP_OK && st != SIPP_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "tokvec: sizing call failed: %s\n", sipp_status_name(st));
        return NULL;
    }
    if ((need > 0) != (st == SIPP_ERR_INVALID_ARGUMENT)) {
        fprintf(stderr, "tokvec: sizing call with cap 0 returned %s for %zu tokens\n", sipp_status_name(st),
                need);
        return NULL;
    }
    int32_t *toks = malloc((need + 1) * sizeof *toks);
    if (!toks) return NULL;
    size_t got = 0;
    st = sipp_tokenize(m, text, len, false, false, toks, need + 1, &got);
    if (st != SIPP_OK || got != need) {
        fprintf(stderr, "tokvec: tokenize failed (%s; %zu tokens, sizing said %zu): %s\n",
                sipp_status_name(st), got, need, sipp_model_last_error(m));
        free(toks);
        return NULL;
    }
    *n_out = got;
    return toks;
}

static char *detokenize(sipp_model *m, const int32_t *toks, size_t n) {
    size_t need = 0;
    sipp_detokenize(m, toks, n, false, NULL, 0, &need);
    char *buf = malloc(need + 1);
    if (!buf) return NULL;
    size_t got = 0;
    sipp_status st = sipp_detokenize(m, toks, n, false, buf, need + 1, &got);
    if (st != SIPP_OK || got != need || strlen(buf) != got) {
        fprintf(stderr, "tokvec: detokenize failed (%s; %zu bytes, sizing said %zu): %s\n",
                sipp_status_name(st), got, need, sipp_model_last_error(m));
        free(buf);
        return NULL;
    }
    return buf;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "    %s:", label);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

static void check_vectors(sipp_model *m, char **texts, const size_t *lens, char **lines, size_t n,
                          counts *c) {
    for (size_t i = 0; i < n; i++) {
        int cap = (int)strlen(lines[i]) / 2 + 1;
        int32_t *want = malloc((size_t)cap * sizeof *want);
        int n_want = want ? parse_ids(lines[i], want, cap) : -1;
        size_t n_got = 0;
        int32_t *got = n_want >= 0 ? tokenize(m, texts[i], lens[i], &n_got) : NULL;
        bool ok = got && (size_t)n_want == n_got && memcmp(got, want, n_got * sizeof *got) == 0;
        if (ok) {
            c->passed++;
        } else {
            c->failed++;
            if (c->failed <= MAX_REPORTED_FAILURES) {
                fprintf(stderr, "  FAIL vector %zu: '%s'\n", i, texts[i]);
                if (n_want < 0)
                    fprintf(stderr, "    malformed expected line: '%s'\n", lines[i]);
                else
                    print_ids("want", want, (size_t)n_want);
                if (got) print_ids("got ", got, n_got);
            }
        }
        free(got);
        free(want);
    }
}

static void check_round_trips(sipp_model *m, counts *c) {
    for (size_t i = 0; i < sizeof ROUND_TRIP / sizeof ROUND_TRIP[0]; i++) {
        const char *text = ROUND_TRIP[i];
        size_t n = 0;
        int32_t *toks = tokenize(m, text, strlen(text), &n);
        char *back = toks ? detokenize(m, toks, n) : NULL;
        if (back && strcmp(back, text) == 0) {
            c->passed++;
        } else {
            c->failed++;
            fprintf(stderr, "  FAIL round trip: '%s' came back as '%s'\n", text, back ? back : "(error)");
        }
        free(back);
        free(toks);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: tokvec VOCAB.gguf   (reads VOCAB.gguf.inp and VOCAB.gguf.out beside it)\n");
        return 2;
    }
    const char *path = argv[1];
    char *path_copy = strdup(path);
    const char *label = path_copy ? basename(path_copy) : path;

    size_t plen = strlen(path) + 5;
    char *inp_path = malloc(plen), *out_path = malloc(plen);
    if (!inp_path || !out_path) return 2;
    snprintf(inp_path, plen, "%s.inp", path);
    snprintf(out_path, plen, "%s.out", path);
    size_t inp_len = 0, out_len = 0;
    char *inp = read_file(inp_path, &inp_len);
    char *out = read_file(out_path, &out_len);
    if (!inp || !out) return 2;

    char **texts = NULL, **lines = NULL;
    size_t *lens = NULL;
    size_t n_texts = split_inputs(inp, inp_len, &texts, &lens);
    size_t n_lines = split_lines(out, &lines);
    if (n_texts == 0 || n_texts != n_lines) {
        fprintf(stderr, "tokvec: %s has %zu texts but %s has %zu lines\n", inp_path, n_texts, out_path,
                n_lines);
        return 2;
    }

    sipp_runtime_params rp = sipp_runtime_default_params();
    rp.log_level = SIPP_LOG_QUIET;
    char err[SIPP_ERROR_SIZE];
    if (sipp_runtime_init(&rp, err) != SIPP_OK) {
        fprintf(stderr, "tokvec: %s\n", err);
        return 2;
    }
    sipp_model_params mp = sipp_model_default_params();
    mp.vocab_only = true;
    sipp_model *m = NULL;
    counts c = {0, 0};
    if (sipp_model_load(path, &mp, &m, err) != SIPP_OK) {
        fprintf(stderr, "tokvec: %s\n", err);
        c.failed = (int)n_texts;
    } else {
        check_vectors(m, texts, lens, lines, n_texts, &c);
        check_round_trips(m, &c);
        sipp_model_free(m);
    }
    printf("tokvec %s: %d passed, %d failed\n", label, c.passed, c.failed);

    free(texts);
    free(lens);
    free(lines);
    free(inp);
    free(out);
    free(inp_path);
    free(out_path);
    free(path_copy);
    return c.failed ? 1 : 0;
}
