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
#include "cli/packages.h"

#define MAX_STOP 16
#define PROGRESS_WIDTH 30
#define WAIT_SLICE_MS 100
#define LINE_MAX_BYTES (64 * 1024)

typedef enum { STATS_OFF, STATS_TEXT, STATS_JSON } stats_mode;
typedef enum { REASONING_SHOW, REASONING_HIDE, REASONING_ONLY } reasoning_mode;

#define DIM_ON "\033[2m"
#define DIM_OFF "\033[0m"
#define READ_CHUNK 4096

typedef struct run_opts {
    const char *model;
    const char *prompt;
    const char *system;
    const char *backend;
    const char *flash_attn;
    const char *speculative;
    const char *draft; /* --draft MODEL */
    int draft_max, draft_min;
    float draft_p_min;
    const char *draft_cutoff;
    const char *cache_type_k, *cache_type_v;
    const char *artifact;
    const char *chat_template;
    const char *rpc;
    const char *tensor_split;
    bool chat;
    bool ignore_eos;
    int max_tokens;
    int ctx_size;
    int threads;
    int gpu_layers;
    sipp_sampling sampling;
    const char *stop[MAX_STOP];
    size_t n_stop;
    stats_mode stats;
    reasoning_mode reasoning;
    json_t *tools;       /* --tools FILE: an OpenAI tools array */
    json_t *json_schema; /* --json-schema FILE|JSON */
    char *grammar;       /* --grammar FILE: GBNF */
} run_opts;

static const char usage[] =
    "usage: sipp MODEL PROMPT [options]\n"
    "       sipp MODEL --chat            (interactive chat on a terminal)\n"
    "\n"
    "Runs a GGUF model on PROMPT and streams the generated text to stdout.\n"
    "PROMPT '-' (or no PROMPT with stdin not a terminal) reads the prompt from stdin.\n"
    "\n"
    "options:\n"
    "  --chat                 treat PROMPT as a user message, rendered with the model's chat template\n"
    "  --system TEXT          system message for --chat\n"
    "  --chat-template NAME|FILE  template instead of the model's: chatml, or a Jinja file\n"
    "  --tools FILE           OpenAI tools (a JSON array) the chat may call; the calls are printed as\n"
    "                         one JSON array on stdout at the end\n"
    "  --json-schema FILE|JSON  the answer must be JSON valid under this schema\n"
    "  --grammar FILE         the answer must follow this GBNF grammar\n"
    "  --reasoning show|hide|only  a thinking model's reasoning: shown (dimmed on a terminal, the\n"
    "                         default), hidden, or alone\n"
    "  --max-tokens N         generate at most N tokens (default 256; -1 = until the context is full)\n"
    "  --temperature T        0 = greedy (default 0.8)\n"
    "  --top-k K              (default 40; 0 = off)\n"
    "  --top-p P              (default 0.95; 1 = off)\n"
    "  --min-p P              (default 0.05; 0 = off)\n"
    "  --repeat-penalty R     (default 1.0 = off)\n"
    "  --seed S               sampling seed (default: random)\n"
    "  --stop TEXT            stop when TEXT is generated (repeatable; TEXT is not printed)\n"
    "  --ignore-eos           keep generating past end-of-generation tokens\n"
    "  --ctx-size N           context size in tokens (default: the model's, at most 4096)\n"
    "  --cache-type-k TYPE    the KV cache's key type: f16 (default), q8_0, q4_0\n"
    "  --cache-type-v TYPE    its value type: f16 (default), q8_0, q4_0 (quantized needs flash attention)\n"
    "  --threads N            CPU threads (default: all cores)\n"
    "  --backend NAME         auto (default), cpu, vulkan, cuda, metal, webgpu, rpc\n"
    "  --gpu-layers N         layers to put on the GPU backend (default: all)\n"
    "  --flash-attn MODE      auto (default: llama.cpp's choice; off with --backend cpu), on, off\n"
    "  --spec none|ngram|draft  speculative decoding (not with a repeat penalty; default none, draft with\n"
    "                         --draft):\n"
    "                         ngram: prompt lookup; draft: a smaller model of the same vocabulary proposes\n"
    "  --draft MODEL|auto     the draft model (a path or a store name); auto: the draft published beside\n"
    "                         MODEL (named like it with a draft or mtp part), for development\n"
    "  --draft-max N          tokens proposed per step (default 8, at most 32)\n"
    "  --draft-min N          shorter proposals are not verified (default 1)\n"
    "  --draft-p-min P        the draft stops at a token it gives less than P, in [0, 1) (default 0)\n"
    "  --draft-cutoff auto|off  auto (default): a cost model measured as it runs picks each step's\n"
    "                         draft length, 0 (a plain step) where drafting would be slower; off: always\n"
    "                         up to --draft-max\n"
    "  --rpc HOST:PORT[,...]  with --backend rpc: the rpc servers to split the model across\n"
    "                         (default $SIPP_RPC_SERVERS; start them with sipp rpc-server)\n"
    "  --tensor-split A,B,..  with --backend rpc: layer shares, local first, then each server\n"
    "                         (default: in proportion to free memory)\n"
    "  --artifact DIR         use the llama.cpp libraries in DIR (also SIPP_ARTIFACT)\n"
    "  --stats off|text|json  print timing stats on stderr at the end (default off)\n"
    "\n"
    "exit status: 0 success, 1 runtime failure, 2 bad usage, 75 an rpc server went away mid-run\n";

