/*
 * verify.c: `sipp verify`: check that backends agree on a model's outputs.
 */
#include "cli/cli.h"

int cmd_verify(int argc, char **argv) {
    cli_error("'verify' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
