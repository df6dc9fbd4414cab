/*
 * cli.h: what the CLI's files share. The CLI is a thin client of sipp.h; each subcommand lives in a
 * file of its own name (run.c is `sipp MODEL PROMPT`, version.c is `sipp version`, ...).
 */
#ifndef SIPP_CLI_H
#define SIPP_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sipp.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Prints "sipp: MESSAGE" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Argument cursor: flags as "--name value" or "--name=value". */
typedef struct cli_args {
    int argc;
    char **argv;
    int i;             /* next argument */
    const char *value; /* value of the last flag matched with cli_flag_value */
    bool bad;          /* a parse error was reported */
} cli_args;

/* True when any argument is --help or -h: the command then prints its usage and nothing else. */
bool cli_wants_help(int argc, char **argv);
/* True when argv[i] is the flag `name` (consumes it). */
bool cli_flag(cli_args *a, const char *name);
/* True when argv[i] is `name` with a value (consumes both); reports a missing value. */
bool cli_flag_value(cli_args *a, const char *name);
/* Parse a->value as a number within [lo, hi]; reports the flag and the problem on failure. */
bool cli_int(cli_args *a, const char *flag, long lo, long hi, int *out);
bool cli_uint32(cli_args *a, const char *flag, uint32_t *out);
bool cli_float(cli_args *a, const char *flag, double lo, double hi, float *out);
/* The same within [lo, hi): hi itself is refused. */
bool cli_float_below(cli_args *a, const char *flag, double lo, double hi, float *out);
/* --flash-attn's value: auto, on or off (sipp_flash_attn_check); reports anything else. */
bool cli_flash_attn(cli_args *a, const char **out);
/* --cache-type-k's or --cache-type-v's value: f16, q8_0 or q4_0; reports anything else. */
bool cli_cache_type(cli_args *a, const char *flag, const char **out);
/* Whether KV cache types can run beside a load's backend and flash attention (sipp_kv_cache_check);
 * reports why not. */
bool cli_cache_types_fit(const char *backend, const char *flash_attn, const char *type_k, const char *type_v);
/* The draft model of a run of `model` (a path or a store name): --draft auto becomes the draft
 * published beside it (sipp_store_find_draft; false after an error when there is none), a path stays
 * as given. Without --draft, a draft beside the model is suggested in a note on stderr and not used.
 * *out is the path to load (in buf) or NULL. */
bool cli_draft_model(const char *model, const char *flag, const char **out, char *buf, size_t cap);
/* Adds draft_tokens, accepted_tokens and acceptance_rate (null when nothing was proposed) to a stats
 * object. */
struct json_t;
void cli_stats_speculation(struct json_t *stats, const sipp_request_stats *s);

/* True when stdout and stderr are both terminals: only then is there a progress bar. */
bool cli_interactive_output(void);

/* Initialises the runtime with --artifact (may be NULL); prints the error. */
bool cli_runtime_init(const char *artifact);

/* The most placement entries (sipp_model_placement) a command shows. */
#define MAX_PLACEMENT 20
/* One line per device: "  RPC0 on 10.0.0.2:50052: layers 6-11 (6) + output, 12.5 MiB of weights". */
void cli_print_placement(FILE *out, const sipp_placement *p);
/* The same as a JSON array of objects (device, host, first_layer, n_layers, output, buffer_bytes). */
struct json_t *cli_placement_json(const sipp_placement *p, int n);

int cmd_run(int argc, char **argv);
int cmd_rpc_server(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_health(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_backends(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_transcribe(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_backend_ops(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_speak(int argc, char **argv);
/* `sipp run llama TOOL ...` (run_llama.c); argv starts after "run". */
int cmd_run_tool(int argc, char **argv);
int cmd_artifact(int argc, char **argv);

/* All of f, NUL-terminated (malloc'ed); NULL when out of memory. */
char *cli_read_all(FILE *f);

/* An image (audio false) or audio file as a chat content part (media.c): an image_url part with a
 * data: URL, or an input_audio part. NULL after saying what is wrong with the file. */
struct json_t *cli_media_part(const char *path, bool audio);

#endif
