/*
 * sipp-train: trains a GGUF model on a text corpus, on the CPU, and writes an ordinary GGUF that
 * sipp, llama-server and llama-cli load.
 *
 * Design
 *   - What trains.  Every weight, the token embeddings and the attention's K and V included. The
 *     forward pass is sipp-train's own (graph.c: the llama architecture written with ggml, causal
 *     attention over the window), trained with ggml-opt (AdamW, cross-entropy against the next
 *     token). llama.cpp's own trainer cannot train the embeddings, K or V at the pinned commit
 *     (docs/training.md), and a model with random keys and values does not learn where to look.
 *     llama.cpp still does the rest: the tokenizer (the model loaded vocabulary-only) and the
 *     quantizer (save.c).
 *   - The loop is sipp-train's.  One window is one evaluation of the graph (forward and backward);
 *     every --accumulate windows the optimizer takes a step. Between two windows sipp-train redraws
 *     the progress line, writes a checkpoint when one is due, and answers Ctrl-C.
 *   - Windows.  The corpus is one token stream and its last --val-split is held out. Training
 *     windows are --ctx tokens every ctx/2 (as llama.cpp's finetune example takes them), held-out
 *     windows every ctx, so no held-out token is ever trained on. The seed shuffles the training
 *     windows, anew each epoch.
 *   - The schedule.  The learning rate rises linearly over the first WARMUP_FRACTION of all steps
 *     and then falls along a cosine to --lr-min: schedule_params, which ggml-opt calls before each
 *     step.
 *   - Held-out loss.  Measured before the first epoch and after each one, so the first line says
 *     where the model starts and each epoch line whether it still improves. It is the mean
 *     cross-entropy per token over the held-out windows: the log of their perplexity.
 *   - Output.  The trained weights under the input file's own metadata (the chat template
 *     included). The checkpoint is OUT with ".gguf" replaced by ".checkpoint.gguf", written every
 *     --checkpoint-every steps and on Ctrl-C; --model CHECKPOINT goes on from it (AdamW's moments
 *     and the schedule start afresh).
 *
 * Exit status: 0 done; 1 bad input (a missing or empty corpus, a model that does not load) or a
 * failed write, with a message; 2 bad usage; 130 interrupted by Ctrl-C, after the checkpoint.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-opt.h"
#include "gguf.h"
#include "graph.h"
#include "llama.h"
#include "save.h"
#include "train.h"
#include "util/util.h"

/* defaults */
#define DEFAULT_EPOCHS 1
#define DEFAULT_LR 1e-3
#define DEFAULT_LR_MIN_RATIO 0.1 /* --lr-min, when not given: a tenth of --lr */
#define DEFAULT_CTX 256
#define DEFAULT_VAL_SPLIT 0.05
#define DEFAULT_SEED 42

/* bounds on the flags */
#define MAX_EPOCHS 100000
#define MIN_LR 1e-9
#define MAX_LR 1.0
#define MIN_CTX 8
#define MAX_ACCUMULATE 4096
#define MAX_CTX 65536
#define MAX_VAL_SPLIT 0.5
#define MAX_THREADS 512
#define MAX_CHECKPOINT_EVERY 1000000000L

#define WARMUP_FRACTION 0.05 /* of all optimizer steps, with a linearly rising learning rate */
#define EVAL_COST 0.33       /* a held-out window (forward only) against a training one, for the ETA */
#define GGUF_SUFFIX ".gguf"
#define CHECKPOINT_SUFFIX ".checkpoint.gguf"
#define WRITE_PROBE_SUFFIX ".probe.tmp"
#define ARTIFACT_FROM_EXE "/../artifact" /* build/bin/sipp-train finds build/artifact */
#define BYTES_PER_MB 1e6
#define MS_PER_S 1e3

/* ---------------------------------------------------------------------------------------------- */
/* options: one table both parses them and prints --help                                          */

struct options {
    const char *model, *corpus, *out, *out_type, *chat_template_file;
    long epochs, ctx, accumulate, checkpoint_every, threads;
    double lr, lr_min, val_split;
    unsigned long long seed;
    bool verbose, help;
};

