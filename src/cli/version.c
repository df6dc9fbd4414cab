/*
 * version.c: `sipp version` and `sipp --version`.
 */
#include <stdio.h>

#include "cli/cli.h"

int cmd_version(int argc, char **argv) {
    printf("sipp %s\nllama.cpp %s (commit %s)\n", sipp_version(), sipp_llama_release(), sipp_llama_commit());
    return EXIT_OK;
}
