/*
 * llama_tools.h: llama.cpp's own tools (test-backend-ops, llama-bench), compiled from the pinned
 * source checkout against an artifact's libraries and run on that artifact. Used by
 * `sipp backend-ops` and `sipp run llama TOOL`.
 */
#ifndef SIPP_CLI_LLAMA_TOOLS_H
#define SIPP_CLI_LLAMA_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#define LLAMA_TOOL_PATH 4096
#define LLAMA_TOOL_MAX_ARGS 64

typedef struct llama_tool {
    const char *name;            /* the binary: "test-backend-ops", "llama-bench" */
    const char *const *sources;  /* source files relative to the checkout, NULL-terminated */
    const char *const *includes; /* include directories relative to the checkout, NULL-terminated */
    const char *const *libs;     /* libraries to link from the artifact ("ggml", ...), NULL-terminated */
    const char *log_prefix;      /* "backend-ops", "run llama bench": the start of error messages */
} llama_tool;

/* Builds the tool into the cache ($SIPP_CACHE_DIR/build-COMMIT-NAME) unless an up-to-date one is
 * there, linking against artifact `art`; writes the binary's path. Prints the error. */
bool llama_tool_ensure(const llama_tool *tool, const char *art, char *binary, size_t n);

/* Runs argv (argv[0] the binary) in the artifact's directory with LD_LIBRARY_PATH=art, so that
 * ggml_backend_load_all() loads exactly the artifact's modules. Returns the exit status, or -1. */
int llama_tool_run(char *const *argv, const char *art);

/* The first device sipp would use for a backend ("CPU", "Vulkan0") after sipp_runtime_init;
 * prints the error (prefixed with `who`). */
bool llama_tool_device(const char *who, const char *backend, char *device, size_t n);

#endif