static atomic_int interrupts;

static void on_sigint(int sig) { atomic_fetch_add(&interrupts, 1); }

/* Returns EXIT_OK, or EXIT_USAGE after printing what is wrong. */
static int parse(int argc, char **argv, run_opts *o) {
    sipp_request_params d = sipp_request_default_params();
    memset(o, 0, sizeof *o);
    o->max_tokens = d.max_tokens;
    o->sampling = d.sampling;
    o->backend = "auto";
    o->gpu_layers = -1;
    cli_args a = {.argc = argc, .argv = argv, .i = 0};
    const char *positional[2] = {NULL, NULL};
    int n_pos = 0;
    while (a.i < argc && !a.bad) {
        const char *arg = argv[a.i];
        if (cli_flag(&a, "--chat"))
            o->chat = true;
        else if (cli_flag(&a, "--ignore-eos"))
            o->ignore_eos = true;
        else if (cli_flag_value(&a, "--system"))
            o->system = a.value;
        else if (cli_flag_value(&a, "--chat-template"))
            o->chat_template = a.value;
        else if (cli_flag_value(&a, "--backend"))
            o->backend = a.value;
        else if (cli_flag_value(&a, "--flash-attn"))
            cli_flash_attn(&a, &o->flash_attn);
        else if (cli_flag_value(&a, "--spec"))
            cli_speculative(&a, &o->speculative);
        else if (cli_flag_value(&a, "--draft-max"))
            cli_int(&a, "--draft-max", 1, SIPP_DRAFT_MAX, &o->draft_max);
        else if (cli_flag_value(&a, "--draft-min"))
            cli_int(&a, "--draft-min", 1, SIPP_DRAFT_MAX, &o->draft_min);
        else if (cli_flag_value(&a, "--draft-p-min"))
            cli_float_below(&a, "--draft-p-min", 0, 1, &o->draft_p_min);
        else if (cli_flag_value(&a, "--draft-cutoff"))
            cli_draft_cutoff(&a, &o->draft_cutoff);
        else if (cli_flag_value(&a, "--draft"))
            o->draft = a.value;
        else if (cli_flag_value(&a, "--artifact"))
            o->artifact = a.value;
        else if (cli_flag_value(&a, "--rpc"))
            o->rpc = a.value;
        else if (cli_flag_value(&a, "--tensor-split"))
            o->tensor_split = a.value;
        else if (cli_flag_value(&a, "--max-tokens"))
            cli_int(&a, "--max-tokens", -1, 1 << 24, &o->max_tokens);
        else if (cli_flag_value(&a, "--ctx-size"))
            cli_int(&a, "--ctx-size", 0, 1 << 24, &o->ctx_size);
        else if (cli_flag_value(&a, "--cache-type-k"))
            cli_cache_type(&a, "--cache-type-k", &o->cache_type_k);
        else if (cli_flag_value(&a, "--cache-type-v"))
            cli_cache_type(&a, "--cache-type-v", &o->cache_type_v);
        else if (cli_flag_value(&a, "--threads"))
            cli_int(&a, "--threads", 1, 1024, &o->threads);
        else if (cli_flag_value(&a, "--gpu-layers"))
            cli_int(&a, "--gpu-layers", -1, 100000, &o->gpu_layers);
        else if (cli_flag_value(&a, "--temperature"))
            cli_float(&a, "--temperature", 0, 100, &o->sampling.temperature);
        else if (cli_flag_value(&a, "--top-k"))
            cli_int(&a, "--top-k", 0, 1 << 24, &o->sampling.top_k);
        else if (cli_flag_value(&a, "--top-p"))
            cli_float(&a, "--top-p", 1e-9, 1, &o->sampling.top_p);
        else if (cli_flag_value(&a, "--min-p"))
            cli_float(&a, "--min-p", 0, 1, &o->sampling.min_p);
        else if (cli_flag_value(&a, "--repeat-penalty"))
            cli_float(&a, "--repeat-penalty", 1e-9, 100, &o->sampling.repeat_penalty);
        else if (cli_flag_value(&a, "--seed"))
            cli_uint32(&a, "--seed", &o->sampling.seed);
        else if (cli_flag_value(&a, "--stop")) {
            if (!a.value) break;
            if (o->n_stop == MAX_STOP) {
                cli_error("--stop: at most %d stop strings", MAX_STOP);
                return EXIT_USAGE;
            }
            o->stop[o->n_stop++] = a.value;
        } else if (cli_flag_value(&a, "--tools")) {
            if (!a.value) break;
            json_error_t je;
            o->tools = json_load_file(a.value, JSON_REJECT_DUPLICATES, &je);
            if (!json_is_array(o->tools)) {
                cli_error("--tools %s: %s", a.value, o->tools ? "must be a JSON array of tools" : je.text);
                return EXIT_USAGE;
            }
        } else if (cli_flag_value(&a, "--json-schema")) {
            if (!a.value) break;
            json_error_t je;
            o->json_schema = a.value[0] == '{' ? json_loads(a.value, JSON_REJECT_DUPLICATES, &je)
                                               : json_load_file(a.value, JSON_REJECT_DUPLICATES, &je);
            if (!json_is_object(o->json_schema)) {
                cli_error("--json-schema %s: %s", a.value,
                          o->json_schema ? "must be a JSON Schema object" : je.text);
                return EXIT_USAGE;
            }
        } else if (cli_flag_value(&a, "--grammar")) {
            if (!a.value) break;
            FILE *f = fopen(a.value, "rb");
            if (!f || !(o->grammar = cli_read_all(f))) {
                cli_error("--grammar %s: cannot read the file", a.value);
                if (f) fclose(f);
                return EXIT_USAGE;
            }
            fclose(f);
        } else if (cli_flag_value(&a, "--reasoning")) {
            if (!a.value) break;
            if (strcmp(a.value, "show") == 0)
                o->reasoning = REASONING_SHOW;
            else if (strcmp(a.value, "hide") == 0)
                o->reasoning = REASONING_HIDE;
            else if (strcmp(a.value, "only") == 0)
                o->reasoning = REASONING_ONLY;
            else {
                cli_error("--reasoning '%s' is not one of show, hide, only", a.value);
                return EXIT_USAGE;
            }
        } else if (cli_flag_value(&a, "--stats")) {
            if (!a.value) break;
            if (strcmp(a.value, "off") == 0)
                o->stats = STATS_OFF;
            else if (strcmp(a.value, "text") == 0)
                o->stats = STATS_TEXT;
            else if (strcmp(a.value, "json") == 0)
                o->stats = STATS_JSON;
            else {
                cli_error("--stats '%s' is not one of off, text, json", a.value);
                return EXIT_USAGE;
            }
        } else if (arg[0] == '-' && arg[1] != '\0') {
            cli_error("unknown option '%s' (see sipp --help)", arg);
            return EXIT_USAGE;
        } else {
            if (n_pos == 2) {
                cli_error("unexpected argument '%s': give MODEL and one PROMPT (quote a prompt with spaces)",
                          arg);
                return EXIT_USAGE;
            }
            positional[n_pos++] = arg;
            a.i++;
        }
    }
    if (a.bad) return EXIT_USAGE;
    char err[SIPP_ERROR_SIZE];
    if (sipp_backend_check_name(o->backend, err) != SIPP_OK) {
        cli_error("--backend: %s", err);
        return EXIT_USAGE;
    }
    if (!cli_cache_types_fit(o->backend, o->flash_attn, o->cache_type_k, o->cache_type_v)) return EXIT_USAGE;
    o->model = positional[0];
    o->prompt = positional[1];
    if (o->tools && !o->chat) {
        cli_error("--tools needs --chat: tools are offered to a chat");
        return EXIT_USAGE;
    }
    if (o->grammar && o->json_schema) {
        cli_error("give either --grammar or --json-schema, not both");
        return EXIT_USAGE;
    }
    if (!o->model) {
        cli_error("no MODEL given (see sipp --help)");
        return EXIT_USAGE;
    }
    return EXIT_OK;
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
    if (o->stats == STATS_TEXT) {
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
    if (j) json_object_set_new(j, "placement", cli_placement_json(place, n_place));
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text) fprintf(stderr, "%s\n", text);
    free(text);
    json_decref(j);
}

