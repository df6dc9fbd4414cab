/*
 * rpc_server.c: `sipp rpc-server`: serves this host's device to other hosts over ggml's RPC
 * protocol, so that a client with --backend rpc can place layers here.
 *
 * RPC has no authentication and no encryption: whoever reaches the port can read and write the
 * device's memory. So it binds to loopback unless --host names another address, and then says
 * so and how to protect it. ggml's server loop never returns; SIGTERM and SIGINT end the process
 * with a line saying so (status 0), which is what a supervisor expects of a clean stop.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: sipp rpc-server [--host 127.0.0.1] [--port 50052] [--backend cpu|vulkan|cuda|...]\n"
    "                       [--threads N] [--cache DIR] [--artifact DIR]\n"
    "\n"
    "Serves this host's device to `sipp MODEL ... --backend rpc --rpc HOST:PORT` on other hosts\n"
    "(ggml's RPC protocol of llama.cpp %s; both ends must run the same release).\n"
    "One client at a time; it prints each connection on stdout.\n"
    "\n"
    "  --host ADDR     address to listen on (default 127.0.0.1: this host only)\n"
    "  --port N        (default %d)\n"
    "  --backend NAME  the local device to serve (default cpu)\n"
    "  --threads N     CPU threads for the cpu backend (default: all cores)\n"
    "  --cache DIR     keep tensors clients send in DIR, so a reload sends only their hashes\n"
    "  --mem MB        not supported: llama.cpp %s's server reports the device's real free memory;\n"
    "                  weigh the split on the client with --tensor-split instead\n"
    "\n"
    "RPC has no authentication and no encryption. Expose it only on a private network, through an\n"
    "SSH tunnel (ssh -L) or a WireGuard interface.\n";

static void on_stop(int sig) {
    static const char msg[] = "sipp rpc-server: stopped\n";
    ssize_t ignored = write(STDOUT_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(EXIT_OK);
}

static bool is_loopback(const char *host) {
    return strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0;
}

int cmd_rpc_server(int argc, char **argv) {
    sipp_rpc_server_params p = sipp_rpc_server_default_params();
    const char *artifact = NULL;
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < argc && !a.bad) {
        if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            printf(usage, sipp_llama_release(), SIPP_RPC_DEFAULT_PORT, sipp_llama_release());
            return EXIT_OK;
        } else if (cli_flag_value(&a, "--host"))
            p.host = a.value;
        else if (cli_flag_value(&a, "--port"))
            cli_int(&a, "--port", 1, 65535, &p.port);
        else if (cli_flag_value(&a, "--backend"))
            p.backend = a.value;
        else if (cli_flag_value(&a, "--threads"))
            cli_int(&a, "--threads", 1, 1024, &p.threads);
        else if (cli_flag_value(&a, "--cache"))
            p.cache_dir = a.value;
        else if (cli_flag_value(&a, "--artifact"))
            artifact = a.value;
        else if (cli_flag_value(&a, "--mem")) {
            cli_error(
                "rpc-server: --mem is not supported: llama.cpp %s's RPC server reports the device's real "
                "free "
                "memory; weigh the split on the client with --tensor-split (local first, then each server)",
                sipp_llama_release());
            return EXIT_USAGE;
        } else {
            cli_error("rpc-server: unknown option '%s' (see sipp rpc-server --help)", argv[a.i]);
            return EXIT_USAGE;
        }
    }
    if (a.bad) return EXIT_USAGE;
    if (!is_loopback(p.host))
        fprintf(
            stderr,
            "sipp rpc-server: WARNING: listening on %s: RPC has no authentication and no encryption, so "
            "anyone "
            "who reaches this port can use this device and read what it computes. Keep the port on a private "
            "network, or reach it through an SSH tunnel (ssh -L %d:127.0.0.1:%d) or WireGuard.\n",
            p.host, p.port, p.port);
    if (!cli_runtime_init(artifact)) return EXIT_RUNTIME;
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    char err[SIPP_ERROR_SIZE];
    sipp_status st = sipp_rpc_server_run(&p, err);
    cli_error("%s", err);
    return st == SIPP_ERR_INVALID_ARGUMENT ? EXIT_USAGE : EXIT_RUNTIME;
}
