/*
 * run.c: `sipp MODEL PROMPT [options]`, and `sipp MODEL --chat` as an interactive chat.
 *
 * Tokens go to stdout as the engine produces them; everything else (progress, errors, stats) goes to
 * stderr, so `sipp m.gguf "..." > out.txt` captures only the text. With --stats json the last line
 * of stderr is one JSON object. Ctrl-C during a generation stops that generation; a second Ctrl-C,
 * or one while idle, ends the program.
 *
 * A chat's answer is parsed as it streams (sipp_chat_parser: the template's format): the content goes
 * to stdout, the reasoning too (dimmed on a terminal) or not, as --reasoning says, and with --tools
 * the tool calls are printed at the end as one JSON array on stdout. --json-schema and --grammar
 * constrain the answer, of a chat or of a plain prompt.
 */
#include <jansson.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"

#define MAX_STOP 16
#define MAX_MEDIA 16
#define PROGRESS_WIDTH 30
#define WAIT_SLICE_MS 100
#define LINE_MAX_BYTES (64 * 1024)
#define MAX_TOKENS_MAX (1 << 24)
#define TOP_K_MAX (1 << 24)
#define FACTOR_MAX 100 /* the largest temperature and repeat penalty */
#define POSITIVE 1e-9  /* the least top-p and repeat penalty: 0 is refused */

#define DIM_ON "\033[2m"
#define DIM_OFF "\033[0m"
#define READ_CHUNK 4096

typedef struct run_opts {
    cli_common c; /* --artifact, --backend, --threads, --ctx-size, --gpu-layers, --flash-attn,
                     --cache-type-k, --cache-type-v, --spec, --draft, --rpc */
    const char *model;
    const char *prompt;
    const char *system;
    int draft_max, draft_min;
    float draft_p_min;
    const char *draft_cutoff;
    const char *chat_template;
    const char *tensor_split;
    bool chat;
    bool ignore_eos;
    int max_tokens;
    sipp_sampling sampling;
    const char *stop[MAX_STOP];
    size_t n_stop;
    const char *stats;     /* --stats off|text|json */
    const char *reasoning; /* --reasoning show|hide|only */
    json_t *tools;         /* --tools FILE: an OpenAI tools array */
    json_t *json_schema;   /* --json-schema FILE|JSON */
    char *grammar;         /* --grammar FILE: GBNF */
    char *stdin_prompt;    /* the prompt, when it was read from stdin */
    const char *mmproj;    /* --mmproj FILE|auto: the model's multimodal projector */
    bool no_mmproj_offload;
    const char *media[MAX_MEDIA]; /* --image and --audio files, in order */
    bool media_audio[MAX_MEDIA];
    size_t n_media;
    json_t *media_parts; /* their content parts (made before the load) */
    char mmproj_buf[PATH_MAX];
} run_opts;

/* ---- the options: one table parses them and prints --help ---- */

/* --stop TEXT, once per string. */
static bool parse_stop(cli_args *a, const cli_option *opt, void *opts) {
    run_opts *o = opts;
    if (o->n_stop == MAX_STOP) {
        cli_error("%s: at most %d stop strings", opt->name, MAX_STOP);
        return false;
    }
    o->stop[o->n_stop++] = a->value;
    return true;
}

/* --image PATH and --audio PATH, once per file, in order. */
static bool parse_media(cli_args *a, const cli_option *opt, void *opts) {
    run_opts *o = opts;
    if (o->n_media == MAX_MEDIA) {
        cli_error("%s: at most %d images and audio files", opt->name, MAX_MEDIA);
        return false;
    }
    o->media_audio[o->n_media] = strcmp(opt->name, "--audio") == 0;
    o->media[o->n_media++] = a->value;
    return true;
}

static bool parse_tools(cli_args *a, const cli_option *opt, void *opts) {
    run_opts *o = opts;
    json_error_t je;
    json_decref(o->tools);
    o->tools = json_load_file(a->value, JSON_REJECT_DUPLICATES, &je);
    if (json_is_array(o->tools)) return true;
    cli_error("%s %s: %s", opt->name, a->value, o->tools ? "must be a JSON array of tools" : je.text);
    return false;
}

/* --json-schema: the schema itself when it starts with '{', else a file that holds it. */
static bool parse_json_schema(cli_args *a, const cli_option *opt, void *opts) {
    run_opts *o = opts;
    json_error_t je;
    json_decref(o->json_schema);
    o->json_schema = a->value[0] == '{' ? json_loads(a->value, JSON_REJECT_DUPLICATES, &je)
                                        : json_load_file(a->value, JSON_REJECT_DUPLICATES, &je);
    if (json_is_object(o->json_schema)) return true;
    cli_error("%s %s: %s", opt->name, a->value, o->json_schema ? "must be a JSON Schema object" : je.text);
    return false;
}

