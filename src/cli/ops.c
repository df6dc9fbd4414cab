/*
 * ops.c: `sipp ops`: list the ops of a model's graph and where each runs.
 */
#include "cli/cli.h"

int cmd_ops(int argc, char **argv) {
    cli_error("'ops' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
