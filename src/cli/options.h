/*
 * options.h: one table of options per command, which both parses the command's arguments and prints
 * its --help (curl's option table is the model), so a flag and its help line cannot drift apart.
 *
 * A command keeps its option values in a struct of its own whose first member is a cli_common. The
 * options several commands share (--artifact, --backend, --threads, --ctx-size, --gpu-layers,
 * --flash-attn, --cache-type-k, --cache-type-v, --spec, --draft, --json, --rpc, --target) are
 * declared once in options.c and write into that cli_common, so they parse, check and read the same
 * everywhere; a command that words one of them for itself lists an entry `.like` it with its own help
 * line. A command's own options are cli_option values beside its code that name a field of its struct
 * by offset. The table is a NULL-terminated array of pointers to all of them.
 *
 * Adding an option to a command is one table entry: a field of its struct and a cli_option naming it.
 * A flag that may be given several times (`--stop TEXT`, one per string) is a CLI_OPT_CUSTOM whose
 * parser appends a->value to a list in the struct, and reports the flag when the list is full.
 */
#ifndef SIPP_CLI_OPTIONS_H
#define SIPP_CLI_OPTIONS_H

#include <stddef.h>

#include "cli/cli.h"

#define CLI_LORA_MAX 16

/* The values of the shared options; the first member of every command's options struct. */
typedef struct cli_common {
    const char *artifact;                    /* --artifact DIR */
    const char *backend;                     /* --backend NAME */
    const char *rpc;                         /* --rpc HOST:PORT[,...], also put in SIPP_RPC_SERVERS */
    const char *flash_attn;                  /* --flash-attn auto|on|off */
    const char *target;                      /* --target cli|node|python|web */
    const char *cache_type_k, *cache_type_v; /* --cache-type-k TYPE, --cache-type-v TYPE */
    const char *speculative;                 /* --spec none|ngram|draft */
    const char *draft;                       /* --draft MODEL|auto */
    int threads;                             /* --threads N; 0 when not given */
    int ctx_size;                            /* --ctx-size N; 0 when not given */
    int gpu_layers;                          /* --gpu-layers N; the command sets its default */
    bool json;                               /* --json */
    sipp_lora_adapter lora[CLI_LORA_MAX];    /* --lora FILE[:SCALE], repeatable */
    int n_lora;
} cli_common;

typedef enum {
    CLI_OPT_FLAG,   /* sets a bool */
    CLI_OPT_STRING, /* keeps the value as given (const char *) */
    CLI_OPT_INT,    /* a whole number in [lo, hi] (int) */
    CLI_OPT_FLOAT,  /* a number in [lo, hi] (float) */
    CLI_OPT_CHOICE, /* one of the '|'-separated words of `arg` (const char *): "off|text|json" */
    CLI_OPT_ENV,    /* a string that is also put in the environment variable `env` */
    CLI_OPT_CUSTOM, /* given to `parse` (a repeated flag, a list, a file to read) */
} cli_opt_kind;

typedef struct cli_option {
    const char *name; /* "--threads" */
    const char *arg;  /* the value's name in --help ("N"); NULL for a flag */
    cli_opt_kind kind;
    size_t offset;   /* of the value's field in the command's options struct */
    double lo, hi;   /* CLI_OPT_INT's and CLI_OPT_FLOAT's range */
    const char *env; /* CLI_OPT_ENV's variable */
    unsigned bit;    /* a constant of CLI_OPT_CUSTOM's parser (verify: the threshold's bit) */
    /* its line in --help; a '\n' starts an indented continuation line. NULL: an internal option,
     * accepted and not shown */
    const char *help;
    /* CLI_OPT_CUSTOM's parser: a->value is the value, opt the option (its name, offset and bit), opts
     * the command's struct; false after it reported a bad value. */
    bool (*parse)(cli_args *a, const struct cli_option *opt, void *opts);
    /* the option this one is, with the help above instead of its own: {.like = &cli_opt_threads,
     * .help = "MODEL's CPU threads"}; with a name, another spelling of it (bench's -ctk) */
    const struct cli_option *like;
} cli_option;

/* The shared options. */
extern const cli_option cli_opt_artifact, cli_opt_backend, cli_opt_rpc, cli_opt_threads, cli_opt_json,
    cli_opt_ctx_size, cli_opt_gpu_layers, cli_opt_flash_attn, cli_opt_cache_type_k, cli_opt_cache_type_v,
    cli_opt_spec, cli_opt_draft, cli_opt_target, cli_opt_lora;

/* A command's option table: how --help shows it, and what it accepts. */
typedef struct cli_command {
    const char *name;                 /* "ops": errors start with it, and name `sipp ops --help`; "" for
                                         `sipp MODEL` */
    const char *synopsis;             /* --help's first line after "usage: sipp " */
    const char *about;                /* --help's text after the synopsis; ends with a newline */
    const cli_option *const *options; /* NULL-terminated */
    int max_args;                     /* the positional arguments it takes, at most */
    const char *args_hint;            /* why one more is refused: "one MODEL only" */
    void (*print_about)(FILE *out);   /* prints the text instead of about, when it has run-time parts */
    /* a wrapper of another tool's command line: the arguments the table does not name, options
     * included, go to args in order (max_args of them), and --help is sipp's only when it is the
     * only argument */
    bool pass_unknown;
} cli_command;

/* What cli_parse returns when the command goes on. */
#define CLI_PARSED (-1)

/* Parses argv (the arguments after the command's name) by cmd's table into opts (the command's
 * struct, cli_common first, its defaults set by the caller); positional arguments go to args,
 * *n_args of them. Returns CLI_PARSED; EXIT_OK after printing --help (when any argument is --help or
 * -h); EXIT_USAGE after reporting a bad argument. */
int cli_parse(const cli_command *cmd, int argc, char **argv, void *opts, const char **args, int *n_args);

/* Prints cmd's --help: the synopsis, the text, and one line per option from the table. */
void cli_print_help(const cli_command *cmd, FILE *out);

#endif
