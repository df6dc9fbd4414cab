/*
 * main.c: the `sipp` command. The first argument picks a subcommand; anything else is a model path,
 * so `sipp model.gguf "prompt"` runs the model.
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
    {"doctor", cmd_doctor, "report the host, the artifact, devices, drivers and the auto decision"},
    {"backends", cmd_backends, "list every backend: compiled, available, devices"},
    {"build", cmd_build, "make an artifact with the chosen backend modules"},
    {"bench", cmd_bench, "measure prefill and decode speed"},
    {"verify", cmd_verify, "check that backends agree on a model's outputs"},
    {"ops", cmd_ops, "list the ops of a model's graph and where each runs"},
    {"backend-ops", cmd_backend_ops, "run llama.cpp's test-backend-ops against an artifact"},
    {"models", cmd_models, "list, inspect and remove models in the local store"},
    {"pull", cmd_pull, "download a model into the local store"},
    {"rpc-server", cmd_rpc_server, "serve this host's device to other hosts (ggml's RPC backend)"},
    {"version", cmd_version, "print sipp's version and the pinned llama.cpp release and commit"},
};

static void print_help(void) {
    printf("sipp %s: run GGUF models locally on the backend you choose\n\n"
           "usage: sipp MODEL PROMPT [options]   run a model (sipp MODEL --help for the options)\n"
           "       sipp MODEL --chat             interactive chat\n"
           "       sipp COMMAND [--help]\n\ncommands:\n",
           sipp_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        printf("  %-12s %s\n", commands[i].name, commands[i].summary);
    printf("\nenvironment: SIPP_ARTIFACT (llama.cpp libraries to use), SIPP_BACKEND_ORDER (auto's order),\n"
           "SIPP_LOG=quiet|error|warn|info|debug (llama.cpp's logging), SIPP_MODELS_DIR (the model store),\n"
           "SIPP_CACHE_DIR (downloads and builds), SIPP_LEASE_DIR, SIPP_GPU_MARGIN_MB, SIPP_GPU_LEASE=off,\n"
           "SIPP_RPC_SERVERS (the servers of --backend rpc)\n");
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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(first, commands[i].name) == 0) return commands[i].fn(argc - 2, argv + 2);
    return cmd_run(argc - 1, argv + 1);
}
