/*
 * backends.c: `sipp backends`: list every backend: compiled, available, devices.
 */
#include "cli/cli.h"

int cmd_backends(int argc, char **argv) {
    cli_error("'backends' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
