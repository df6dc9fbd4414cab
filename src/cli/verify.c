/*
 * verify.c: `sipp verify MODEL --backends cpu,vulkan`: prove that backends agree on a model's outputs.
 *
 * The work is sipp_verify_run (src/verify): this file turns the command line into its parameters,
 * reads --prompts, prints progress on a terminal, writes --manifest, and prints the report (text, or
 * the JSON without the bulky per-position top tokens). One threshold exceeded, or a contract of
 * --against changed, exits with status 3 and names the metric and the backend.
 *
 * Exit status: 0 everything within thresholds, 1 a runtime failure, 2 bad usage, 3 a threshold
 * exceeded or a contract changed.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"

enum { EXIT_DRIFT = 3 };

#define MAX_LINE (1 << 16)
#define SELF_EXE "/proc/self/exe"
#define THRESHOLD_MAX 1e9
#define GREEDY_TOKENS_MAX 4096
#define BENCH_TOKENS_MAX (1 << 16)
#define BENCH_REPS_MAX 1000
#define PPL_CTX_MAX (1 << 20)
#define PPL_CHUNKS_MAX (1 << 20)

typedef struct verify_opts {
    cli_common c; /* --artifact, --threads, --json, --rpc */
    const char *backends_arg, *prompts_file, *manifest_out;
    sipp_verify_params p;
    char *backend_names[SIPP_VERIFY_MAX_BACKENDS];
    char *prompts[SIPP_VERIFY_MAX_PROMPTS];
    int n_prompts;
    char *backends_copy;
    bool no_mmproj_offload;
} verify_opts;

/* ---- the options: one table parses them and prints --help ---- */

/* A threshold: the number, and its bit, so that it wins over a manifest's. */
static bool parse_threshold(cli_args *a, const cli_option *opt, void *opts) {
    float v;
    if (!cli_float(a, opt->name, 0, THRESHOLD_MAX, &v)) return false;
    *(double *)((char *)opts + opt->offset) = v;
    ((verify_opts *)opts)->p.thresholds_given |= opt->bit;
    return true;
}

#define THRESHOLD(flag, field, bit_, text)                                                                   \
    {                                                                                                        \
        .name = flag, .arg = "X", .kind = CLI_OPT_CUSTOM,                                                    \
        .offset = offsetof(verify_opts, p.thresholds.field), .bit = bit_, .parse = parse_threshold,          \
        .help = text                                                                                         \
    }

static const cli_option opt_max_kl =
    THRESHOLD("--max-kl", max_kl, SIPP_VERIFY_MAX_KL, "mean KL against the reference, nats");
static const cli_option opt_max_kl_max = THRESHOLD("--max-kl-max", max_kl_max, SIPP_VERIFY_MAX_KL_MAX,
                                                   "the worst position's KL against the reference");
static const cli_option opt_min_top1 =
    THRESHOLD("--min-top1", min_top1, SIPP_VERIFY_MIN_TOP1, "top-1 agreement with the reference, a fraction");
static const cli_option opt_max_cached_kl =
    THRESHOLD("--max-cached-kl", max_cached_kl, SIPP_VERIFY_MAX_CACHED_KL,
              "mean KL of cached decoding against one batched prefill");
static const cli_option opt_min_cached_top1 =
    THRESHOLD("--min-cached-top1", min_cached_top1, SIPP_VERIFY_MIN_CACHED_TOP1,
              "top-1 agreement of cached decoding with one batched prefill");
static const cli_option opt_min_greedy = THRESHOLD("--min-greedy", min_greedy, SIPP_VERIFY_MIN_GREEDY,
                                                   "the fraction of greedy tokens equal to the reference's");
static const cli_option opt_ppl_max_drift =
    THRESHOLD("--ppl-max-drift", ppl_max_drift, SIPP_VERIFY_PPL_MAX_DRIFT,
              "relative perplexity drift allowed between backends (|ppl - ref| / ref)");
static const cli_option opt_ppl_max_drift_quant =
    THRESHOLD("--ppl-max-drift-quant", ppl_max_drift_quant, SIPP_VERIFY_PPL_MAX_DRIFT_QUANT,
              "with --against another quantization: relative drift allowed per quantization step");
