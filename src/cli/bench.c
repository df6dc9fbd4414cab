/*
 * bench.c: `sipp bench`: measure prefill and decode speed.
 */
#include "cli/cli.h"

int cmd_bench(int argc, char **argv) {
    cli_error("'bench' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
