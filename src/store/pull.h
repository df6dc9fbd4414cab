/*
 * pull.h: downloading a model into the store (`sipp pull`); the API is sipp_store_pull in sipp.h.
 */
#ifndef SIPP_MODEL_PULL_H
#define SIPP_MODEL_PULL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "sipp.h"
#include "store/source.h"
#include "util/sha256.h"

#define SIPP_PULL_DEFAULT_RETRIES 3

#endif