/* The chat as the JSON libsipp takes: the messages, and the tools and schema of the flags. */
static char *chat_json(const run_opts *o, const sipp_message *msgs, size_t n) {
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "messages", arr);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content));
    if (o->tools) json_object_set(root, "tools", o->tools);
    if (o->json_schema) json_object_set(root, "json_schema", o->json_schema);
    if (o->grammar) json_object_set_new(root, "grammar", json_string(o->grammar));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

/* Prints the parsed deltas of a chat's answer as --reasoning says. */
static void print_deltas(const run_opts *o, const char *deltas, bool *in_reasoning) {
    json_t *arr = deltas ? json_loads(deltas, 0, NULL) : NULL;
    bool dim = cli_interactive_output();
    size_t i;
    json_t *d;
    json_array_foreach(arr, i, d) {
        const char *r = json_string_value(json_object_get(d, "reasoning_content"));
        const char *c = json_string_value(json_object_get(d, "content"));
        if (r && o->reasoning != REASONING_HIDE) {
            if (dim && o->reasoning == REASONING_SHOW && !*in_reasoning) fputs(DIM_ON, stdout);
            *in_reasoning = true;
            fputs(r, stdout);
        }
        if (c && o->reasoning != REASONING_ONLY) {
            if (*in_reasoning && dim && o->reasoning == REASONING_SHOW) fputs(DIM_OFF, stdout);
            if (*in_reasoning) fputs("\n", stdout);
            *in_reasoning = false;
            fputs(c, stdout);
        }
    }
    fflush(stdout);
    json_decref(arr);
}