static const cli_option opt_speed_tolerance =
    THRESHOLD("--speed-tolerance", speed_tolerance, SIPP_VERIFY_SPEED_TOLERANCE,
              "how much slower than --against's bench figures pp and tg may be, a fraction");

static const cli_option opt_backends = {
    .name = "--backends",
    .arg = "cpu,vulkan[,...]",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(verify_opts, backends_arg),
    .help = "the backends to compare (with --against: the manifest's); NAME+fa or NAME-fa\n"
            "runs NAME with flash attention on or off"};
static const cli_option opt_ref = {.name = "--ref",
                                   .arg = "NAME",
                                   .kind = CLI_OPT_STRING,
                                   .offset = offsetof(verify_opts, p.ref),
                                   .help = "the reference backend (default cpu)"};
static const cli_option opt_prompts = {.name = "--prompts",
                                       .arg = "FILE",
                                       .kind = CLI_OPT_STRING,
                                       .offset = offsetof(verify_opts, prompts_file),
                                       .help = "the prompts, one per line (default: the built-in ones)"};
static const cli_option opt_manifest = {.name = "--manifest",
                                        .arg = "OUT",
                                        .kind = CLI_OPT_STRING,
                                        .offset = offsetof(verify_opts, manifest_out),
                                        .help = "write the JSON manifest of the run to OUT"};
static const cli_option opt_against = {.name = "--against",
                                       .arg = "MANIFEST",
                                       .kind = CLI_OPT_STRING,
                                       .offset = offsetof(verify_opts, p.against),
                                       .help = "rerun what MANIFEST recorded and report its contracts"};
static const cli_option opt_greedy_tokens = {.name = "--greedy-tokens",
                                             .arg = "N",
                                             .kind = CLI_OPT_INT,
                                             .offset = offsetof(verify_opts, p.greedy_tokens),
                                             .lo = 0,
                                             .hi = GREEDY_TOKENS_MAX,
                                             .help = "greedy tokens per prompt (default 32)"};
static const cli_option opt_bench = {.name = "--bench",
                                     .kind = CLI_OPT_FLAG,
                                     .offset = offsetof(verify_opts, p.bench),
                                     .help = "record `sipp bench` figures in the manifest"};
static const cli_option opt_bench_p = {.name = "--bench-p",
                                       .arg = "N",
                                       .kind = CLI_OPT_INT,
                                       .offset = offsetof(verify_opts, p.bench_pp),
                                       .lo = 0,
                                       .hi = BENCH_TOKENS_MAX,
                                       .help = "--bench's prompt tokens, as bench -p (default 128)"};
static const cli_option opt_bench_n = {.name = "--bench-n",
                                       .arg = "N",
                                       .kind = CLI_OPT_INT,
                                       .offset = offsetof(verify_opts, p.bench_tg),
                                       .lo = 0,
                                       .hi = BENCH_TOKENS_MAX,
                                       .help = "--bench's generated tokens, as bench -n (default 32)"};
static const cli_option opt_bench_r = {.name = "--bench-r",
                                       .arg = "N",
                                       .kind = CLI_OPT_INT,
                                       .offset = offsetof(verify_opts, p.bench_reps),
                                       .lo = 1,
                                       .hi = BENCH_REPS_MAX,
                                       .help = "--bench's repetitions, as bench -r (default 3)"};
static const cli_option opt_mmproj = {.name = "--mmproj",
                                      .arg = "FILE|auto",
                                      .kind = CLI_OPT_STRING,
                                      .offset = offsetof(verify_opts, p.mmproj),
                                      .help =
                                          "the model's projector: adds the image case (a fixed image and\n"
                                          "prompt on every backend); auto: the mmproj-*.gguf beside MODEL"};
static const cli_option opt_no_mmproj_offload = {.name = "--no-mmproj-offload",
                                                 .kind = CLI_OPT_FLAG,
                                                 .offset = offsetof(verify_opts, no_mmproj_offload),
                                                 .help = "run the projector on the CPU on every backend"};
static const cli_option opt_ppl_text = {.name = "--ppl-text",
                                        .arg = "FILE",
                                        .kind = CLI_OPT_STRING,
                                        .offset = offsetof(verify_opts, p.ppl_text),
                                        .help = "a held-out text: adds the perplexity case on every backend"};