static bool parse_grammar(cli_args *a, const cli_option *opt, void *opts) {
    run_opts *o = opts;
    free(o->grammar);
    FILE *f = fopen(a->value, "rb");
    o->grammar = f ? cli_read_all(f) : NULL;
    if (f) fclose(f);
    if (o->grammar) return true;
    cli_error("%s %s: cannot read the file", opt->name, a->value);
    return false;
}

static bool parse_seed(cli_args *a, const cli_option *opt, void *opts) {
    return cli_uint32(a, opt->name, &((run_opts *)opts)->sampling.seed);
}

static bool parse_draft_p_min(cli_args *a, const cli_option *opt, void *opts) {
    return cli_float_below(a, opt->name, opt->lo, opt->hi, &((run_opts *)opts)->draft_p_min);
}

static const cli_option opt_chat = {
    .name = "--chat",
    .kind = CLI_OPT_FLAG,
    .offset = offsetof(run_opts, chat),
    .help = "treat PROMPT as a user message, rendered with the model's chat template"};
static const cli_option opt_system = {.name = "--system",
                                      .arg = "TEXT",
                                      .kind = CLI_OPT_STRING,
                                      .offset = offsetof(run_opts, system),
                                      .help = "system message for --chat"};
static const cli_option opt_chat_template = {.name = "--chat-template",
                                             .arg = "NAME|FILE",
                                             .kind = CLI_OPT_STRING,
                                             .offset = offsetof(run_opts, chat_template),
                                             .help =
                                                 "template instead of the model's: chatml, or a Jinja file"};
static const cli_option opt_tools = {.name = "--tools",
                                     .arg = "FILE",
                                     .kind = CLI_OPT_CUSTOM,
                                     .parse = parse_tools,
                                     .help = "OpenAI tools (a JSON array) the chat may call; the calls are "
                                             "printed as\none JSON array on stdout at the end"};
static const cli_option opt_json_schema = {.name = "--json-schema",
                                           .arg = "FILE|JSON",
                                           .kind = CLI_OPT_CUSTOM,
                                           .parse = parse_json_schema,
                                           .help = "the answer must be JSON valid under this schema"};
static const cli_option opt_grammar = {.name = "--grammar",
                                       .arg = "FILE",
                                       .kind = CLI_OPT_CUSTOM,
                                       .parse = parse_grammar,
                                       .help = "the answer must follow this GBNF grammar"};
static const cli_option opt_reasoning = {.name = "--reasoning",
                                         .arg = "show|hide|only",
                                         .kind = CLI_OPT_CHOICE,
                                         .offset = offsetof(run_opts, reasoning),
                                         .help = "a thinking model's reasoning: shown (dimmed on a terminal, "
                                                 "the default),\nhidden, or alone"};
static const cli_option opt_max_tokens = {
    .name = "--max-tokens",
    .arg = "N",
    .kind = CLI_OPT_INT,
    .offset = offsetof(run_opts, max_tokens),
    .lo = -1,
    .hi = MAX_TOKENS_MAX,
    .help = "generate at most N tokens (default 256; -1 = until the context is full)"};
static const cli_option opt_temperature = {.name = "--temperature",
                                           .arg = "T",
                                           .kind = CLI_OPT_FLOAT,
                                           .offset = offsetof(run_opts, sampling.temperature),
                                           .lo = 0,
                                           .hi = FACTOR_MAX,
                                           .help = "0 = greedy (default 0.8)"};
static const cli_option opt_top_k = {.name = "--top-k",
                                     .arg = "K",
                                     .kind = CLI_OPT_INT,
                                     .offset = offsetof(run_opts, sampling.top_k),
                                     .lo = 0,
                                     .hi = TOP_K_MAX,
                                     .help = "(default 40; 0 = off)"};
static const cli_option opt_top_p = {.name = "--top-p",
                                     .arg = "P",
                                     .kind = CLI_OPT_FLOAT,
                                     .offset = offsetof(run_opts, sampling.top_p),
                                     .lo = POSITIVE,
                                     .hi = 1,
                                     .help = "(default 0.95; 1 = off)"};
static const cli_option opt_min_p = {.name = "--min-p",
                                     .arg = "P",
                                     .kind = CLI_OPT_FLOAT,
                                     .offset = offsetof(run_opts, sampling.min_p),
                                     .lo = 0,
                                     .hi = 1,
                                     .help = "(default 0.05; 0 = off)"};
static const cli_option opt_repeat_penalty = {.name = "--repeat-penalty",
                                              .arg = "R",
                                              .kind = CLI_OPT_FLOAT,
                                              .offset = offsetof(run_opts, sampling.repeat_penalty),
                                              .lo = POSITIVE,
                                              .hi = FACTOR_MAX,
                                              .help = "(default 1.0 = off)"};
static const cli_option opt_seed = {.name = "--seed",
                                    .arg = "S",
                                    .kind = CLI_OPT_CUSTOM,
                                    .parse = parse_seed,
                                    .help = "sampling seed (default: random)"};
