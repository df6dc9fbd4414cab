/*
 * perplexity.c: `sipp perplexity MODEL FILE [OPTIONS]`: the model's perplexity on a text file by
 * llama-perplexity's method (sipp_model_perplexity), printed the way that tool prints it: the running
 * estimate after each chunk ("[1]8.1234,[2]8.0456,..."), then "Final estimate: PPL = X +/- Y". The
 * two agree on the same model, file, --ctx-size and --batch-size (bench/perplexity.py compares them),
 * which makes the number a quality gate between backends and quantizations (docs/training.md).
 *
 * A run that cannot start (no such file, an empty file, a text under 2 x ctx-size tokens, a model
 * that does not load) is one line on stderr and exit 1; a bad flag is exit 2.
 */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"

#define BATCH_MAX (1 << 20)
#define CHUNKS_MAX (1 << 30)
#define MIN_CTX 8 /* sipp_perplexity_params.ctx_size's minimum */

typedef struct ppl_opts {
    cli_common c;
    int batch_size; /* 0: the library's default */
    int chunks;     /* 0: every whole chunk */
} ppl_opts;

static const cli_option opt_batch = {.name = "--batch-size",
                                     .arg = "N",
                                     .kind = CLI_OPT_INT,
                                     .offset = offsetof(ppl_opts, batch_size),
                                     .lo = 1,
                                     .hi = BATCH_MAX,
                                     .help = "tokens per decode (default 2048): whole chunks of --ctx-size "
                                             "when at least one"};
static const cli_option opt_chunks = {.name = "--chunks",
                                      .arg = "N",
                                      .kind = CLI_OPT_INT,
                                      .offset = offsetof(ppl_opts, chunks),
                                      .lo = 1,
                                      .hi = CHUNKS_MAX,
                                      .help = "evaluate at most N chunks (default: all)"};

static const cli_option *const options[] = {&cli_opt_ctx_size, &opt_batch,        &opt_chunks,
                                            &cli_opt_threads,  &cli_opt_backend,  &cli_opt_flash_attn,
                                            &cli_opt_json,     &cli_opt_artifact, NULL};

static const char about[] =
    "Measures MODEL's perplexity on the text in FILE by llama-perplexity's method: the text is tokenized\n"
    "once, cut into chunks of --ctx-size tokens (default 512), and the second half of each chunk is scored\n"
    "(the first half is context). Prints the running estimate after each chunk and the final estimate with\n"
    "its standard error, as llama-perplexity does; --json prints one object instead. The text needs at\n"
    "least 2 x ctx-size tokens.\n";

static const cli_command command = {.name = "perplexity",
                                    .synopsis = "perplexity MODEL FILE [OPTIONS]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 2,
                                    .args_hint = "a MODEL and a FILE only"};

typedef struct chunk_log {
    bool json;
    double *ppl; /* the running estimate after each chunk */
    int n, cap;
    const sipp_perplexity_params *params;
    int n_seq;
} chunk_log;

static bool on_chunk(int chunk, int n_chunks, double ppl, void *user) {
    chunk_log *log = user;
    if (log->n == log->cap) {
        int cap = log->cap ? log->cap * 2 : 64;
        double *grown = realloc(log->ppl, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        log->ppl = grown;
        log->cap = cap;
    }
    log->ppl[log->n++] = ppl;
    if (log->json) return true;
    if (chunk == 1)
        fprintf(stderr,
                "perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d, n_seq=%d\n",
                n_chunks, log->params->ctx_size, log->params->batch_size, log->n_seq);
    printf("[%d]%.4f,", chunk, ppl);
    fflush(stdout);
    return true;
}

/* FILE's text, NUL-terminated, *len bytes; NULL after reporting why. */
static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("perplexity: cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (cap - n < 65536) {
            char *grown = realloc(text, cap = cap * 2 + 65536 + 1);
            if (!grown) {
                free(text);
                fclose(f);
                cli_error("perplexity: out of memory reading '%s'", path);
                return NULL;
            }
            text = grown;
        }
        n += got = fread(text + n, 1, cap - n - 1, f);
    } while (got > 0);
    bool failed = ferror(f);
    fclose(f);
    if (failed || n == 0) {
        cli_error("perplexity: '%s' %s", path, failed ? "could not be read" : "is empty: give a text file");
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

static void print_json(const char *model, const sipp_model_info *info, const char *backend,
                       const sipp_perplexity_params *pp, const sipp_perplexity_result *r,
                       const chunk_log *log) {
    json_t *chunks = json_array();
    for (int i = 0; i < log->n; i++)
        json_array_append_new(chunks, json_real(log->ppl[i]));
    json_t *j = json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i, s:i, s:i, s:I, s:I, s:f, s:f, s:o}", "model",
                          model, "description", info->description, "backend", backend, "ppl", r->ppl,
                          "ppl_error", r->ppl_error, "ctx_size", pp->ctx_size, "batch_size", pp->batch_size,
                          "n_seq", r->n_seq, "n_chunks", r->n_chunks, "n_text_tokens",
                          (json_int_t)r->n_text_tokens, "n_scored", (json_int_t)r->n_scored, "seconds",
                          r->seconds, "tokens_per_second", r->tokens_per_second, "chunks", chunks);
    char *s = json_dumps(j, JSON_INDENT(2));
    puts(s);
    free(s);
    json_decref(j);
}

