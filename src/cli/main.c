/*
 * main.c: the `sipp` command. The first argument picks a subcommand; anything else is a model path,
 * so `sipp model.gguf "prompt"` runs the model.
 *
 * The command table below is the one source of what sipp can do: `sipp --help` prints it, and
 * `sipp --man` prints the same table as the man page (make writes build/share/man/man1/sipp.1 from
 * it), so the two cannot drift apart.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"serve", cmd_serve, "run the gateway: OpenAI-compatible and sipp-native HTTP routes"},
    {"doctor", cmd_doctor,
     "report the host, the artifact, devices, drivers and the auto decision; --target PACKAGE"},
    {"backends", cmd_backends,
     "list every backend: compiled, available, devices; --target PACKAGE: what it selects"},
    {"build", cmd_build, "make an artifact for a target (cli, node, python, web) with the chosen backends"},
    {"bench", cmd_bench, "measure prefill and decode speed"},
    {"verify", cmd_verify, "check that backends agree on a model's outputs"},
    {"perplexity", cmd_perplexity, "measure a model's perplexity on a text file, as llama-perplexity does"},
    {"transcribe", cmd_transcribe, "speech to text with a whisper.cpp model, as whisper-cli"},
    {"ops", cmd_ops, "list the ops of a model's graph and where each runs"},
    {"backend-ops", cmd_backend_ops, "run llama.cpp's test-backend-ops against an artifact"},
    {"run", cmd_run_tool, "run llama.cpp's own tools against the artifact: sipp run llama backend-ops|bench"},
    {"artifact", cmd_artifact, "verify or sign an artifact: sipp artifact verify DIR [--key PUB.pem]"},
    {"models", cmd_models, "list, inspect and remove models in the local store"},
    {"pull", cmd_pull, "download a model into the local store"},
    {"speak", cmd_speak, "text to speech with flite or a Qwen3-TTS / Pocket TTS model: WAV, MP3, FLAC, Opus"},
    {"rpc-server", cmd_rpc_server, "serve this host's device to other hosts (ggml's RPC backend)"},
    {"health", cmd_health, "exit 0 when a gateway's /ready answers 200 (a container's health check)"},
    {"version", cmd_version, "print sipp's version and the pinned llama.cpp release and commit"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* The usage lines and the environment, shared by --help and --man. */
static const char *const forms[] = {
    "sipp MODEL PROMPT [options]",
    "sipp MODEL --chat",
    "sipp COMMAND [--help]",
};
static const char *const form_summaries[] = {
    "run a model (sipp MODEL --help for the options)",
    "interactive chat",
    "a command below; each has --help",
};
static const struct {
    const char *name, *summary;
} environment[] = {
    {"SIPP_ARTIFACT", "the artifact (llama.cpp libraries) to use"},
    {"SIPP_BACKEND_ORDER", "auto's order of backends"},
    {"SIPP_LOG", "quiet|error|warn|info|debug: llama.cpp's logging"},
    {"SIPP_MODELS_DIR", "the model store"},
    {"SIPP_CACHE_DIR", "downloads and builds"},
    {"SIPP_LEASE_DIR", "GPU residency lease files"},
    {"SIPP_GPU_MARGIN_MB", "free GPU memory kept beyond a model"},
    {"SIPP_GPU_LEASE", "off: no GPU lease and no memory check"},
    {"SIPP_REQUIRE_SIGNED", "PUB.pem: refuse an artifact that does not verify with that key"},
    {"SIPP_RPC_SERVERS", "HOST:PORT,...: the servers of --backend rpc"},
};
#define N_FORMS (sizeof forms / sizeof forms[0])
#define N_ENV (sizeof environment / sizeof environment[0])

static void print_help(void) {
    printf("sipp %s: run GGUF models locally on the backend you choose\n\n", sipp_version());
    for (size_t i = 0; i < N_FORMS; i++)
        printf("%s %-28s %s\n", i ? "      " : "usage:", forms[i], form_summaries[i]);
    printf("\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        printf("  %-12s %s\n", commands[i].name, commands[i].summary);
    printf("\nenvironment:\n");
    for (size_t i = 0; i < N_ENV; i++)
        printf("  %-20s %s\n", environment[i].name, environment[i].summary);
}

/* roff needs a backslash before a leading dot or quote and before every hyphen-minus in options. */
static void roff(const char *s) {
    if (*s == '.' || *s == '\'') fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '-' || *s == '\\') putchar('\\');
        putchar(*s);
    }
}

static void print_man(void) {
    printf(".TH SIPP 1 \"\" \"sipp %s\" \"User Commands\"\n.SH NAME\nsipp \\- run GGUF models locally on the "
           "backend "
           "you choose\n.SH SYNOPSIS\n",
           sipp_version());
    for (size_t i = 0; i < N_FORMS; i++) {
        printf(".TP\n.B ");
        roff(forms[i]);
        printf("\n");
        roff(form_summaries[i]);
        printf("\n");
    }
    printf(".SH DESCRIPTION\nsipp runs GGUF models through the pinned llama.cpp %s on the backend you "
           "choose, and "
           "serves them over OpenAI\\-compatible and sipp\\-native HTTP routes.\n.SH COMMANDS\n",
           sipp_llama_release());
    for (size_t i = 0; i < N_COMMANDS; i++) {
        printf(".TP\n.B ");
        roff(commands[i].name);
        printf("\n");
        roff(commands[i].summary);
        printf(" (sipp %s \\-\\-help)\n", commands[i].name);
    }
    printf(".SH ENVIRONMENT\n");
    for (size_t i = 0; i < N_ENV; i++) {
        printf(".TP\n.B ");
        roff(environment[i].name);
        printf("\n");
        roff(environment[i].summary);
        printf("\n");
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help();
        return EXIT_USAGE;
    }
    const char *first = argv[1];
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0 || strcmp(first, "help") == 0) {
        print_help();
        return EXIT_OK;
    }
    if (strcmp(first, "--version") == 0) return cmd_version(argc - 1, argv + 1);
    if (strcmp(first, "--man") == 0) {
        print_man();
        return EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(first, commands[i].name) == 0) return commands[i].fn(argc - 2, argv + 2);
    return cmd_run(argc - 1, argv + 1);
}