/* Streams a chat's answer through its parser on this thread; --tools prints the calls at the end. */
static void stream_chat(const run_opts *o, sipp_request *r) {
    sipp_chat_parser *ps = NULL;
    char err[SIPP_ERROR_SIZE], buf[READ_CHUNK];
    if (sipp_chat_parser_new(r, &ps, err) != SIPP_OK) {
        cli_error("%s", err);
        return;
    }
    bool finished = false, in_reasoning = false;
    int seen = atomic_load(&interrupts);
    while (!finished) {
        size_t n = sipp_request_read(r, buf, sizeof buf, WAIT_SLICE_MS, &finished);
        if (atomic_load(&interrupts) != seen) sipp_request_cancel(r);
        char *deltas = NULL;
        if (n || finished) {
            if (sipp_chat_parser_feed(ps, buf, n, finished, &deltas) != SIPP_OK) {
                fprintf(stderr,
                        "sipp: warning: the answer does not follow the template's format (%s); printed as "
                        "it came\n",
                        sipp_chat_parser_error(ps));
                fwrite(sipp_request_text(r), 1, strlen(sipp_request_text(r)), stdout);
                break;
            }
            print_deltas(o, deltas, &in_reasoning);
            sipp_free(deltas);
        }
    }
    if (in_reasoning && cli_interactive_output() && o->reasoning == REASONING_SHOW) fputs(DIM_OFF, stdout);
    if (o->tools) {
        json_t *msg = json_loads(sipp_chat_parser_message(ps), 0, NULL);
        json_t *calls = json_object_get(msg, "tool_calls");
        char *text = json_dumps(calls ? calls : json_array(), JSON_COMPACT);
        printf("\n%s\n", text ? text : "[]");
        free(text);
        json_decref(msg);
    }
    fflush(stdout);
    sipp_chat_parser_free(ps);
}