enum opt_kind { OPT_PATH, OPT_INT, OPT_FLOAT, OPT_SEED, OPT_FLAG };

struct opt_spec {
    const char *flag, *arg;
    enum opt_kind kind;
    size_t offset;
    double min, max;
    const char *help;
};

#define OFF(field) offsetof(struct options, field)

static const struct opt_spec OPTS[] = {
    {"--model", "IN.gguf", OPT_PATH, OFF(model), 0, 0,
     "the model to start from: f32 weights (sipp-synth --type f32) or a checkpoint"},
    {"--corpus", "FILE", OPT_PATH, OFF(corpus), 0, 0,
     "the text: FILE.jsonl holds one {\"text\": ...} a line, any other file is plain text"},
    {"--out", "OUT.gguf", OPT_PATH, OFF(out), 0, 0, "where the trained model is written"},
    {"--epochs", "N", OPT_INT, OFF(epochs), 0, MAX_EPOCHS,
     "passes over the training windows (default 1; 0: only the held-out loss, and --out-type)"},
    {"--out-type", "f32|f16|q8_0|q4_0", OPT_PATH, OFF(out_type), 0, 0,
     "the weights of --out: f32 (default, trainable again), f16, q8_0 (a quarter of the size) or q4_0"},
    {"--chat-template-file", "FILE", OPT_PATH, OFF(chat_template_file), 0, 0,
     "the chat template --out carries (default: --model's)"},
    {"--lr", "F", OPT_FLOAT, OFF(lr), MIN_LR, MAX_LR, "peak learning rate of AdamW (default 1e-3)"},
    {"--lr-min", "F", OPT_FLOAT, OFF(lr_min), 0, MAX_LR,
     "learning rate at the end of the cosine (default lr/10)"},
    {"--ctx", "N", OPT_INT, OFF(ctx), MIN_CTX, MAX_CTX, "tokens per window (default 256)"},
    {"--accumulate", "N", OPT_INT, OFF(accumulate), 1, MAX_ACCUMULATE,
     "windows per optimizer step (default 1)"},
    {"--val-split", "F", OPT_FLOAT, OFF(val_split), 0, MAX_VAL_SPLIT,
     "the part of the corpus held out, at its end (default 0.05)"},
    {"--seed", "N", OPT_SEED, OFF(seed), 0, 0, "shuffles the training windows (default 42)"},
    {"--checkpoint-every", "N", OPT_INT, OFF(checkpoint_every), 0, MAX_CHECKPOINT_EVERY,
     "write OUT.checkpoint.gguf every N steps (default 0: only on Ctrl-C)"},
    {"--threads", "N", OPT_INT, OFF(threads), 1, MAX_THREADS,
     "CPU threads (default: every CPU this may use)"},
    {"--verbose", NULL, OPT_FLAG, OFF(verbose), 0, 0, "show llama.cpp's own log"},
    {"--help", NULL, OPT_FLAG, OFF(help), 0, 0, "print this help"},
};

#define F32_STAGE_SUFFIX ".f32.tmp"
#define CHAT_TEMPLATE_KEY "tokenizer.chat_template"
#define MAX_TEMPLATE_BYTES (1 << 20)
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
/* ggml-opt builds three graphs (forward; forward and backward; and the optimizer step) in one
 * context: room for their tensors and the graphs themselves */
#define GRAPH_TENSORS (4 * GGML_DEFAULT_GRAPH_SIZE)
#define GRAPH_COUNT 4

static void usage(FILE *f) {
    fputs("usage: " PROG " --model IN.gguf --corpus FILE --out OUT.gguf [options]\n"
          "\n"
          "Trains a GGUF model on a corpus (every weight, AdamW, on the CPU) and writes the result\n"
          "as an ordinary GGUF. Prints the held-out loss before training and after each epoch.\n"
          "Ctrl-C writes OUT.checkpoint.gguf and exits with status 130.\n\n",
          f);
    for (size_t i = 0; i < COUNT_OF(OPTS); i++) {
        char left[48];
        snprintf(left, sizeof left, "%s%s%s", OPTS[i].flag, OPTS[i].arg ? " " : "",
                 OPTS[i].arg ? OPTS[i].arg : "");
        fprintf(f, "  %-24s %s\n", left, OPTS[i].help);
    }
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    train_report("%s (see --help)", msg);
    exit(EXIT_USAGE);
}