static const cli_option opt_stop = {.name = "--stop",
                                    .arg = "TEXT",
                                    .kind = CLI_OPT_CUSTOM,
                                    .parse = parse_stop,
                                    .help = "stop when TEXT is generated (repeatable; TEXT is not printed)"};
static const cli_option opt_mmproj = {
    .name = "--mmproj",
    .arg = "FILE|auto",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(run_opts, mmproj),
    .help = "the model's multimodal projector (mmproj-*.gguf) for --image and --audio; auto: the one beside "
            "MODEL"};
static const cli_option opt_no_mmproj_offload = {
    .name = "--no-mmproj-offload",
    .kind = CLI_OPT_FLAG,
    .offset = offsetof(run_opts, no_mmproj_offload),
    .help = "run the projector on the CPU even when the model is on a GPU"};
static const cli_option opt_image = {.name = "--image",
                                     .arg = "PATH",
                                     .kind = CLI_OPT_CUSTOM,
                                     .parse = parse_media,
                                     .help = "an image (PNG, JPEG, GIF, BMP) for the chat, with --mmproj "
                                             "(repeatable; implies --chat)"};
static const cli_option opt_audio = {.name = "--audio",
                                     .arg = "PATH",
                                     .kind = CLI_OPT_CUSTOM,
                                     .parse = parse_media,
                                     .help = "an audio file (WAV, MP3, FLAC) for the chat, with --mmproj "
                                             "(repeatable; implies --chat)"};
static const cli_option opt_ignore_eos = {.name = "--ignore-eos",
                                          .kind = CLI_OPT_FLAG,
                                          .offset = offsetof(run_opts, ignore_eos),
                                          .help = "keep generating past end-of-generation tokens"};
static const cli_option opt_ctx_size = {
    .like = &cli_opt_ctx_size, .help = "context size in tokens (default: the model's, at most 4096)"};
static const cli_option opt_backend = {.like = &cli_opt_backend,
                                       .help = "auto (default), cpu, vulkan, cuda, metal, webgpu, rpc"};
static const cli_option opt_flash_attn = {
    .like = &cli_opt_flash_attn,
    .help = "auto (default: llama.cpp's choice; off with --backend cpu), on, off"};
static const cli_option opt_spec = {
    .like = &cli_opt_spec,
    .help = "speculative decoding (not with a repeat penalty; default none, draft with\n"
            "--draft): ngram: prompt lookup; draft: a smaller model of the same vocabulary\n"
            "proposes"};
static const cli_option opt_draft = {
    .like = &cli_opt_draft,
    .help = "the draft model (a path or a store name); auto: the draft published beside\n"
            "MODEL (named like it with a draft or mtp part), for development"};
static const cli_option opt_draft_max = {.name = "--draft-max",
                                         .arg = "N",
                                         .kind = CLI_OPT_INT,
                                         .offset = offsetof(run_opts, draft_max),
                                         .lo = 1,
                                         .hi = SIPP_DRAFT_MAX,
                                         .help = "tokens proposed per step (default 8, at most 32)"};
static const cli_option opt_draft_min = {.name = "--draft-min",
                                         .arg = "N",
                                         .kind = CLI_OPT_INT,
                                         .offset = offsetof(run_opts, draft_min),
                                         .lo = 1,
                                         .hi = SIPP_DRAFT_MAX,
                                         .help = "shorter proposals are not verified (default 1)"};
static const cli_option opt_draft_p_min = {
    .name = "--draft-p-min",
    .arg = "P",
    .kind = CLI_OPT_CUSTOM,
    .lo = 0,
    .hi = 1,
    .parse = parse_draft_p_min,
    .help = "the draft stops at a token it gives less than P, in [0, 1) (default 0)"};
static const cli_option opt_draft_cutoff = {
    .name = "--draft-cutoff",
    .arg = "auto|off",
    .kind = CLI_OPT_CHOICE,
    .offset = offsetof(run_opts, draft_cutoff),
    .help = "auto (default): a cost model measured as it runs picks each step's draft\n"
            "length, 0 (a plain step) where drafting would be slower; off: always up to\n"
            "--draft-max"};
static const cli_option opt_rpc = {.like = &cli_opt_rpc,
                                   .help = "with --backend rpc: the rpc servers to split the model across\n"
                                           "(default $SIPP_RPC_SERVERS; start them with sipp rpc-server)"};
static const cli_option opt_tensor_split = {.name = "--tensor-split",
                                            .arg = "A,B,..",
                                            .kind = CLI_OPT_STRING,
                                            .offset = offsetof(run_opts, tensor_split),
                                            .help =
                                                "with --backend rpc: layer shares, local first, then each "
                                                "server\n(default: in proportion to free memory)"};
static const cli_option opt_stats = {.name = "--stats",
                                     .arg = "off|text|json",
                                     .kind = CLI_OPT_CHOICE,
                                     .offset = offsetof(run_opts, stats),
                                     .help = "print timing stats on stderr at the end (default off)"};

