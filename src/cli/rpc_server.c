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
#include "cli/options.h"

typedef struct {
    cli_common c; /* --backend, --threads, --artifact */
    const char *host, *cache_dir;
    int port;
} rpc_server_options;

static bool refuse_mem(cli_args *a, const cli_option *opt, void *opts) {
    (void)opts;
    (void)a;
    cli_error("rpc-server: --mem is not supported: llama.cpp %s's RPC server reports the device's real free "
              "memory; weigh the split on the client with --tensor-split (local first, then each server)",
              sipp_llama_release());
    return false;
}

static const cli_option opt_host = {.name = "--host",
                                    .arg = "ADDR",
                                    .kind = CLI_OPT_STRING,
                                    .offset = offsetof(rpc_server_options, host),
                                    .help = "address to listen on (default 127.0.0.1: this host only)"};
static const cli_option opt_port = {.name = "--port",
                                    .arg = "N",
                                    .kind = CLI_OPT_INT,
                                    .offset = offsetof(rpc_server_options, port),
                                    .lo = 1,
                                    .hi = 65535,
                                    .help = "port to listen on"};
static const cli_option opt_cache = {
    .name = "--cache",
    .arg = "DIR",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(rpc_server_options, cache_dir),
    .help = "keep tensors clients send in DIR, so a reload sends only their hashes"};
static const cli_option opt_mem = {.name = "--mem",
                                   .arg = "MB",
                                   .kind = CLI_OPT_CUSTOM,
                                   .parse = refuse_mem,
                                   .help =
                                       "not supported: weigh the split on the client with --tensor-split"};

static const cli_option *const options[] = {&opt_host,  &opt_port, &cli_opt_backend,  &cli_opt_threads,
                                            &opt_cache, &opt_mem,  &cli_opt_artifact, NULL};

static void print_about(FILE *out) {
    fprintf(out,
            "Serves this host's device (--backend, default cpu; --port, default %d) to\n"
            "`sipp MODEL ... --backend rpc --rpc HOST:PORT` on other hosts\n"
            "(ggml's RPC protocol of llama.cpp %s; both ends must run the same release).\n"
            "One client at a time; it prints each connection on stdout.\n"
            "\n"
            "RPC has no authentication and no encryption. Expose it only on a private network, through an\n"
            "SSH tunnel (ssh -L) or a WireGuard interface.\n",
            SIPP_RPC_DEFAULT_PORT, sipp_llama_release());
}

static const cli_command command = {.name = "rpc-server",
                                    .synopsis = "rpc-server [OPTIONS]",
                                    .options = options,
                                    .max_args = 0,
                                    .args_hint = "rpc-server takes options only",
                                    .print_about = print_about};

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
    rpc_server_options o = {
        .c = {.backend = p.backend, .threads = p.threads}, .host = p.host, .port = p.port};
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, NULL, &n_args);
    if (rc != CLI_PARSED) return rc;
    p.host = o.host;
    p.port = o.port;
    p.backend = o.c.backend;
    p.threads = o.c.threads;
    p.cache_dir = o.cache_dir;
    const char *artifact = o.c.artifact;
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