static const cli_option opt_ppl_ctx = {.name = "--ppl-ctx",
                                       .arg = "N",
                                       .kind = CLI_OPT_INT,
                                       .offset = offsetof(verify_opts, p.ppl_ctx),
                                       .lo = 8,
                                       .hi = PPL_CTX_MAX,
                                       .help = "the perplexity case's chunk, tokens (default 512)"};
static const cli_option opt_ppl_chunks = {.name = "--ppl-chunks",
                                          .arg = "N",
                                          .kind = CLI_OPT_INT,
                                          .offset = offsetof(verify_opts, p.ppl_chunks),
                                          .lo = 1,
                                          .hi = PPL_CHUNKS_MAX,
                                          .help = "at most N chunks of the text (default: all)"};
static const cli_option opt_audio = {.name = "--audio",
                                     .arg = "FILE",
                                     .kind = CLI_OPT_STRING,
                                     .offset = offsetof(verify_opts, p.audio),
                                     .help =
                                         "a whisper model's clip (WAV, MP3, FLAC; at most 30 s; default: a\n"
                                         "built-in one)"};
static const cli_option opt_no_bench = {.name = "--no-bench",
                                        .kind = CLI_OPT_FLAG,
                                        .offset = offsetof(verify_opts, p.no_bench),
                                        .help = "with --against: skip the speed contract"};

static const cli_option *const options[] = {&opt_backends,
                                            &opt_ref,
                                            &opt_prompts,
                                            &cli_opt_json,
                                            &opt_manifest,
                                            &opt_against,
                                            &cli_opt_threads,
                                            &opt_greedy_tokens,
                                            &opt_max_kl,
                                            &opt_max_kl_max,
                                            &opt_min_top1,
                                            &opt_max_cached_kl,
                                            &opt_min_cached_top1,
                                            &opt_min_greedy,
                                            &opt_mmproj,
                                            &cli_opt_lora,
                                            &opt_no_mmproj_offload,
                                            &opt_ppl_text,
                                            &opt_ppl_ctx,
                                            &opt_ppl_chunks,
                                            &opt_ppl_max_drift,
                                            &opt_ppl_max_drift_quant,
                                            &opt_audio,
                                            &opt_bench,
                                            &opt_bench_p,
                                            &opt_bench_n,
                                            &opt_bench_r,
                                            &opt_speed_tolerance,
                                            &opt_no_bench,
                                            &cli_opt_artifact,
                                            &cli_opt_rpc,
                                            NULL};