static const cli_option *const options[] = {&opt_chat,
                                            &opt_system,
                                            &opt_chat_template,
                                            &opt_tools,
                                            &opt_json_schema,
                                            &opt_grammar,
                                            &opt_reasoning,
                                            &opt_max_tokens,
                                            &opt_temperature,
                                            &opt_top_k,
                                            &opt_top_p,
                                            &opt_min_p,
                                            &opt_repeat_penalty,
                                            &opt_seed,
                                            &opt_stop,
                                            &opt_ignore_eos,
                                            &opt_mmproj,
                                            &opt_image,
                                            &opt_audio,
                                            &opt_no_mmproj_offload,
                                            &opt_ctx_size,
                                            &cli_opt_cache_type_k,
                                            &cli_opt_lora,
                                            &cli_opt_cache_type_v,
                                            &cli_opt_threads,
                                            &opt_backend,
                                            &cli_opt_gpu_layers,
                                            &opt_flash_attn,
                                            &opt_spec,
                                            &opt_draft,
                                            &opt_draft_max,
                                            &opt_draft_min,
                                            &opt_draft_p_min,
                                            &opt_draft_cutoff,
                                            &opt_rpc,
                                            &opt_tensor_split,
                                            &cli_opt_artifact,
                                            &opt_stats,
                                            NULL};

static const char about[] =
    "Runs a GGUF model on PROMPT and streams the generated text to stdout.\n"
    "PROMPT '-' (or no PROMPT with stdin not a terminal) reads the prompt from stdin.\n"
    "\n"
    "exit status: 0 success, 1 runtime failure, 2 bad usage, 75 an rpc server went away mid-run\n";

static const cli_command command = {
    .name = "",
    .synopsis =
        "MODEL PROMPT [options]\n       sipp MODEL --chat            (interactive chat on a terminal)",
    .about = about,
    .options = options,
    .max_args = 2,
    .args_hint = "give MODEL and one PROMPT; quote a prompt with spaces"};

static atomic_int interrupts;

static void on_sigint(int sig) { atomic_fetch_add(&interrupts, 1); }

/* What the options say together, once each is known to be well formed. */
static bool options_fit(const run_opts *o) {
    char err[SIPP_ERROR_SIZE];
    if (sipp_backend_check_name(o->c.backend, err) != SIPP_OK) {
        cli_error("--backend: %s", err);
        return false;
    }
    if (!cli_cache_types_fit(o->c.backend, o->c.flash_attn, o->c.cache_type_k, o->c.cache_type_v))
        return false;
    if (o->n_media && !o->mmproj) {
        cli_error("--image and --audio need the model's projector: --mmproj FILE (or --mmproj auto)");
        return false;
    }
    if (o->tools && !o->chat) {
        cli_error("--tools needs --chat: tools are offered to a chat");
        return false;
    }
    if (o->grammar && o->json_schema) {
        cli_error("give either --grammar or --json-schema, not both");
        return false;
    }
    if (!o->model) {
        cli_error("no MODEL given (see sipp --help)");
        return false;
    }
    return true;
}

/* Returns CLI_PARSED, EXIT_OK after --help, or EXIT_USAGE after printing what is wrong. */
static int parse(int argc, char **argv, run_opts *o) {
    sipp_request_params d = sipp_request_default_params();
    memset(o, 0, sizeof *o);
    o->max_tokens = d.max_tokens;
    o->sampling = d.sampling;
    o->c.backend = "auto";
    o->c.gpu_layers = -1;
    o->stats = "off";
    o->reasoning = "show";
    const char *args[2] = {NULL, NULL};
    int n_args;
    int rc = cli_parse(&command, argc, argv, o, args, &n_args);
    if (rc != CLI_PARSED) return rc;
    o->model = args[0];
    o->prompt = args[1];
    if (o->n_media) o->chat = true; /* images and audio go with the user's message */
    return options_fit(o) ? CLI_PARSED : EXIT_USAGE;
}

static void run_opts_free(run_opts *o) {
    json_decref(o->media_parts);
    json_decref(o->tools);
    json_decref(o->json_schema);
    free(o->grammar);
    free(o->stdin_prompt);
}

/* Reads all of f (stdin as the prompt, a grammar file). */
char *cli_read_all(FILE *f) {
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
        }
    }
    if (buf) buf[len] = '\0';
    return buf;
}

static bool progress_bar(float p, void *user) {
    const char *name = user;
    int filled = (int)(p * PROGRESS_WIDTH + 0.5f);
    fprintf(stderr, "\rloading %s [", name);
    for (int i = 0; i < PROGRESS_WIDTH; i++)
        fputc(i < filled ? '#' : ' ', stderr);
    fprintf(stderr, "] %3d%%", (int)(p * 100 + 0.5f));
    if (p >= 1.0f) fputs("\r\033[K", stderr);
    fflush(stderr);
    return atomic_load(&interrupts) == 0;
}

/* A write that fails (a reader that went away, where SIGPIPE is ignored: rpc loads) stops the
 * generation rather than computing text no one reads. */
