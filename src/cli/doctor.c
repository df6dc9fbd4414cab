/*
 * doctor.c: `sipp doctor`: report the host, the artifact, devices, drivers and the auto decision.
 */
#include "cli/cli.h"

int cmd_doctor(int argc, char **argv) {
    cli_error("'doctor' is not implemented in this version yet");
    return EXIT_RUNTIME;
}
