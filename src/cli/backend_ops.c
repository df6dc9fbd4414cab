/*
 * backend_ops.c: `sipp backend-ops`: run llama.cpp's test-backend-ops against an artifact.
 */
#include "cli/cli.h"

int cmd_backend_ops(int argc, char **argv) {
    cli_error("'backend-ops' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