static bool print_piece(const char *piece, size_t len, void *user) {
    fwrite(piece, 1, len, stdout);
    return fflush(stdout) == 0 && !ferror(stdout);
}

static void print_stats(const run_opts *o, const sipp_model *m, const sipp_request *r) {
    sipp_request_stats s;
    sipp_request_get_stats(r, &s);
    sipp_model_info info;
    sipp_model_get_info(m, &info);
    const sipp_backend_decision *b = sipp_model_backend(m);
    sipp_placement place[MAX_PLACEMENT];
    int n_place = sipp_model_placement(m, place, MAX_PLACEMENT);
    if (n_place > MAX_PLACEMENT) n_place = MAX_PLACEMENT;
    if (strcmp(o->stats, "text") == 0) {
        fprintf(stderr,
                "\n--\nbackend %s (%s), devices %s, gpu layers %d\n"
                "load %.0f ms | prompt %d tokens (%d cached), %.1f tokens/s | ttft %.0f ms\n"
                "generated %d tokens, %.1f tokens/s | finish %s\n",
                b->backend, b->reason, b->devices, b->gpu_layers, info.load_ms, s.prompt_tokens,
                s.cached_tokens, s.prefill_tokens_per_s, s.ttft_ms, s.generated_tokens, s.decode_tokens_per_s,
                sipp_finish_reason_name(sipp_request_finish_reason(r)));
        for (int i = 0; i < n_place; i++)
            cli_print_placement(stderr, &place[i]);
        return;
    }
    json_t *j =
        json_pack("{s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:s, s:s, s:s, s:i, s:s, s:s}",
                  "prompt_tokens", s.prompt_tokens, "generated_tokens", s.generated_tokens, "cached_tokens",
                  s.cached_tokens, "load_ms", info.load_ms, "ttft_ms", s.ttft_ms, "prefill_tokens_per_s",
                  s.prefill_tokens_per_s, "decode_tokens_per_s", s.decode_tokens_per_s, "queue_ms",
                  s.queue_ms, "total_ms", s.total_ms, "backend", b->backend, "backend_reason", b->reason,
                  "devices", b->devices, "gpu_layers", b->gpu_layers, "finish_reason",
                  sipp_finish_reason_name(sipp_request_finish_reason(r)), "model", info.description);
    if (j) cli_stats_speculation(j, &s);
    if (j && s.media_tokens)
        json_object_update_new(j, json_pack("{s:i, s:i, s:f}", "media_tokens", s.media_tokens,
                                            "media_encoded", s.media_encoded, "encode_ms", s.encode_ms));
    if (j) json_object_set_new(j, "placement", cli_placement_json(place, n_place));
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text) fprintf(stderr, "%s\n", text);
    free(text);
    json_decref(j);
}

/* The chat as the JSON libsipp takes: the messages, and the tools and schema of the flags. */
static char *chat_json(const run_opts *o, const sipp_message *msgs, json_t *const *media, size_t n) {
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "messages", arr);
    for (size_t i = 0; i < n; i++) {
        json_t *content = json_string(msgs[i].content);
        if (media && media[i] && json_array_size(media[i])) { /* the text, then its images and audio */
            json_t *parts = json_pack("[{s:s, s:o}]", "type", "text", "text", content);
            json_array_extend(parts, media[i]);
            content = parts;
        }
        json_array_append_new(arr, json_pack("{s:s, s:o}", "role", msgs[i].role, "content", content));
    }
    if (o->tools) json_object_set(root, "tools", o->tools);
    if (o->json_schema) json_object_set(root, "json_schema", o->json_schema);
    if (o->grammar) json_object_set_new(root, "grammar", json_string(o->grammar));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

static bool reasoning_is(const run_opts *o, const char *mode) { return strcmp(o->reasoning, mode) == 0; }

/* How a chat's answer is being printed: --reasoning's choice, and whether reasoning is open. */
typedef struct delta_printer {
    const run_opts *o;
    bool dim, in_reasoning;
} delta_printer;

/* Prints one parsed delta of a chat's answer as --reasoning says. */
static void print_delta(const sipp_chat_delta *d, void *user) {
    delta_printer *pr = user;
    const run_opts *o = pr->o;
    if (d->reasoning && !reasoning_is(o, "hide")) {
        if (pr->dim && reasoning_is(o, "show") && !pr->in_reasoning) fputs(DIM_ON, stdout);
        pr->in_reasoning = true;
        fputs(d->reasoning, stdout);
    }
    if (d->content && !reasoning_is(o, "only")) {
        if (pr->in_reasoning && pr->dim && reasoning_is(o, "show")) fputs(DIM_OFF, stdout);
        if (pr->in_reasoning) fputs("\n", stdout);
        pr->in_reasoning = false;
        fputs(d->content, stdout);
    }
}

