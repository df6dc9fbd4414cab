/*
 * models.c: `sipp models`: list, inspect and remove models in the local store.
 */
#include "cli/cli.h"

int cmd_models(int argc, char **argv) {
    cli_error("'models' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