static void set_number(struct options *o, const struct opt_spec *s, const char *val) {
    char *end = NULL;
    errno = 0;
    void *field = (char *)o + s->offset;
    if (s->kind == OPT_SEED) {
        const unsigned long long v = strtoull(val, &end, 10);
        if (errno || end == val || *end || val[0] == '-')
            die_usage("%s: expected an integer, got '%s'", s->flag, val);
        *(unsigned long long *)field = v;
        return;
    }
    const double v = s->kind == OPT_INT ? (double)strtol(val, &end, 10) : strtod(val, &end);
    if (errno || end == val || *end || !(v >= s->min && v <= s->max))
        die_usage("%s: expected %s from %g to %g, got '%s'", s->flag,
                  s->kind == OPT_INT ? "an integer" : "a number", s->min, s->max, val);
    if (s->kind == OPT_INT)
        *(long *)field = (long)v;
    else
        *(double *)field = v;
}

static void check_options(struct options *o) {
    if (!o->model || !o->corpus || !o->out) die_usage("--model, --corpus and --out are required");
    if (o->out_type && !model_out_type_known(o->out_type))
        die_usage("--out-type: '%s' is not f32, f16, q8_0 or q4_0", o->out_type);
    if (o->lr_min < 0) o->lr_min = o->lr * DEFAULT_LR_MIN_RATIO;
    if (o->lr_min > o->lr) die_usage("--lr-min %g is above --lr %g", o->lr_min, o->lr);
}

static void parse_args(int argc, char **argv, struct options *o) {
    *o = (struct options){.epochs = DEFAULT_EPOCHS,
                          .ctx = DEFAULT_CTX,
                          .accumulate = 1,
                          .lr = DEFAULT_LR,
                          .lr_min = -1.0,
                          .val_split = DEFAULT_VAL_SPLIT,
                          .seed = DEFAULT_SEED};
    for (int i = 1; i < argc; i++) {
        const struct opt_spec *s = NULL;
        for (size_t k = 0; k < COUNT_OF(OPTS) && !s; k++)
            if (strcmp(argv[i], OPTS[k].flag) == 0) s = &OPTS[k];
        if (!s) die_usage("unknown option '%s'", argv[i]);
        if (s->kind == OPT_FLAG) {
            *(bool *)((char *)o + s->offset) = true;
            continue;
        }
        if (i + 1 >= argc) die_usage("%s needs a value (%s)", s->flag, s->arg);
        const char *val = argv[++i];
        if (s->kind == OPT_PATH)
            *(const char **)((char *)o + s->offset) = val;
        else
            set_number(o, s, val);
    }
    if (o->help) {
        usage(stdout);
        exit(0);
    }
    check_options(o);
}

/* ---------------------------------------------------------------------------------------------- */
/* the learning-rate schedule                                                                      */

struct schedule {
    double lr, lr_min;
    int64_t step, total, warmup;
};