/* --tools: the answer's calls, as OpenAI's tool_calls array, on a line of their own. */
static void print_tool_calls(const sipp_chat_parser *ps) {
    json_t *calls = json_array();
    const char *id, *name, *args;
    for (size_t i = 0; sipp_chat_parser_tool_call(ps, i, &id, &name, &args); i++)
        json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                               "function", "name", name, "arguments", args));
    char *text = json_dumps(calls, JSON_COMPACT);
    printf("\n%s\n", text ? text : "[]");
    free(text);
    json_decref(calls);
}

/* Streams a chat's answer through its parser on this thread; --tools prints the calls at the end. */
static void stream_chat(const run_opts *o, sipp_request *r) {
    sipp_chat_parser *ps = NULL;
    char err[SIPP_ERROR_SIZE], buf[READ_CHUNK];
    if (sipp_chat_parser_new(r, &ps, err) != SIPP_OK) {
        cli_error("%s", err);
        return;
    }
    bool finished = false;
    delta_printer pr = {.o = o, .dim = cli_interactive_output()};
    int seen = atomic_load(&interrupts);
    while (!finished) {
        size_t n = sipp_request_read(r, buf, sizeof buf, WAIT_SLICE_MS, &finished);
        if (atomic_load(&interrupts) != seen) sipp_request_cancel(r);
        if (!n && !finished) continue;
        if (sipp_chat_parser_feed_deltas(ps, buf, n, finished, print_delta, &pr) != SIPP_OK) {
            fprintf(stderr,
                    "sipp: warning: the answer does not follow the template's format (%s); printed as "
                    "it came\n",
                    sipp_chat_parser_error(ps));
            fwrite(sipp_request_text(r), 1, strlen(sipp_request_text(r)), stdout);
            break;
        }
        fflush(stdout);
    }
    if (pr.in_reasoning && pr.dim && reasoning_is(o, "show")) fputs(DIM_OFF, stdout);
    if (o->tools) print_tool_calls(ps);
    fflush(stdout);
    sipp_chat_parser_free(ps);
}

/* Submits one request and streams it (media: each message's images and audio, or NULL). Ctrl-C
 * cancels it. Returns the request (finished) or NULL. */
static sipp_request *generate(sipp_engine *e, const run_opts *o, const char *prompt, const sipp_message *msgs,
                              json_t *const *media, size_t n_msgs, const char *context_key) {
    sipp_request_params p = sipp_request_default_params();
    char *chat = msgs ? chat_json(o, msgs, media, n_msgs) : NULL;
    char *schema = !msgs && o->json_schema ? json_dumps(o->json_schema, JSON_COMPACT) : NULL;
    p.prompt = prompt;
    p.chat_json = chat;
    p.grammar = msgs ? NULL : o->grammar;
    p.json_schema = schema;
    p.chat_template = o->chat_template;
    p.max_tokens = o->max_tokens;
    p.sampling = o->sampling;
    p.stop = o->stop;
    p.n_stop = o->n_stop;
    p.ignore_eos = o->ignore_eos;
    p.context_key = context_key;
    p.on_piece = msgs ? NULL : print_piece;
    sipp_request *r;
    sipp_status st = sipp_engine_submit(e, &p, &r);
    free(chat);
    free(schema);
    if (st != SIPP_OK) {
        cli_error("%s", sipp_engine_last_error(e));
        return NULL;
    }
    if (*sipp_request_warning(r)) fprintf(stderr, "sipp: warning: %s\n", sipp_request_warning(r));
    if (msgs) {
        stream_chat(o, r);
        sipp_request_wait(r, -1);
        return r;
    }
    int seen = atomic_load(&interrupts);
    while (sipp_request_wait(r, WAIT_SLICE_MS) != SIPP_OK)
        if (atomic_load(&interrupts) != seen) sipp_request_cancel(r);
    return r;
}

static int finish_one(const run_opts *o, sipp_model *m, sipp_request *r) {
    if (!r) return EXIT_RUNTIME;
    sipp_finish_reason fr = sipp_request_finish_reason(r);
    const char *text = sipp_request_text(r);
    size_t len = strlen(text);
    if (len && text[len - 1] != '\n') fputc('\n', stdout);
    fflush(stdout);
    int rc = EXIT_OK;
    if (fr == SIPP_FINISH_ERROR) {
        cli_error("%s", sipp_request_error(r));
        rc = EXIT_RUNTIME;
    } else if (fr == SIPP_FINISH_CANCELLED) {
        fprintf(stderr, "sipp: generation stopped\n");
    }
    if (strcmp(o->stats, "off") != 0) print_stats(o, m, r);
    return rc;
}

/* The interactive chat's conversation: its messages, the text each owns, and each one's images and
 * audio (NULL for none). */
typedef struct conversation {
    sipp_message *msgs;
    char **owned;
    json_t **media;
    size_t n, cap, base; /* base: the system message, which /clear keeps */
    json_t *pending;     /* /image and /audio files for the next message */
} conversation;

