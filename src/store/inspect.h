/*
 * inspect.h: what a GGUF model is, read from its header without loading any weights
 * (sipp_gguf_inspect in sipp.h), and the check a pull makes of each downloaded file.
 */
#ifndef SIPP_MODEL_INSPECT_H
#define SIPP_MODEL_INSPECT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/source.h"
#include "sipp.h"



/* Checks one file: 'GGUF' magic, a readable header, and tensor data that fits in the file. */
sipp_status sipp_gguf_check(const char *path, char *errbuf);

#endif