/* The text of --help; the %g are the default thresholds, printed from verify_default_thresholds(). */
static void print_about(FILE *out) {
    sipp_verify_thresholds t = sipp_verify_default_thresholds();
    fprintf(
        out,
        "Evaluates fixed prompts (built in, or FILE with one prompt per line) on every backend and compares\n"
        "each with the reference backend (--ref, default cpu): teacher-forced logits (max and RMS "
        "difference,\n"
        "mean and worst KL divergence of the softmax in nats, top-1 agreement, top-5 overlap), cached "
        "decoding\n"
        "(one token at a time against one batched prefill, on every backend), and greedy continuations\n"
        "(--greedy-tokens per prompt, temperature 0; agreement counted in tokens after re-tokenizing the "
        "text).\n\n"
        "Thresholds (defaults): --max-kl %g mean KL against the reference; --max-kl-max %g worst position;\n"
        "--min-top1 %g top-1 agreement; --max-cached-kl %g and --min-cached-top1 %g for cached decoding;\n"
        "--min-greedy %g fraction of greedy tokens equal to the reference's (greedy paths may split at a "
        "near\n"
        "tie, so by default they are reported, not gated). Exceeding one exits 3 naming metric and "
        "backend.\n\n"
        "--manifest OUT writes a JSON manifest: model (sha256, architecture, parameters, tensor types,\n"
        "tokenizer and vocabulary hash, chat template hash), runtime, host, devices, every figure, greedy\n"
        "output hashes, the graph per backend, and with --bench `sipp bench` figures (-p/-n/-r from "
        "--bench-*).\n"
        "--against MANIFEST reruns what it recorded here (MODEL and --backends default to the manifest's) "
        "and\n"
        "reports per contract (checkpoint, tokenizer, graph, numerics, speed) what holds and what changed;\n"
        "speed is checked when the manifest has bench figures (--no-bench skips it), allowing pp/tg to be\n"
        "--speed-tolerance (%g) slower. Exit status: 0 all within thresholds, 1 failure, 2 usage, 3 drift or "
        "a\n"
        "changed contract. Vulkan on a software device (lavapipe) needs GGML_VK_VISIBLE_DEVICES=0.\n"
        "'browser' in --backends is the WebAssembly runtime (make web) in headless Chromium, compared like "
        "a\n"
        "backend (needs /usr/bin/chromium and npm ci in tests/integration/web).\n\n"
        "A backend name followed by +fa or -fa runs that backend with flash attention on or off (without\n"
        "one, the load's default: off for cpu): --backends cpu,cpu+fa measures what flash attention "
        "changes.\n\n"
        "Two more cases run when given their input. --mmproj FILE (the image case): a fixed chat with a "
        "fixed\n"
        "image through each backend's projector; the logits after the image are gated like the prompts'\n"
        "(--max-kl, --max-kl-max, --min-top1) and its greedy continuation like theirs (--min-greedy).\n"
        "--ppl-text FILE (the perplexity case): the model's perplexity on the text on each backend; a "
        "relative\n"
        "drift from the reference above --ppl-max-drift (%g) fails. Against a manifest recorded on another\n"
        "quantization of the model, --ppl-max-drift-quant (%g) per quantization step applies instead.\n\n"
        "A whisper.cpp model (recipe whispercpp, told by its file) is compared on a clip instead: every "
        "backend\n"
        "encodes it (--audio FILE, or a built-in 5 s one) and decodes the start-of-transcript prompt; the\n"
        "decoder's logits after each prompt token are gated by --max-kl, --max-kl-max and --min-top1 (the\n"
        "encoder is checked through them: whisper.cpp exports no getter for its output).\n",
        t.max_kl, t.max_kl_max, t.min_top1, t.max_cached_kl, t.min_cached_top1, t.min_greedy,
        t.speed_tolerance, t.ppl_max_drift, t.ppl_max_drift_quant);
}

static const cli_command command = {.name = "verify",
                                    .synopsis = "verify MODEL --backends cpu,vulkan[,cuda...] [OPTIONS]",
                                    .options = options,
                                    .max_args = 1,
                                    .args_hint = "one MODEL only",
                                    .print_about = print_about};

/* --backends cpu,vulkan: the names as given; sipp_verify_run checks them. */
static bool split_backends(verify_opts *o, const char *list) {
    if (!(o->backends_copy = strdup(list))) return false;
    char *save = NULL;
    for (char *t = strtok_r(o->backends_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->p.n_backends == SIPP_VERIFY_MAX_BACKENDS) {
            cli_error("verify: --backends: at most %d backends", SIPP_VERIFY_MAX_BACKENDS);
            return false;
        }
        o->backend_names[o->p.n_backends++] = t;
    }
    o->p.backends = (const char *const *)o->backend_names;
    return true;
}

/* Returns CLI_PARSED, EXIT_OK after --help, or EXIT_USAGE after printing what is wrong. */
static int parse(int argc, char **argv, verify_opts *o) {
    memset(o, 0, sizeof *o);
    o->p = sipp_verify_default_params();
    int n_args;
    int rc = cli_parse(&command, argc, argv, o, &o->p.model, &n_args);
    if (rc != CLI_PARSED) return rc;
    o->p.threads = o->c.threads;
    o->p.artifact = o->c.artifact;
    o->p.mmproj_offload = !o->no_mmproj_offload;
    o->p.lora = o->c.lora;
    o->p.n_lora = (size_t)o->c.n_lora;
    if (o->backends_arg && !split_backends(o, o->backends_arg)) return EXIT_USAGE;
    return CLI_PARSED;
}

