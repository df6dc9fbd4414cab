/*
 * signature_browser.c: artifact signatures as the browser runtime has them, that is none.
 *
 * Natively, src/backend/signature.c signs and verifies an artifact directory (the ggml modules
 * sipp_runtime_init loads) with OpenSSL and jansson. The browser runtime loads no artifact:
 * llama.cpp is linked into the WebAssembly module, whose integrity is the page's to check (a
 * model's is checked by its SHA-256 in bindings/web). Neither library has a WebAssembly build here,
 * so this file replaces signature.c in `make web` and only there, refusing both calls by name.
 */
#include "sipp.h"
#include "util/util.h"

#define UNAVAILABLE                                                                                          \
    "is not available in the browser runtime: it loads no artifact (llama.cpp is linked into the wasm)"

sipp_status sipp_artifact_sign(const char *dir, const char *key_path, char *errbuf) {
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "sipp_artifact_sign " UNAVAILABLE);
}

sipp_status sipp_artifact_verify(const char *dir, const char *pub_path, char *errbuf) {
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "sipp_artifact_verify " UNAVAILABLE);
}