int cmd_perplexity(int argc, char **argv) {
    ppl_opts o = {0};
    const char *args[2] = {NULL, NULL};
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, args, &n_args);
    if (rc != CLI_PARSED) return rc;
    if (n_args < 2) {
        cli_error("perplexity: %s (sipp perplexity MODEL FILE)",
                  n_args == 0 ? "no MODEL given" : "no FILE given");
        return EXIT_USAGE;
    }
    const char *backend = o.c.backend ? o.c.backend : "auto";
    char err[SIPP_ERROR_SIZE];
    if (sipp_backend_check_name(backend, err) != SIPP_OK) {
        cli_error("perplexity: --backend: %s", err);
        return EXIT_USAGE;
    }
    sipp_perplexity_params pp = sipp_perplexity_default_params();
    if (o.c.ctx_size) pp.ctx_size = o.c.ctx_size;
    if (o.batch_size) pp.batch_size = o.batch_size;
    if (o.chunks) pp.max_chunks = o.chunks;
    pp.threads = o.c.threads;
    if (pp.ctx_size < MIN_CTX) {
        cli_error("perplexity: --ctx-size must be at least %d", MIN_CTX);
        return EXIT_USAGE;
    }
    /* What llama-perplexity does with a batch of at least a chunk: whole chunks only. */
    if (pp.batch_size >= pp.ctx_size) pp.batch_size -= pp.batch_size % pp.ctx_size;

    size_t len = 0;
    char *text = read_text(args[1], &len);
    if (!text) return EXIT_RUNTIME;
    if (!cli_runtime_init_for(o.c.artifact, backend)) {
        free(text);
        return EXIT_RUNTIME;
    }
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = backend;
    mp.flash_attn = o.c.flash_attn;
    sipp_model *m = NULL;
    if (sipp_model_load(args[0], &mp, &m, err) != SIPP_OK) {
        cli_error("perplexity: %s", err);
        free(text);
        return EXIT_RUNTIME;
    }
    chunk_log log = {.json = o.c.json,
                     .params = &pp,
                     .n_seq = pp.batch_size >= pp.ctx_size ? pp.batch_size / pp.ctx_size : 1};
    pp.on_chunk = on_chunk;
    pp.user = &log;
    sipp_perplexity_result r;
    sipp_status st = sipp_model_perplexity(m, text, len, &pp, &r, err);
    free(text);
    if (st != SIPP_OK) {
        if (log.n && !o.c.json) printf("\n");
        cli_error("perplexity: '%s': %s", args[1], err);
        sipp_model_free(m);
        free(log.ppl);
        return EXIT_RUNTIME;
    }
    sipp_model_info info;
    sipp_model_get_info(m, &info);
    if (o.c.json) {
        print_json(args[0], &info, sipp_model_backend(m)->backend, &pp, &r, &log);
    } else {
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_error);
        fflush(stdout); /* before the summary on stderr, so that a terminal shows them in order */
        fprintf(stderr,
                "perplexity: %s on %s, %d chunks of %d tokens, %lld tokens scored, %.2f s, %.1f tokens/s\n",
                info.description, sipp_model_backend(m)->backend, r.n_chunks, pp.ctx_size,
                (long long)r.n_scored, r.seconds, r.tokens_per_second);
    }
    sipp_model_free(m);
    free(log.ppl);
    return EXIT_OK;
}