/* One prompt per line; empty lines are skipped; "\n" in a line stays literal. */
static int read_prompts(const char *path, verify_opts *o) {
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_error("verify: cannot read --prompts '%s': %m", path);
        return EXIT_RUNTIME;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0) continue;
        if (len > MAX_LINE || o->n_prompts == SIPP_VERIFY_MAX_PROMPTS) {
            cli_error("verify: --prompts '%s' line %d: %s", path, lineno,
                      o->n_prompts == SIPP_VERIFY_MAX_PROMPTS ? "more than 64 prompts; use fewer"
                                                              : "longer than 64 KiB");
            free(line);
            fclose(f);
            return EXIT_USAGE;
        }
        o->prompts[o->n_prompts++] = strdup(line);
    }
    free(line);
    fclose(f);
    if (o->n_prompts == 0) {
        cli_error("verify: --prompts '%s' has no prompt (one per line)", path);
        return EXIT_USAGE;
    }
    o->p.prompts = (const char *const *)o->prompts;
    o->p.n_prompts = (size_t)o->n_prompts;
    return EXIT_OK;
}

static void on_progress(double seconds, const char *backend, const char *stage, void *user) {
    fprintf(stderr, "verify: %6.1f s  %s: %s\n", seconds, backend, stage);
}

/* ---- the report, printed from its JSON ---- */