static double schedule_lr(const struct schedule *s, int64_t step) {
    if (step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
    const int64_t span = s->total - s->warmup;
    double p = span > 0 ? (double)(step - s->warmup) / (double)span : 1.0;
    if (p > 1.0) p = 1.0;
    return s->lr_min + 0.5 * (s->lr - s->lr_min) * (1.0 + cos(M_PI * p));
}

/* ggml-opt calls this once before each optimizer step. */
static struct ggml_opt_optimizer_params schedule_params(void *userdata) {
    struct schedule *s = userdata;
    struct ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(NULL);
    p.adamw.alpha = p.sgd.alpha = (float)schedule_lr(s, s->step);
    s->step++;
    return p;
}

/* ---------------------------------------------------------------------------------------------- */
/* the trainer                                                                                     */

struct trainer {
    struct options o;
    struct gguf_context *meta; /* the input's header: key-values for the output, tensors to check */
    struct llama_model *vocab; /* the input loaded vocabulary-only: its tokenizer */
    ggml_backend_t backend;    /* the CPU */
    ggml_backend_sched_t sched;
    struct net net;
    struct ggml_context *ctx_input, *ctx_graph;
    ggml_backend_buffer_t buf_input;
    struct ggml_tensor *tokens, *pos, *logits;
    float *labels; /* one-hot next tokens, [n_vocab, ctx], on the host */
    ggml_opt_context_t opt;
    struct token_stream ts;
    struct windows train, val;
    ggml_opt_result_t res_train, res_val;
    struct schedule sched_lr;
    uint64_t rng;
    char checkpoint[PATH_MAX];
    int64_t next_checkpoint;      /* the step at which the next periodic checkpoint is due */
    size_t train_done, eval_done; /* windows, over the whole run */
    double train_s, eval_s;       /* seconds spent in them */
    long epoch;
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static bool log_verbose;
static enum ggml_log_level log_last = GGML_LOG_LEVEL_NONE;

/* llama.cpp's and ggml's log: their errors always (a model that does not load says why), the rest
 * on --verbose */
static void on_log(enum ggml_log_level level, const char *text, void *userdata) {
    (void)userdata;
    if (level != GGML_LOG_LEVEL_CONT) log_last = level;
    if (!log_verbose && log_last != GGML_LOG_LEVEL_ERROR) return;
    progress_clear();
    fputs(text, stderr);
}

static long cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

static bool derive_checkpoint_path(struct trainer *t) {
    const char *out = t->o.out;
    size_t stem = strlen(out);
    if (stem >= strlen(GGUF_SUFFIX) && strcmp(out + stem - strlen(GGUF_SUFFIX), GGUF_SUFFIX) == 0)
        stem -= strlen(GGUF_SUFFIX);
    const int n = snprintf(t->checkpoint, sizeof t->checkpoint, "%.*s" CHECKPOINT_SUFFIX, (int)stem, out);
    if (n < 0 || (size_t)n >= sizeof t->checkpoint) {
        train_report("--out %s: the path is too long", out);
        return false;
    }
    return true;
}

/* Fails fast, before minutes of loading and tokenizing, on what would only fail at the end. */
static bool check_files(struct trainer *t) {
    const char *inputs[][2] = {{"--model", t->o.model}, {"--corpus", t->o.corpus}};
    for (size_t i = 0; i < COUNT_OF(inputs); i++) {
        struct stat st;
        const bool found = stat(inputs[i][1], &st) == 0;
        if (!found || S_ISDIR(st.st_mode)) {
            train_report("%s %s: %s", inputs[i][0], inputs[i][1],
                         found ? "a directory, not a file" : strerror(errno));
            return false;
        }
    }
    char probe[PATH_MAX + sizeof WRITE_PROBE_SUFFIX];
    snprintf(probe, sizeof probe, "%s" WRITE_PROBE_SUFFIX, t->o.out);
    FILE *f = fopen(probe, "wb");
    if (!f) {
        train_report("--out %s: cannot create a file there: %s", t->o.out, strerror(errno));
        return false;
    }
    fclose(f);
    unlink(probe);
    return derive_checkpoint_path(t);
}

/* --chat-template-file's text as the header's chat template, which every file written carries. */
static bool set_chat_template(struct trainer *t) {
    const char *path = t->o.chat_template_file;
    FILE *f = fopen(path, "rb");
    if (!f) {
        train_report("--chat-template-file %s: %s", path, strerror(errno));
        return false;
    }
    char *text = malloc(MAX_TEMPLATE_BYTES + 1);
    size_t n = text ? fread(text, 1, MAX_TEMPLATE_BYTES + 1, f) : 0;
    const char *problem = !text                    ? "out of memory"
                          : ferror(f)              ? "cannot read it"
                          : n == 0                 ? "empty: a template is Jinja text"
                          : n > MAX_TEMPLATE_BYTES ? "over 1 MiB, not a template"
                                                   : NULL;
    fclose(f);
    if (problem) {
        train_report("--chat-template-file %s: %s", path, problem);
    } else {
        text[n] = '\0';
        gguf_set_val_str(t->meta, CHAT_TEMPLATE_KEY, text);
    }
    free(text);
    return !problem;
}

/* The input's header: the key-values every file written keeps. */
static bool open_meta(struct trainer *t) {
    t->meta = gguf_init_from_file(t->o.model, (struct gguf_init_params){.no_alloc = true, .ctx = NULL});
    if (!t->meta) {
        train_report("--model %s: not a GGUF file that llama.cpp can read", t->o.model);
        return false;
    }
    if (t->o.chat_template_file && !set_chat_template(t)) return false;
    if (gguf_get_n_tensors(t->meta) == 0) {
        train_report("--model %s has no tensors: a vocabulary file, not a model; make a model from it with "
                     "sipp-synth --vocab %s --type f32",
                     t->o.model, t->o.model);
        return false;
    }
    return true;
}

/* The CPU backend module of the artifact that sipp was built with ($SIPP_ARTIFACT overrides), and
 * a CPU backend with --threads threads. */
static bool load_backend(struct trainer *t) {
    char dir[PATH_MAX + sizeof ARTIFACT_FROM_EXE];
    const char *env = getenv("SIPP_ARTIFACT");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
    } else {
        char exe[PATH_MAX];
        const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(dir, sizeof dir, "%s" ARTIFACT_FROM_EXE, exe);
    }
    llama_backend_init();
    ggml_backend_load_all_from_path(dir);
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
    t->backend = reg ? ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL) : NULL;
    if (!t->backend) {
        train_report(
            "no CPU backend module (libggml-cpu-*.so) in %s; build sipp with make, or set SIPP_ARTIFACT "
            "to an artifact directory",
            dir);
        return false;
    }
    ggml_backend_set_n_threads_t set_threads =
        (ggml_backend_set_n_threads_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (set_threads) set_threads(t->backend, (int)(t->o.threads ? t->o.threads : cpu_count()));
    t->sched = ggml_backend_sched_new(&t->backend, NULL, 1, GGML_DEFAULT_GRAPH_SIZE, false, false);
    if (!t->sched) {
        train_report("cannot make ggml's scheduler for the CPU backend");
        return false;
    }
    return true;
}

static bool load_model(struct trainer *t) {
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    t->vocab = llama_model_load_from_file(t->o.model, mp);
    if (!t->vocab) {
        train_report("--model %s: llama.cpp cannot read its vocabulary (its message is above)", t->o.model);
        return false;
    }
    return net_load(&t->net, t->meta, t->o.model, t->backend);
}

/* The corpus as tokens, and its training and held-out windows. */
static bool load_corpus(struct trainer *t) {
    if (!corpus_tokenize(t->o.corpus, llama_model_get_vocab(t->vocab), &t->ts)) return false;
    const size_t ctx = (size_t)t->o.ctx, n = t->ts.n;
    const size_t split = n - (size_t)((double)n * t->o.val_split);
    if (!windows_make(&t->train, 0, split, ctx, ctx / 2) || !windows_make(&t->val, split, n, ctx, ctx)) {
        train_report("out of memory planning the windows");
        return false;
    }
    if (t->train.n == 0) {
        train_report(
            "--corpus %s is %zu tokens%s, shorter than one window of --ctx %zu + 1; give a longer corpus "
            "or a smaller --ctx",
            t->o.corpus, split, split < n ? " before the held-out split" : "", ctx);
        return false;
    }
    if (t->o.val_split > 0 && t->val.n == 0) {
        train_report(
            "the held-out part of --corpus %s (--val-split %g) is %zu tokens, shorter than one window of "
            "--ctx %zu + 1; raise --val-split, give a longer corpus, or pass --val-split 0",
            t->o.corpus, t->o.val_split, n - split, ctx);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (t->ts.tok[i] < 0 || t->ts.tok[i] >= t->net.hp.n_vocab) {
            train_report("--model %s: its vocabulary has more tokens than its embeddings (%lld); not a model "
                         "sipp-train can train",
                         t->o.model, (long long)t->net.hp.n_vocab);
            return false;
        }
    return true;
}

/* The graph of one window: its inputs (tokens, positions) in a buffer of their own, as ggml-opt's
 * static graphs need, and the forward pass in a context ggml-opt extends with the backward one. */
static bool build_graph(struct trainer *t) {
    const int64_t T = t->o.ctx;
    t->ctx_input = ggml_init((struct ggml_init_params){
        .mem_size = 2 * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true});
    t->ctx_graph = ggml_init((struct ggml_init_params){
        .mem_size = GRAPH_TENSORS * ggml_tensor_overhead() +
                    GRAPH_COUNT * ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, true),
        .mem_buffer = NULL,
        .no_alloc = true});
    t->labels = calloc((size_t)(t->net.hp.n_vocab * T), sizeof *t->labels);
    if (!t->ctx_input || !t->ctx_graph || !t->labels) goto oom;
    t->tokens = ggml_new_tensor_1d(t->ctx_input, GGML_TYPE_I32, T);
    t->pos = ggml_new_tensor_1d(t->ctx_input, GGML_TYPE_I32, T);
    ggml_set_name(t->tokens, "tokens");
    ggml_set_name(t->pos, "pos");
    ggml_set_input(t->pos);
    t->buf_input = ggml_backend_alloc_ctx_tensors(t->ctx_input, t->backend);
    if (!t->buf_input) goto oom;
    int32_t *pos = malloc((size_t)T * sizeof *pos);
    if (!pos) goto oom;
    for (int64_t i = 0; i < T; i++)
        pos[i] = (int32_t)i;
    ggml_backend_tensor_set(t->pos, pos, 0, (size_t)T * sizeof *pos);
    free(pos);
    t->logits = net_forward(&t->net, t->ctx_graph, t->tokens, t->pos);
    ggml_set_name(t->logits, "logits");
    return true;
oom:
    train_report("out of memory for a window of --ctx %ld tokens", t->o.ctx);
    return false;
}

static bool start_optimizer(struct trainer *t) {
    if (!build_graph(t)) return false;
    const int64_t accumulate = t->o.accumulate;
    t->sched_lr = (struct schedule){.lr = t->o.lr, .lr_min = t->o.lr_min};
    t->sched_lr.total = ((int64_t)t->o.epochs * (int64_t)t->train.n + accumulate - 1) / accumulate;
    t->sched_lr.warmup = (int64_t)((double)t->sched_lr.total * WARMUP_FRACTION);
    t->next_checkpoint = t->o.checkpoint_every;
    t->rng = (uint64_t)t->o.seed;

    struct ggml_opt_params op = ggml_opt_default_params(t->sched, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.ctx_compute = t->ctx_graph;
    op.inputs = t->tokens;
    op.outputs = t->logits;
    op.opt_period = (int32_t)accumulate;
    op.get_opt_pars = schedule_params;
    op.get_opt_pars_ud = &t->sched_lr;
    op.optimizer = GGML_OPT_OPTIMIZER_TYPE_ADAMW;
    op.build_type = t->o.epochs > 0 ? GGML_OPT_BUILD_TYPE_OPT : GGML_OPT_BUILD_TYPE_FORWARD;
    t->opt = ggml_opt_init(op);
    t->res_train = ggml_opt_result_init();
    t->res_val = ggml_opt_result_init();
    if (!t->opt || !t->res_train || !t->res_val) {
        train_report("out of memory starting the optimizer");
        return false;
    }
    printf("%s: %zu tokens in %zu documents; %zu training windows and %zu held-out of %ld tokens; "
           "%lld steps of %ld window%s; %.2fM parameters\n",
           t->o.corpus, t->ts.n, t->ts.documents, t->train.n, t->val.n, t->o.ctx,
           (long long)t->sched_lr.total, t->o.accumulate, t->o.accumulate == 1 ? "" : "s",
           (double)t->net.n_params / 1e6);
    fflush(stdout);
    return true;
}

/* One window through the graph: forward only, or forward and backward (and a step when due). */
static void run_window(struct trainer *t, size_t start, bool backward, ggml_opt_result_t result) {
    const int64_t V = t->net.hp.n_vocab, T = t->o.ctx;
    const llama_token *next = t->ts.tok + start + 1;
    for (int64_t i = 0; i < T; i++)
        t->labels[i * V + next[i]] = 1.0f;
    ggml_opt_alloc(t->opt, backward);
    ggml_backend_tensor_set(ggml_opt_inputs(t->opt), t->ts.tok + start, 0, (size_t)T * sizeof(llama_token));
    ggml_backend_tensor_set(ggml_opt_labels(t->opt), t->labels, 0, (size_t)(V * T) * sizeof *t->labels);
    for (int64_t i = 0; i < T; i++)
        t->labels[i * V + next[i]] = 0.0f;
    ggml_opt_eval(t->opt, result);
}

/* ---------------------------------------------------------------------------------------------- */
/* the loop                                                                                        */

static double eta_seconds(const struct trainer *t) {
    const size_t train_total = (size_t)t->o.epochs * t->train.n;
    const size_t eval_total = (size_t)(t->o.epochs + 1) * t->val.n;
    double per_train = t->train_done ? t->train_s / (double)t->train_done : -1.0;
    double per_eval = t->eval_done ? t->eval_s / (double)t->eval_done : -1.0;
    if (per_train < 0 && per_eval < 0) return -1.0;
    if (per_train < 0) per_train = per_eval / EVAL_COST;
    if (per_eval < 0) per_eval = per_train * EVAL_COST;
    return (double)(train_total - t->train_done) * per_train + (double)(eval_total - t->eval_done) * per_eval;
}

static void show_progress(const struct trainer *t, bool training) {
    const double eta = eta_seconds(t), spent = t->train_s + t->eval_s;
    const double frac = eta >= 0 && spent + eta > 0 ? spent / (spent + eta) : 0.0;
    const double tokens = (double)(training ? t->train_done : t->eval_done) * (double)t->o.ctx;
    const double seconds = training ? t->train_s : t->eval_s;
    double loss = NAN;
    ggml_opt_result_loss(training ? t->res_train : t->res_val, &loss, NULL);
    char label[64];
    snprintf(label, sizeof label, "%s %ld/%ld", training ? "epoch" : "held-out", t->epoch, t->o.epochs);
    progress_show(label, frac, seconds > 0 ? tokens / seconds : 0.0, eta, loss);
}

static bool save_checkpoint(struct trainer *t, const char *why) {
    if (!net_save(&t->net, t->meta, t->checkpoint)) return false;
    train_report("%s: wrote %s (epoch %ld, step %lld)", why, t->checkpoint, t->epoch,
                 (long long)t->sched_lr.step);
    return true;
}

/* After Ctrl-C: the checkpoint, then the exit status. */
static int stop_interrupted(struct trainer *t) {
    if (!save_checkpoint(t, "interrupted")) return EXIT_RUNTIME;
    train_report("go on from it with --model %s", t->checkpoint);
    return EXIT_INTERRUPTED;
}

/* The held-out loss; false when Ctrl-C came first. */
static bool evaluate(struct trainer *t, double *loss) {
    ggml_opt_result_reset(t->res_val);
    for (size_t i = 0; i < t->val.n && !interrupted; i++) {
        const double t0 = sipp_now_ms() / MS_PER_S;
        run_window(t, t->val.start[i], false, t->res_val);
        t->eval_s += sipp_now_ms() / MS_PER_S - t0;
        t->eval_done++;
        show_progress(t, false);
    }
    ggml_opt_result_loss(t->res_val, loss, NULL);
    return !interrupted;
}

/* One pass over the shuffled training windows: 0, or the exit status to stop with. */
static int train_epoch(struct trainer *t) {
    windows_shuffle(&t->train, &t->rng);
    ggml_opt_result_reset(t->res_train);
    for (size_t i = 0; i < t->train.n; i++) {
        const double t0 = sipp_now_ms() / MS_PER_S;
        run_window(t, t->train.start[i], true, t->res_train);
        t->train_s += sipp_now_ms() / MS_PER_S - t0;
        t->train_done++;
        if (interrupted) return stop_interrupted(t);
        if (t->o.checkpoint_every > 0 && t->sched_lr.step >= t->next_checkpoint) {
            if (!save_checkpoint(t, "checkpoint")) return EXIT_RUNTIME;
            t->next_checkpoint = t->sched_lr.step + t->o.checkpoint_every;
        }
        show_progress(t, true);
    }
    return 0;
}

static void print_epoch(const struct trainer *t, double epoch_s, size_t windows, double val_loss) {
    double loss = NAN;
    ggml_opt_result_loss(t->res_train, &loss, NULL);
    progress_clear();
    printf("epoch %ld/%ld: train loss %.4f", t->epoch, t->o.epochs, loss);
    if (t->val.n) printf(", held-out loss %.4f", val_loss);
    printf(", lr %.2e, %.0f tokens/s, %.1f s\n", schedule_lr(&t->sched_lr, t->sched_lr.step),
           (double)windows * (double)t->o.ctx / epoch_s, epoch_s);
    fflush(stdout);
}

/* The trained model at --out: as trained (f32), or quantized from a staged f32 copy. */
static bool save_output(struct trainer *t) {
    if (!t->o.out_type || strcmp(t->o.out_type, "f32") == 0) return net_save(&t->net, t->meta, t->o.out);
    char stage[PATH_MAX];
    if (snprintf(stage, sizeof stage, "%s" F32_STAGE_SUFFIX, t->o.out) >= (int)sizeof stage) {
        train_report("--out %s: the path is too long", t->o.out);
        return false;
    }
    bool ok = net_save(&t->net, t->meta, stage) && model_quantize(stage, t->o.out, t->o.out_type);
    unlink(stage);
    return ok;
}

static int train(struct trainer *t) {
    struct sigaction sa = {.sa_handler = on_sigint, .sa_flags = SA_RESETHAND}; /* a second Ctrl-C kills */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    double val_loss = NAN, first_val = NAN;
    if (t->val.n) {
        if (!evaluate(t, &val_loss)) return stop_interrupted(t);
        first_val = val_loss;
        progress_clear();
        printf("epoch 0/%ld: held-out loss %.4f\n", t->o.epochs, val_loss);
        fflush(stdout);
    }
    for (t->epoch = 1; t->epoch <= t->o.epochs; t->epoch++) {
        const double train_s = t->train_s;
        const int rc = train_epoch(t);
        if (rc != 0) return rc;
        if (t->val.n && !evaluate(t, &val_loss)) return stop_interrupted(t);
        print_epoch(t, t->train_s - train_s, t->train.n, val_loss);
    }
    t->epoch = t->o.epochs;
    if (!save_output(t)) return EXIT_RUNTIME;
    struct stat st;
    const double mb = stat(t->o.out, &st) == 0 ? (double)st.st_size / BYTES_PER_MB : 0.0;
    printf("wrote %s (%.1f MB) in %.1f s", t->o.out, mb, t->train_s + t->eval_s);
    if (t->val.n) printf(": held-out loss %.4f -> %.4f", first_val, val_loss);
    printf("\n");
    return 0;
}

static int run(struct trainer *t) {
    log_verbose = t->o.verbose;
    llama_log_set(on_log, NULL);
    ggml_log_set(on_log, NULL);
    if (!check_files(t) || !open_meta(t) || !load_backend(t) || !load_model(t) || !load_corpus(t) ||
        !start_optimizer(t))
        return EXIT_RUNTIME;
    return train(t);
}

static void trainer_free(struct trainer *t) {
    if (t->res_train) ggml_opt_result_free(t->res_train);
    if (t->res_val) ggml_opt_result_free(t->res_val);
    windows_free(&t->train);
    windows_free(&t->val);
    token_stream_free(&t->ts);
    if (t->opt) ggml_opt_free(t->opt);
    free(t->labels);
    if (t->ctx_graph) ggml_free(t->ctx_graph);
    if (t->buf_input) ggml_backend_buffer_free(t->buf_input);
    if (t->ctx_input) ggml_free(t->ctx_input);
    net_free(&t->net);
    if (t->sched) ggml_backend_sched_free(t->sched);
    if (t->backend) ggml_backend_free(t->backend);
    if (t->vocab) llama_model_free(t->vocab);
    if (t->meta) gguf_free(t->meta);
}

int main(int argc, char **argv) {
    struct trainer t = {0};
    parse_args(argc, argv, &t.o);
    const int rc = run(&t);
    trainer_free(&t);
    llama_backend_free();
    return rc;
}
