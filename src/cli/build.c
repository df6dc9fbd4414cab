/*
 * build.c: `sipp build`: make an artifact with the chosen backend modules.
 */
#include "cli/cli.h"

int cmd_build(int argc, char **argv) {
    cli_error("'build' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
