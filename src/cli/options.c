/*
 * options.c: the option tables' parser and help printer, and the options commands share.
 */
#include "cli/options.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HELP_INDENT 2
#define HELP_GAP 2
#define HELP_NAME_MAX 40 /* a longer "--name ARG" gets its help on the next line */
#define THREADS_MAX 1024
#define CTX_SIZE_MAX (1 << 24)
#define GPU_LAYERS_MAX 100000
#define CHOICES_MAX 128 /* "none, ngram, draft" */

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

const cli_option cli_opt_gpu_layers = {.name = "--gpu-layers",
                                       .arg = "N",
                                       .kind = CLI_OPT_INT,
                                       .offset = offsetof(cli_common, gpu_layers),
                                       .lo = -1,
                                       .hi = GPU_LAYERS_MAX,
                                       .help = "layers to put on the GPU backend (default: all)"};

/* --lora FILE[:SCALE]: a file, and a scale when what follows the last ':' is a number. */
static bool parse_lora(cli_args *a, const cli_option *opt, void *opts) {
    cli_common *c = opts;
    if (c->n_lora == CLI_LORA_MAX) {
        cli_error("%s: at most %d adapters", opt->name, CLI_LORA_MAX);
        return false;
    }
    char *colon = strrchr(a->value, ':'), *end = NULL;
    float scale = colon ? strtof(colon + 1, &end) : 1.0f;
    bool scaled = colon && end != colon + 1 && *end == '\0';
    if (!scaled) scale = 1.0f;
    char *path = scaled ? strndup(a->value, (size_t)(colon - a->value)) : strdup(a->value);
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        cli_error("%s: '%s' is not a file (give FILE or FILE:SCALE)", opt->name, path ? path : a->value);
        free(path);
        return false;
    }
    c->lora[c->n_lora++] = (sipp_lora_adapter){path, scale}; /* kept for the process's life */
    return true;
}
const cli_option cli_opt_lora = {.name = "--lora",
                                 .arg = "FILE[:SCALE]",
                                 .kind = CLI_OPT_CUSTOM,
                                 .parse = parse_lora,
                                 .help = "a LoRA adapter (GGUF) for MODEL at SCALE (default 1; repeatable)"};

static bool parse_cache_type(cli_args *a, const cli_option *opt, void *opts) {
    return cli_cache_type(a, opt->name, (const char **)((char *)opts + opt->offset));
}

/* The names libsipp takes (sipp_kv_cache_check has the last word). */
#define CACHE_TYPES "f16|q8_0|q4_0"
const cli_option cli_opt_cache_type_k = {.name = "--cache-type-k",
                                         .arg = CACHE_TYPES,
                                         .kind = CLI_OPT_CUSTOM,
                                         .offset = offsetof(cli_common, cache_type_k),
                                         .parse = parse_cache_type,
                                         .help = "the KV cache's type for keys (default f16)"};
const cli_option cli_opt_cache_type_v = {
    .name = "--cache-type-v",
    .arg = CACHE_TYPES,
    .kind = CLI_OPT_CUSTOM,
    .offset = offsetof(cli_common, cache_type_v),
    .parse = parse_cache_type,
    .help = "the KV cache's type for values (default f16; a quantized one needs\n"
            "flash attention)"};
const cli_option cli_opt_spec = {.name = "--spec",
                                 .arg = "none|ngram|draft",
                                 .kind = CLI_OPT_CHOICE,
                                 .offset = offsetof(cli_common, speculative),
                                 .help = "speculative decoding (default none; draft with --draft)"};
const cli_option cli_opt_draft = {
    .name = "--draft",
    .arg = "MODEL|auto",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(cli_common, draft),
    .help = "the draft model (a path or a store name); auto: the one published beside MODEL"};

