/*
 * options.c: the option tables' parser and help printer, and the options commands share.
 */
#include "cli/options.h"

#include <stdlib.h>
#include <string.h>

#define HELP_INDENT 2
#define HELP_GAP 2
#define HELP_NAME_MAX 40 /* a longer "--name ARG" gets its help on the next line */
#define THREADS_MAX 1024
#define CTX_SIZE_MAX (1 << 24)

const cli_option cli_opt_artifact = {.name = "--artifact",
                                     .arg = "DIR",
                                     .kind = CLI_OPT_STRING,
                                     .offset = offsetof(cli_common, artifact),
                                     .help = "use the llama.cpp libraries in DIR (also SIPP_ARTIFACT)"};
const cli_option cli_opt_backend = {.name = "--backend",
                                    .arg = "NAME",
                                    .kind = CLI_OPT_STRING,
                                    .offset = offsetof(cli_common, backend),
                                    .help = "the backend: auto, cpu, cuda, metal, vulkan, webgpu or rpc"};
const cli_option cli_opt_rpc = {.name = "--rpc",
                                .arg = "HOST:PORT[,...]",
                                .kind = CLI_OPT_ENV,
                                .offset = offsetof(cli_common, rpc),
                                .env = "SIPP_RPC_SERVERS",
                                .help = "the servers of backend rpc (as SIPP_RPC_SERVERS)"};
const cli_option cli_opt_threads = {.name = "--threads",
                                    .arg = "N",
                                    .kind = CLI_OPT_INT,
                                    .offset = offsetof(cli_common, threads),
                                    .lo = 1,
                                    .hi = THREADS_MAX,
                                    .help = "CPU threads (default: all cores)"};
const cli_option cli_opt_ctx_size = {.name = "--ctx-size",
                                     .arg = "N",
                                     .kind = CLI_OPT_INT,
                                     .offset = offsetof(cli_common, ctx_size),
                                     .lo = 0,
                                     .hi = CTX_SIZE_MAX,
                                     .help = "the context size in tokens (0: the default)"};

static bool parse_flash_attn(cli_args *a, void *opts) {
    return cli_flash_attn(a, &((cli_common *)opts)->flash_attn);
}

const cli_option cli_opt_flash_attn = {.name = "--flash-attn",
                                       .arg = "auto|on|off",
                                       .kind = CLI_OPT_CUSTOM,
                                       .parse = parse_flash_attn,
                                       .help = "flash attention: auto (the default), on or off"};
const cli_option cli_opt_target = {.name = "--target",
                                   .arg = "cli|node|python|web",
                                   .kind = CLI_OPT_STRING,
                                   .offset = offsetof(cli_common, target),
                                   .help = "answer for what that package loads in this process"};
const cli_option cli_opt_json = {.name = "--json",
                                 .kind = CLI_OPT_FLAG,
                                 .offset = offsetof(cli_common, json),
                                 .help = "print one JSON object on stdout"};

/* The option of cmd that argv[a->i] names, taking its value; NULL when none does. */
static const cli_option *match(const cli_command *cmd, cli_args *a) {
    for (const cli_option *const *o = cmd->options; *o; o++) {
        if ((*o)->kind == CLI_OPT_FLAG ? cli_flag(a, (*o)->name) : cli_flag_value(a, (*o)->name)) return *o;
    }
    return NULL;
}

/* Stores the matched option's value (a->value) in its field; false after reporting a bad one. */
static bool store(const cli_option *o, cli_args *a, void *opts) {
    char *field = (char *)opts + o->offset;
    switch (o->kind) {
    case CLI_OPT_FLAG: *(bool *)field = true; return true;
    case CLI_OPT_INT: return cli_int(a, o->name, o->lo, o->hi, (int *)field);
    case CLI_OPT_ENV:
        if (a->value) setenv(o->env, a->value, 1);
        *(const char **)field = a->value;
        return a->value != NULL;
    case CLI_OPT_STRING: *(const char **)field = a->value; return a->value != NULL;
    case CLI_OPT_CUSTOM: return a->value && o->parse(a, opts);
    }
    return false;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *opts, const char **args, int *n_args) {
    cli_args a = {.argc = argc, .argv = argv};
    *n_args = 0;
    while (a.i < argc) {
        const char *arg = argv[a.i];
        if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            cli_print_help(cmd, stdout);
            return EXIT_OK;
        }
        const cli_option *o = match(cmd, &a);
        if (o) {
            if (!store(o, &a, opts)) return EXIT_USAGE;
        } else if (arg[0] == '-' && arg[1]) {
            cli_error("%s: unknown option '%s' (see sipp %s --help)", cmd->name, arg, cmd->name);
            return EXIT_USAGE;
        } else if (*n_args < cmd->max_args) {
            args[(*n_args)++] = arg;
            a.i++;
        } else {
            cli_error("%s: unexpected argument '%s' (%s)", cmd->name, arg, cmd->args_hint);
            return EXIT_USAGE;
        }
    }
    return CLI_PARSED;
}

void cli_print_help(const cli_command *cmd, FILE *out) {
    fprintf(out, "usage: sipp %s\n\n", cmd->synopsis);
    if (cmd->print_about)
        cmd->print_about(out);
    else
        fputs(cmd->about, out);
    int width = 0;
    for (const cli_option *const *o = cmd->options; *o; o++) {
        int w = (int)strlen((*o)->name) + ((*o)->arg ? 1 + (int)strlen((*o)->arg) : 0);
        if (w > width && w <= HELP_NAME_MAX) width = w;
    }
    fputs("\noptions:\n", out);
    for (const cli_option *const *o = cmd->options; *o; o++) {
        char head[HELP_NAME_MAX * 2];
        snprintf(head, sizeof head, "%s%s%s", (*o)->name, (*o)->arg ? " " : "", (*o)->arg ? (*o)->arg : "");
        if ((int)strlen(head) > width)
            fprintf(out, "%*s%s\n%*s%s\n", HELP_INDENT, "", head, HELP_INDENT + width + HELP_GAP, "",
                    (*o)->help);
        else
            fprintf(out, "%*s%-*s%*s%s\n", HELP_INDENT, "", width, head, HELP_GAP, "", (*o)->help);
    }
}
