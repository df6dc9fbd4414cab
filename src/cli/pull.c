/*
 * pull.c: `sipp pull`: download a model into the local store.
 */
#include "cli/cli.h"

int cmd_pull(int argc, char **argv) {
    cli_error("'pull' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
