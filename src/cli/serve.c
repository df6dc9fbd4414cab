/*
 * serve.c: `sipp serve`: run the gateway: OpenAI-compatible and sipp-native HTTP routes.
 */
#include "cli/cli.h"

int cmd_serve(int argc, char **argv) {
    cli_error("'serve' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