static bool parse_flash_attn(cli_args *a, const cli_option *opt, void *opts) {
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

/* Whether value is one of the '|'-separated words of o->arg; else reports it, the words listed. */
static bool choose(const cli_option *o, const char *value) {
    for (const char *w = o->arg;; w++) {
        size_t len = strcspn(w, "|");
        if (len == strlen(value) && strncmp(w, value, len) == 0) return true;
        w += len;
        if (!*w) break;
    }
    char list[CHOICES_MAX];
    size_t k = 0;
    for (const char *c = o->arg; *c && k + 3 < sizeof list; c++) {
        if (*c == '|')
            list[k++] = ',', list[k++] = ' ';
        else
            list[k++] = *c;
    }
    list[k] = '\0';
    cli_error("%s '%s' is not one of %s", o->name, value, list);
    return false;
}

/* The option that parses for o: the shared one it is like, or itself. */
static const cli_option *base(const cli_option *o) { return o->like ? o->like : o; }

/* The name o is given by: its own, or that of the option it is like. */
static const char *spelling(const cli_option *o) { return o->name ? o->name : o->like->name; }

/* The option that parses what argv[a->i] names, its value taken; NULL when no option of cmd does. */
static const cli_option *match(const cli_command *cmd, cli_args *a) {
    for (const cli_option *const *o = cmd->options; *o; o++) {
        const cli_option *b = base(*o);
        if (b->kind == CLI_OPT_FLAG ? cli_flag(a, spelling(*o)) : cli_flag_value(a, spelling(*o))) return b;
    }
    return NULL;
}

/* Stores the matched option's value (a->value) in its field; false after reporting a bad one. */
static bool store(const cli_option *o, cli_args *a, void *opts) {
    char *field = (char *)opts + o->offset;
    switch (o->kind) {
    case CLI_OPT_FLAG: *(bool *)field = true; return true;
    case CLI_OPT_INT: return cli_int(a, o->name, (long)o->lo, (long)o->hi, (int *)field);
    case CLI_OPT_FLOAT: return cli_float(a, o->name, o->lo, o->hi, (float *)field);
    case CLI_OPT_CHOICE:
        if (!a->value || !choose(o, a->value)) return false;
        *(const char **)field = a->value;
        return true;
    case CLI_OPT_ENV:
        if (a->value) setenv(o->env, a->value, 1);
        *(const char **)field = a->value;
        return a->value != NULL;
    case CLI_OPT_STRING: *(const char **)field = a->value; return a->value != NULL;
    case CLI_OPT_CUSTOM: return a->value && o->parse(a, o, opts);
    }
    return false;
}

/* Whether the command prints its --help: any argument --help or -h, or for a wrapper only the one. */
static bool wants_help(const cli_command *cmd, int argc, char **argv) {
    if (!cmd->pass_unknown) return cli_wants_help(argc, argv);
    return argc == 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0);
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *opts, const char **args, int *n_args) {
    cli_args a = {.argc = argc, .argv = argv};
    const char *sep = *cmd->name ? ": " : "", *space = *cmd->name ? " " : "";
    *n_args = 0;
    if (wants_help(cmd, argc, argv)) {
        cli_print_help(cmd, stdout);
        return EXIT_OK;
    }
    while (a.i < argc) {
        const char *arg = argv[a.i];
        const cli_option *o = match(cmd, &a);
        if (o) {
            if (!store(o, &a, opts)) return EXIT_USAGE;
        } else if (arg[0] == '-' && arg[1] && !cmd->pass_unknown) {
            cli_error("%s%sunknown option '%s' (see sipp %s%s--help)", cmd->name, sep, arg, cmd->name, space);
            return EXIT_USAGE;
        } else if (*n_args < cmd->max_args) {
            args[(*n_args)++] = arg;
            a.i++;
        } else {
            cli_error("%s%sunexpected argument '%s' (%s)", cmd->name, sep, arg, cmd->args_hint);
            return EXIT_USAGE;
        }
    }
    return CLI_PARSED;
}

/* One option's line (and its help's continuation lines) in --help, its help at column width. */
static void print_option(const cli_option *o, int width, FILE *out) {
    char head[HELP_NAME_MAX * 2];
    const cli_option *b = base(o);
    snprintf(head, sizeof head, "%s%s%s", spelling(o), b->arg ? " " : "", b->arg ? b->arg : "");
    if ((int)strlen(head) > width)
        fprintf(out, "%*s%s\n%*s", HELP_INDENT, "", head, HELP_INDENT + width + HELP_GAP, "");
    else
        fprintf(out, "%*s%-*s%*s", HELP_INDENT, "", width, head, HELP_GAP, "");
    for (const char *h = o->help; *h; h++) {
        fputc(*h, out);
        if (*h == '\n') fprintf(out, "%*s", HELP_INDENT + width + HELP_GAP, "");
    }
    fputc('\n', out);
}

void cli_print_help(const cli_command *cmd, FILE *out) {
    fprintf(out, "usage: sipp %s\n\n", cmd->synopsis);
    if (cmd->print_about)
        cmd->print_about(out);
    else
        fputs(cmd->about, out);
    int width = 0;
    for (const cli_option *const *o = cmd->options; *o; o++) {
        const cli_option *b = base(*o);
        int w = (int)strlen(spelling(*o)) + (b->arg ? 1 + (int)strlen(b->arg) : 0);
        if ((*o)->help && w > width && w <= HELP_NAME_MAX) width = w;
    }
    fputs("\noptions:\n", out);
    for (const cli_option *const *o = cmd->options; *o; o++)
        if ((*o)->help) print_option(*o, width, out);
}