static const char *str(const json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static double num(const json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }

static long integer(const json_t *o, const char *key) {
    return (long)json_integer_value(json_object_get(o, key));
}

static const char *metric_unit(const char *metric) { return strstr(metric, "kl") ? " nats" : ""; }

static void print_metrics_row_in(int width, const char *backend, const json_t *m) {
    printf("  %-*s %10.3g %10.3g %10.3g %10.3g %7.1f%% %7.1f%%\n", width, backend, num(m, "max_abs_diff"),
           num(m, "rms_diff"), num(m, "kl_mean"), num(m, "kl_max"), 100 * num(m, "top1_agreement"),
           100 * num(m, "top5_overlap"));
}

static void print_metrics_row(const char *backend, const json_t *m) { print_metrics_row_in(8, backend, m); }

static void print_metrics_header(void) {
    printf("  %-8s %10s %10s %10s %10s %8s %8s\n", "backend", "max |d|", "rms", "KL mean", "KL max", "top-1",
           "top-5");
}

static void print_result(const json_t *r) {
    printf("result: %s\n",
           json_array_size(json_object_get(json_object_get(r, "verdict"), "failures")) ? "FAIL" : "pass");
}

#define KV_LABEL_WIDTH 20 /* "cpu+fa q8_0/q8_0" */

/* Each quantized KV cache type against the same backend's f16 cache (recorded, not gated). */
static void print_kv_cache(const json_t *backends) {
    printf("\nKV cache types (K/V) against f16, same backend (recorded, not gated)\n");
    printf("  %-*s %10s %10s %10s %10s %8s %8s\n", KV_LABEL_WIDTH, "backend K/V", "max |d|", "rms", "KL mean",
           "KL max", "top-1", "top-5");
    const char *name;
    const json_t *b, *e;
    size_t i;
    json_object_foreach((json_t *)backends, name, b)
        json_array_foreach(json_object_get(b, "kv_cache"), i, e) {
        char label[64];
        snprintf(label, sizeof label, "%s %s/%s", name, str(e, "cache_type_k"), str(e, "cache_type_v"));
        const json_t *m = json_object_get(e, "vs_f16");
        if (json_is_object(m))
            print_metrics_row_in(KV_LABEL_WIDTH, label, m);
        else
            printf("  %-*s skipped: %s\n", KV_LABEL_WIDTH, label, str(e, "skipped"));
    }
}

/* The image case and the perplexity case: their figures, or why they did not run. */
static void print_cases(const json_t *r, const char *ref) {
    const json_t *backends = json_object_get(r, "backends"), *image = json_object_get(r, "image"), *b;
    const json_t *ppl = json_object_get(r, "perplexity");
    const char *name;
    if (json_object_get(image, "skipped")) {
        printf("\nimage case: skipped: %s\n", str(image, "skipped"));
    } else if (image) {
        const json_t *proj = json_object_get(image, "projector");
        printf("\nimage case: %s (sha256 %.12s...), logits after a fixed %ldx%ld image against %s\n",
               str(proj, "path"), str(proj, "sha256"), integer(json_object_get(image, "image"), "width"),
               integer(json_object_get(image, "image"), "height"), ref);
        json_object_foreach((json_t *)backends, name, b) {
            const json_t *im = json_object_get(b, "image"), *g = json_object_get(im, "greedy");
            if (!im) continue;
            char greedy[64] = "";
            if (json_is_object(g))
                snprintf(greedy, sizeof greedy, ", greedy %ld/%ld", integer(g, "agree_tokens"),
                         integer(g, "ref_tokens"));
            printf("  %-8s projector on %s, %ld image positions, %ld after it%s\n", name,
                   str(im, "projector_device"), integer(im, "media_positions"), integer(im, "positions"),
                   greedy);
        }
        json_object_foreach((json_t *)backends, name, b) {
            const json_t *v = json_object_get(json_object_get(b, "image"), "vs_ref");
            if (json_is_object(v)) print_metrics_row(name, v);
        }
    }
    if (json_object_get(ppl, "skipped")) {
        printf("\nperplexity case: skipped: %s\n", str(ppl, "skipped"));
        return;
    }
    if (!ppl) return;
    printf("\nperplexity case: %s, %ld-token chunks, drift against %s\n",
           str(json_object_get(ppl, "text"), "path"), integer(ppl, "ctx_size"), ref);
    json_object_foreach((json_t *)backends, name, b) {
        const json_t *p = json_object_get(b, "perplexity"), *drift = json_object_get(p, "drift");
        if (!p) continue;
        printf("  %-8s PPL %.4f +/- %.4f over %ld chunks", name, num(p, "ppl"), num(p, "ppl_error"),
               integer(p, "n_chunks"));
        if (json_is_number(drift))
            printf(", drift %.3g%%\n", 100 * json_number_value(drift));
        else
            printf("%s\n", strcmp(name, ref) == 0 ? " (reference)" : ", drift not finite");
    }
}

/* A whisper.cpp model's report: the clip, the prompt, and the decoder's logits against the reference. */
static void print_whisper_text(const json_t *r) {
    const json_t *backends = json_object_get(r, "backends"), *model = json_object_get(r, "model"), *b;
    const json_t *clip = json_object_get(r, "clip"), *w = json_object_get(model, "whisper");
    const json_t *prompt = json_array_get(json_object_get(r, "prompts"), 0), *v;
    const char *ref = str(r, "reference"), *name;
    size_t i;
    printf("sipp verify: %s, a whisper.cpp model (size %s, %ld tokens, %s weights), reference %s\n",
           str(model, "path"), str(w, "size"), integer(w, "n_vocab"), str(w, "ftype_name"), ref);
    printf("clip: %s, %.2f s (samples sha256 %.12s...)\nprompt: %s (token ids",
           json_is_string(json_object_get(clip, "path")) ? str(clip, "path") : "built in",
           num(clip, "seconds"), str(clip, "samples_sha256"), str(prompt, "text"));
    json_array_foreach(json_object_get(prompt, "tokens"), i, v)
        printf(" %lld", (long long)json_integer_value(v));
    printf(")\n");
    json_object_foreach((json_t *)backends, name, b) {
        const json_t *d = json_object_get(b, "device");
        printf("  %-8s %s (%s), load %.0f ms, encode %.0f ms, decode %.0f ms\n", name, str(d, "name"),
               str(d, "reason"), num(b, "load_ms"), num(b, "encode_ms"), num(b, "decode_ms"));
    }
    printf("\ndecoder logits after each prompt token against %s (the encoder's output through "
           "cross-attention)\n",
           ref);
    print_metrics_header();
    json_object_foreach((json_t *)backends, name, b) {
        const json_t *m = json_object_get(b, "vs_ref");
        if (json_is_object(m))
            print_metrics_row(name, m);
        else
            printf("  %-8s reference\n", name);
    }
    printf("\nlargest difference relative to %s's largest |logit|:", ref);
    json_object_foreach((json_t *)backends, name, b) {
        const json_t *m = json_object_get(b, "vs_ref");
        if (json_is_object(m)) printf(" %s %.3g", name, num(m, "max_rel_diff"));
    }
    const json_t *t = json_object_get(r, "thresholds");
    printf("\n\nthresholds: KL mean <= %g, KL max <= %g, top-1 >= %g\n", num(t, "max_kl"),
           num(t, "max_kl_max"), num(t, "min_top1"));
    print_result(r);
}

static void print_text(const json_t *r) {
    if (strcmp(str(r, "recipe"), SIPP_RECIPE_WHISPERCPP) == 0) {
        print_whisper_text(r);
        return;
    }
    const json_t *backends = json_object_get(r, "backends"), *prompts = json_object_get(r, "prompts"), *b,
                 *pr;
    const char *ref = str(r, "reference"), *name;
    size_t n_prompts = json_array_size(prompts), i;
    long positions = 0;
    json_array_foreach(prompts, i, pr) positions += (long)json_array_size(json_object_get(pr, "tokens"));
    printf("sipp verify: %s (%s), %zu prompt%s, %ld positions, reference %s\n",
           str(json_object_get(backends, ref), "model"), str(json_object_get(r, "model"), "path"), n_prompts,
           n_prompts == 1 ? "" : "s", positions, ref);
    json_object_foreach((json_t *)backends, name, b) {
        const json_t *d = json_object_get(b, "device");
        printf("  %-8s %s (%s)\n", name, str(d, "name"), str(d, "description"));
    }
    json_t *why;
    json_object_foreach(json_object_get(r, "not_run"), name, why)
        printf("  %-8s not run: %s\n", name, json_string_value(why));
    printf("\nteacher-forced logits against %s\n", ref);
    print_metrics_header();
    json_object_foreach((json_t *)backends, name, b) {
        if (strcmp(name, ref) == 0)
            printf("  %-8s reference\n", name);
        else
            print_metrics_row(name, json_object_get(b, "vs_ref"));
    }
    printf("\ncached decoding: one token at a time against one batched prefill, same backend\n");
    json_object_foreach((json_t *)backends, name, b) print_metrics_row(name, json_object_get(b, "cached"));
    print_kv_cache(backends);
    long greedy_tokens = integer(r, "greedy_tokens");
    if (greedy_tokens > 0) {
        printf("\ngreedy continuations (%ld tokens per prompt, temperature 0): tokens equal to %s's\n",
               greedy_tokens, ref);
        json_object_foreach((json_t *)backends, name, b) {
            long agree = 0, total = 0;
            json_t *g;
            printf("  %-8s", name);
            json_array_foreach(json_object_get(b, "greedy"), i, g) {
                printf(" %ld/%ld", integer(g, "agree_tokens"), integer(g, "ref_tokens"));
                agree += integer(g, "agree_tokens");
                total += integer(g, "ref_tokens");
            }
            printf("   (%.1f%%)\n", total ? 100.0 * agree / total : 100.0);
        }
    }
    print_cases(r, ref);
    printf("\ngraph: device boundaries per decode step\n");
    json_object_foreach((json_t *)backends, name, b) {
        const json_t *g = json_object_get(b, "graph");
        long nodes = integer(g, "n_nodes"), decode = integer(g, "boundaries_decode");
        printf("  %-8s %ld node%s on %s, %ld boundar%s per decode step, %ld per prefill\n", name, nodes,
               nodes == 1 ? "" : "s", str(g, "device"), decode, decode == 1 ? "y" : "ies",
               integer(g, "boundaries_prefill"));
    }
    bool first = true;
    json_object_foreach((json_t *)backends, name, b) {
        const json_t *bench = json_object_get(b, "bench");
        if (!bench) continue;
        const json_t *pp = json_object_get(bench, "pp"), *tg = json_object_get(bench, "tg");
        printf("%s  %-8s pp%ld %.2f ± %.2f t/s, tg%ld %.2f ± %.2f t/s, load %.0f ms\n",
               first ? "\nbench\n" : "", name, integer(pp, "tokens"), num(pp, "mean"), num(pp, "stddev"),
               integer(tg, "tokens"), num(tg, "mean"), num(tg, "stddev"), num(bench, "load_ms"));
        first = false;
    }
    const json_t *t = json_object_get(r, "thresholds");
    printf(
        "\nthresholds: KL mean <= %g, KL max <= %g, top-1 >= %g; cached KL mean <= %g, cached top-1 >= %g; "
        "greedy >= %g; perplexity drift <= %g\n",
        num(t, "max_kl"), num(t, "max_kl_max"), num(t, "min_top1"), num(t, "max_cached_kl"),
        num(t, "min_cached_top1"), num(t, "min_greedy"), num(t, "ppl_max_drift"));
    print_result(r);
}

static void print_failures(const json_t *failures) {
    size_t i;
    json_t *f;
    json_array_foreach(failures, i, f) {
        const char *metric = str(f, "metric");
        json_t *v = json_object_get(f, "value");
        char value[64];
        if (json_is_number(v))
            snprintf(value, sizeof value, "%.4g%s", json_number_value(v), metric_unit(metric));
        else
            snprintf(value, sizeof value, "not finite");
        const char *detail = json_string_value(json_object_get(f, "detail"));
        cli_error("verify: %s on %s is %s, %s the threshold %g (%s)%s%s", metric, str(f, "backend"), value,
                  str(f, "direction"), num(f, "threshold"), str(f, "flag"), detail ? ": " : "",
                  detail ? detail : "");
    }
}

static void print_contracts(const json_t *report) {
    json_t *contracts = json_object_get(report, "contracts"), *c, *d;
    size_t i, k;
    printf("\ncontracts against the manifest\n");
    json_array_foreach(contracts, i, c) {
        printf("  %-10s %s\n", str(c, "contract"), str(c, "status"));
        json_array_foreach(json_object_get(c, "details"), k, d) printf("    %s\n", json_string_value(d));
    }
    json_t *ctx = json_object_get(report, "context");
    if (json_array_size(ctx)) {
        printf("  context (not contracts; where the machines differ)\n");
        json_array_foreach(ctx, k, d) printf("    %s\n", json_string_value(d));
    }
}

/* The JSON shown on stdout: the report without the per-position top tokens (the manifest keeps them). */
static void print_json(const json_t *report) {
    json_t *shown = json_deep_copy(report), *b;
    const char *name;
    json_object_foreach(json_object_get(shown, "backends"), name, b) json_object_del(b, "top");
    char *s = json_dumps(shown, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    if (s) puts(s);
    free(s);
    json_decref(shown);
}

/* ---- the command ---- */

static int run(verify_opts *o) {
    sipp_verify_params *p = &o->p;
    char err[SIPP_ERROR_SIZE];
    /* A manifest that cannot be used is a runtime failure (exit 1), named before any work starts. */
    if (p->against && sipp_verify_manifest_read(p->against, NULL, err) != SIPP_OK) {
        cli_error("verify: %s", err);
        return EXIT_RUNTIME;
    }
    if (o->prompts_file) {
        int rc = read_prompts(o->prompts_file, o);
        if (rc != EXIT_OK) return rc;
    }
    if (!cli_runtime_init(p->artifact)) return EXIT_RUNTIME;
    p->bench_exe = SELF_EXE;
    if (isatty(STDERR_FILENO) || getenv("SIPP_VERIFY_PROGRESS")) p->progress = on_progress;
    char *text = NULL;
    bool passed = false;
    sipp_status st = sipp_verify_run(p, &text, &passed, err);
    if (st != SIPP_OK) {
        cli_error("verify: %s", err);
        return st == SIPP_ERR_INVALID_ARGUMENT ? EXIT_USAGE : EXIT_RUNTIME;
    }
    if (o->manifest_out && sipp_verify_manifest_write(o->manifest_out, text, err) != SIPP_OK) {
        cli_error("verify: %s", err);
        sipp_free(text);
        return EXIT_RUNTIME;
    }
    json_t *report = json_loads(text, 0, NULL);
    sipp_free(text);
    if (!report) {
        cli_error("verify: out of memory reading the report");
        return EXIT_RUNTIME;
    }
    if (o->c.json) {
        print_json(report);
    } else {
        print_text(report);
        if (p->against) print_contracts(report);
    }
    print_failures(json_object_get(json_object_get(report, "verdict"), "failures"));
    json_t *held = json_object_get(report, "against_passed");
    if (held && !json_is_true(held))
        cli_error("verify: a contract of manifest '%s' changed on this machine (see the report)", p->against);
    json_decref(report);
    return passed ? EXIT_OK : EXIT_DRIFT;
}

int cmd_verify(int argc, char **argv) {
    verify_opts o;
    int rc = parse(argc, argv, &o);
    if (rc == CLI_PARSED) rc = run(&o);
    for (int i = 0; i < o.n_prompts; i++)
        free(o.prompts[i]);
    free(o.backends_copy);
    return rc;
}