/* Submits one request and streams it. Ctrl-C cancels it. Returns the request (finished) or NULL. */
static sipp_request *generate(sipp_engine *e, const run_opts *o, const char *prompt, const sipp_message *msgs,
                              size_t n_msgs, const char *context_key) {
    sipp_request_params p = sipp_request_default_params();
    char *chat = msgs ? chat_json(o, msgs, n_msgs) : NULL;
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
    if (o->stats != STATS_OFF) print_stats(o, m, r);
    return rc;
}

/* The interactive chat: one conversation pinned to one slot, so each turn evaluates only its new
 * tokens. /clear starts over, /exit (or end of input) leaves. */
static int chat_loop(sipp_engine *e, sipp_model *m, const run_opts *o) {
    size_t cap = 16, n = 0;
    sipp_message *msgs = malloc(cap * sizeof *msgs);
    char **owned = malloc(cap * sizeof *owned);
    if (!msgs || !owned) return EXIT_RUNTIME;
    if (o->system) msgs[n] = (sipp_message){"system", o->system}, owned[n++] = NULL;
    size_t base = n;
    char *line = malloc(LINE_MAX_BYTES);
    int rc = EXIT_OK;
    fprintf(stderr, "sipp chat: type a message; /clear starts over, /exit leaves.\n");
    for (;;) {
        fprintf(stderr, "> ");
        fflush(stderr);
        atomic_store(&interrupts, 0);
        if (!fgets(line, LINE_MAX_BYTES, stdin)) break;
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, "/exit") == 0) break;
        if (strcmp(line, "/clear") == 0) {
            for (size_t i = base; i < n; i++)
                free(owned[i]);
            n = base;
            continue;
        }
        if (!*line) continue;
        if (n + 2 > cap) {
            cap *= 2;
            sipp_message *nm = realloc(msgs, cap * sizeof *msgs);
            char **no = realloc(owned, cap * sizeof *owned);
            if (!nm || !no) break;
            msgs = nm;
            owned = no;
        }
        owned[n] = strdup(line);
        msgs[n] = (sipp_message){"user", owned[n]};
        n++;
        sipp_request *r = generate(e, o, NULL, msgs, n, "cli-chat");
        if (!r) {
            free(owned[--n]);
            rc = EXIT_RUNTIME;
            break;
        }
        owned[n] = strdup(sipp_request_text(r));
        msgs[n] = (sipp_message){"assistant", owned[n]};
        n++;
        finish_one(o, m, r);
        sipp_request_free(r);
    }
    for (size_t i = base; i < n; i++)
        free(owned[i]);
    free(msgs);
    free(owned);
    free(line);
    return rc;
}