static bool conversation_push(conversation *c, const char *role, const char *text, json_t *media) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        sipp_message *m = realloc(c->msgs, cap * sizeof *m);
        if (m) c->msgs = m;
        char **ow = m ? realloc(c->owned, cap * sizeof *ow) : NULL;
        if (ow) c->owned = ow;
        json_t **md = ow ? realloc(c->media, cap * sizeof *md) : NULL;
        if (!md) return false;
        c->media = md;
        c->cap = cap;
    }
    c->owned[c->n] = text ? strdup(text) : NULL;
    c->msgs[c->n] = (sipp_message){role, c->owned[c->n] ? c->owned[c->n] : ""};
    c->media[c->n++] = media;
    return true;
}

static void conversation_trim(conversation *c, size_t to) {
    while (c->n > to) {
        c->n--;
        free(c->owned[c->n]);
        json_decref(c->media[c->n]);
    }
}

/* A line starting with '/': true when it was one of the chat's commands (*leave for /exit). */
static bool chat_command(conversation *c, const char *line, bool *leave) {
    bool image = strncmp(line, "/image ", 7) == 0, audio = strncmp(line, "/audio ", 7) == 0;
    if (strcmp(line, "/exit") == 0) {
        *leave = true;
    } else if (strcmp(line, "/clear") == 0) {
        conversation_trim(c, c->base);
        json_array_clear(c->pending);
    } else if (image || audio) {
        json_t *part = cli_media_part(line + 7, audio);
        if (part) json_array_append_new(c->pending, part);
        if (part)
            fprintf(stderr, "sipp chat: %s %s goes with your next message\n", audio ? "audio" : "image",
                    line + 7);
    } else {
        return false;
    }
    return true;
}

/* The interactive chat: one conversation pinned to one slot, so each turn evaluates only its new
 * tokens. /image PATH and /audio PATH attach a file to the next message (a model with --mmproj),
 * /clear starts over, /exit (or end of input) leaves. */
static int chat_loop(sipp_engine *e, sipp_model *m, const run_opts *o) {
    conversation c = {.pending = json_array()};
    if (o->system) conversation_push(&c, "system", o->system, NULL);
    c.base = c.n;
    char *line = malloc(LINE_MAX_BYTES);
    int rc = EXIT_OK;
    bool leave = false;
    fprintf(stderr, "sipp chat: type a message; %s/clear starts over, /exit leaves.\n",
            o->mmproj ? "/image PATH or /audio PATH attaches a file, " : "");
    while (line && !leave) {
        fprintf(stderr, "> ");
        fflush(stderr);
        atomic_store(&interrupts, 0);
        if (!fgets(line, LINE_MAX_BYTES, stdin)) break;
        line[strcspn(line, "\n")] = '\0';
        if (!*line || (*line == '/' && chat_command(&c, line, &leave))) continue;
        json_t *media = json_array_size(c.pending) ? json_deep_copy(c.pending) : NULL;
        json_array_clear(c.pending);
        if (!conversation_push(&c, "user", line, media)) break;
        sipp_request *r = generate(e, o, NULL, c.msgs, c.media, c.n, "cli-chat");
        if (!r) { /* refused (said why): the message leaves the conversation, the chat goes on */
            conversation_trim(&c, c.n - 1);
            rc = EXIT_RUNTIME;
            continue;
        }
        rc = EXIT_OK;
        conversation_push(&c, "assistant", sipp_request_text(r), NULL);
        finish_one(o, m, r);
        sipp_request_free(r);
    }
    conversation_trim(&c, 0);
    free(c.msgs);
    free(c.owned);
    free(c.media);
    json_decref(c.pending);
    free(line);
    return rc;
}

/* The prompt: PROMPT, or stdin's text for '-' (or no PROMPT) when stdin is not a terminal. On a
 * terminal without PROMPT, --chat makes the chat interactive (*interactive). False after printing why
 * there is none. */
static bool read_prompt(run_opts *o, bool *interactive) {
    bool from_stdin = !o->prompt || strcmp(o->prompt, "-") == 0;
    *interactive = from_stdin && isatty(STDIN_FILENO);
    if (*interactive && (!o->chat || o->prompt)) {
        cli_error("no PROMPT given: sipp MODEL PROMPT, or sipp MODEL --chat for an interactive chat");
        return false;
    }
    if (*interactive) return true;
    if (from_stdin) {
        o->stdin_prompt = cli_read_all(stdin);
        o->prompt = o->stdin_prompt ? o->stdin_prompt : "";
    }
    if (!*o->prompt) {
        cli_error("the prompt is empty; give the text to complete");
        return false;
    }
    return true;
}

/* --mmproj auto: the projector beside MODEL (o->mmproj then names it); and the files' parts. */
static bool cli_mmproj(run_opts *o) {
    if (o->mmproj && strcmp(o->mmproj, "auto") == 0) {
        char path[PATH_MAX], err[SIPP_ERROR_SIZE];
        if (sipp_store_resolve(o->model, path, sizeof path, err) != SIPP_OK ||
            sipp_store_find_mmproj(path, o->mmproj_buf, sizeof o->mmproj_buf, err) != SIPP_OK) {
            cli_error("--mmproj auto: %s", err);
            return false;
        }
        fprintf(stderr, "sipp: note: --mmproj auto uses '%s'\n", o->mmproj_buf);
        o->mmproj = o->mmproj_buf;
    }
    o->media_parts = json_array();
    for (size_t i = 0; i < o->n_media; i++) {
        json_t *part = cli_media_part(o->media[i], o->media_audio[i]);
        if (!part) return false;
        json_array_append_new(o->media_parts, part);
    }
    return true;
}

