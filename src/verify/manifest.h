/*
 * manifest.h: the model's facts and reading and writing manifests (manifest.c).
 */
#ifndef SIPP_VERIFY_MANIFEST_H
#define SIPP_VERIFY_MANIFEST_H

#include <jansson.h>

#include "sipp.h"

#define VERIFY_MANIFEST_FORMAT 1
#define VERIFY_MANIFEST_KIND "sipp-verify-manifest"

/* The model's facts: path, size, sha256, GGUF architecture, parameters, tensor types, tokenizer model,
 * vocabulary hash, chat template hash. NULL (message in err) when the file cannot be read. */
json_t *manifest_model_json(const char *path, char *err);
/* sipp's version, the llama.cpp release and commit, the artifact and its manifest. */
json_t *manifest_runtime_json(void);
/* CPU, ISA features, OS, kernel. */
json_t *manifest_host_json(void);
/* Reads and checks a manifest file: SIPP_ERR_IO when it cannot be read, SIPP_ERR_INVALID_ARGUMENT
 * when it is not a manifest this sipp can use. */
sipp_status manifest_load(const char *path, json_t **out, char *err);
sipp_status manifest_write(const char *path, const json_t *manifest, char *err);

#endif