int cmd_run(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != EXIT_OK) return rc;

    bool interactive = false;
    char *stdin_prompt = NULL;
    if (!o.prompt || strcmp(o.prompt, "-") == 0) {
        if (isatty(STDIN_FILENO)) {
            if (!o.chat || o.prompt) {
                cli_error("no PROMPT given: sipp MODEL PROMPT, or sipp MODEL --chat for an interactive chat");
                return EXIT_USAGE;
            }
            interactive = true;
        } else {
            stdin_prompt = cli_read_all(stdin);
            o.prompt = stdin_prompt ? stdin_prompt : "";
        }
    }
    if (!interactive && !*o.prompt) {
        cli_error("the prompt is empty; give the text to complete");
        free(stdin_prompt);
        return EXIT_USAGE;
    }

    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    if (!cli_runtime_init_for(o.artifact, o.backend)) {
        free(stdin_prompt);
        return EXIT_RUNTIME;
    }
    char draft_buf[PATH_MAX];
    if (!cli_draft_model(o.model, o.draft, &o.draft, draft_buf, sizeof draft_buf)) {
        free(stdin_prompt);
        return EXIT_RUNTIME;
    }
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = o.backend;
    mp.flash_attn = o.flash_attn;
    mp.gpu_layers = o.gpu_layers;
    mp.rpc_servers = o.rpc;
    mp.tensor_split = o.tensor_split;
    if (cli_interactive_output()) {
        const char *base = strrchr(o.model, '/');
        mp.progress = progress_bar;
        mp.progress_user = (void *)(base ? base + 1 : o.model);
    }
    char err[SIPP_ERROR_SIZE];
    sipp_model *m = NULL;
    if (sipp_model_load(o.model, &mp, &m, err) != SIPP_OK) {
        if (mp.progress) fputs("\r\033[K", stderr);
        cli_error("%s", err);
        free(stdin_prompt);
        return EXIT_RUNTIME;
    }
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 1;
    ep.ctx_size = o.ctx_size;
    ep.threads = o.threads;
    ep.speculative = o.speculative;
    bool speculates = o.draft || (o.speculative && strcmp(o.speculative, "none") != 0);
    const sipp_sampling *sm = &o.sampling;
    bool penalty = sm->repeat_last_n != 0 && (sm->repeat_penalty != 1.0f || sm->frequency_penalty != 0.0f ||
                                              sm->presence_penalty != 0.0f);
    if (speculates && penalty)
        fprintf(stderr, "sipp: note: speculative decoding is off for a request with --repeat-penalty (its "
                        "distribution depends on the proposals); this one decodes without it\n");
    ep.draft_model = o.draft;
    ep.draft_max = o.draft_max;
    ep.draft_min = o.draft_min;
    ep.draft_p_min = o.draft_p_min;
    ep.draft_cutoff = o.draft_cutoff;
    ep.cache_type_k = o.cache_type_k;
    ep.cache_type_v = o.cache_type_v;
    sipp_engine *e = NULL;
    if (sipp_engine_new(m, &ep, &e, err) != SIPP_OK) {
        cli_error("%s", err);
        sipp_model_free(m);
        free(stdin_prompt);
        return EXIT_RUNTIME;
    }

    if (interactive) {
        rc = chat_loop(e, m, &o);
    } else {
        sipp_message msgs[2];
        size_t n = 0;
        if (o.chat && o.system) msgs[n++] = (sipp_message){"system", o.system};
        if (o.chat) msgs[n++] = (sipp_message){"user", o.prompt};
        sipp_request *r = generate(e, &o, o.chat ? NULL : o.prompt, o.chat ? msgs : NULL, n, NULL);
        rc = finish_one(&o, m, r);
        sipp_request_free(r);
    }
    sipp_engine_free(e);
    sipp_model_free(m);
    free(stdin_prompt);
    json_decref(o.tools);
    json_decref(o.json_schema);
    free(o.grammar);
    return rc;
}