/* Loads MODEL with its backend, and finds the draft model (its path in draft_buf when --draft auto
 * found it); NULL after printing why not. */
static sipp_model *load_model(run_opts *o, char *draft_buf, size_t cap) {
    if (!cli_runtime_init_for(o->c.artifact, o->c.backend)) return NULL;
    if (!cli_draft_model(o->model, o->c.draft, &o->c.draft, draft_buf, cap)) return NULL;
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = o->c.backend;
    mp.flash_attn = o->c.flash_attn;
    mp.gpu_layers = o->c.gpu_layers;
    mp.rpc_servers = o->c.rpc;
    mp.tensor_split = o->tensor_split;
    if (!cli_mmproj(o)) return NULL;
    mp.mmproj = o->mmproj;
    mp.mmproj_offload = !o->no_mmproj_offload;
    mp.lora = o->c.lora;
    mp.n_lora = (size_t)o->c.n_lora;
    if (cli_interactive_output()) {
        const char *base = strrchr(o->model, '/');
        mp.progress = progress_bar;
        mp.progress_user = (void *)(base ? base + 1 : o->model);
    }
    char err[SIPP_ERROR_SIZE];
    sipp_model *m = NULL;
    if (sipp_model_load(o->model, &mp, &m, err) != SIPP_OK) {
        if (mp.progress) fputs("\r\033[K", stderr);
        cli_error("%s", err);
        return NULL;
    }
    return m;
}

/* One slot, speculating as --spec and --draft say; NULL after printing why not. */
static sipp_engine *new_engine(const run_opts *o, sipp_model *m) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 1;
    ep.ctx_size = o->c.ctx_size;
    ep.threads = o->c.threads;
    ep.speculative = o->c.speculative;
    bool speculates = o->c.draft || (o->c.speculative && strcmp(o->c.speculative, "none") != 0);
    const sipp_sampling *sm = &o->sampling;
    bool penalty = sm->repeat_last_n != 0 && (sm->repeat_penalty != 1.0f || sm->frequency_penalty != 0.0f ||
                                              sm->presence_penalty != 0.0f);
    if (speculates && penalty)
        fprintf(stderr, "sipp: note: speculative decoding is off for a request with --repeat-penalty (its "
                        "distribution depends on the proposals); this one decodes without it\n");
    ep.draft_model = o->c.draft;
    ep.draft_max = o->draft_max;
    ep.draft_min = o->draft_min;
    ep.draft_p_min = o->draft_p_min;
    ep.draft_cutoff = o->draft_cutoff;
    ep.cache_type_k = o->c.cache_type_k;
    ep.cache_type_v = o->c.cache_type_v;
    sipp_engine *e = NULL;
    char err[SIPP_ERROR_SIZE];
    if (sipp_engine_new(m, &ep, &e, err) != SIPP_OK) {
        cli_error("%s", err);
        return NULL;
    }
    return e;
}

/* PROMPT once: as text to complete, or with --chat as the user's message. */
static int run_prompt(sipp_engine *e, sipp_model *m, const run_opts *o) {
    sipp_message msgs[2];
    size_t n = 0;
    if (o->chat && o->system) msgs[n++] = (sipp_message){"system", o->system};
    if (o->chat) msgs[n++] = (sipp_message){"user", o->prompt};
    json_t *media[2] = {NULL, o->media_parts}; /* the files go with the user's message, the last */
    sipp_request *r = generate(e, o, o->chat ? NULL : o->prompt, o->chat ? msgs : NULL,
                               o->chat ? media + 2 - n : NULL, n, NULL);
    int rc = finish_one(o, m, r);
    sipp_request_free(r);
    return rc;
}

/* Loads the model, starts the engine, and runs the prompt or the interactive chat. */
static int run_model(run_opts *o, bool interactive) {
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    char draft_buf[PATH_MAX];
    sipp_model *m = load_model(o, draft_buf, sizeof draft_buf);
    if (!m) return EXIT_RUNTIME;
    sipp_engine *e = new_engine(o, m);
    int rc = !e ? EXIT_RUNTIME : interactive ? chat_loop(e, m, o) : run_prompt(e, m, o);
    sipp_engine_free(e);
    sipp_model_free(m);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    bool interactive = false;
    int rc = parse(argc, argv, &o);
    if (rc == CLI_PARSED) rc = read_prompt(&o, &interactive) ? run_model(&o, interactive) : EXIT_USAGE;
    run_opts_free(&o);
    return rc;
}
