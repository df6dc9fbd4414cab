/*
 * image_case.h: the image case (image_case.c).
 */
#ifndef SIPP_VERIFY_IMAGE_CASE_H
#define SIPP_VERIFY_IMAGE_CASE_H

#include <jansson.h>

#include "sipp.h"
#include "verify/verify_types.h"

/* The fixed chat: one user message holding the fixed image and a fixed question, as chat_json
 * (malloc'ed). *image_sha256 (SIPP_SHA256_HEX) is the image file's hash. NULL when out of memory. */
char *verify_image_chat(char image_sha256[SIPP_SHA256_HEX], int *width, int *height);
/* Runs the image case on the loaded model m (with cfg->mmproj), comparing with ref's (NULL: this is
 * the reference). */
sipp_status verify_image_pass(const verify_config *cfg, sipp_model *m, const verify_result *ref,
                              verify_result *out, char *err);
void verify_image_free(verify_image_result *r);
json_t *verify_image_json(const verify_image_result *r);
/* The top-level "image" object: the projector (path, sha256), the image, the prompt; or the reason the
 * case was skipped. NULL (err) when the projector cannot be read. */
json_t *verify_image_case_json(const verify_config *cfg, char *err);

#endif
