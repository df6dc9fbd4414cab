/*
 * run_llama.c: `sipp run llama TOOL ...`: llama.cpp's own tools, built from the pinned source
 * against the active artifact (llama_tools.c) and run on it.
 *
 *   backend-ops   the same command as `sipp backend-ops` (--backend, --mode test|perf|support, --op)
 *   bench         llama-bench: tools/llama-bench of the pinned commit, linked against the artifact's
 *                 libllama, libggml, libggml-base and libllama-common (the prebuilt common library of
 *                 the same release), so the numbers are those of the libraries sipp itself loads.
 *
 * For bench, sipp's --backend (default auto) becomes llama-bench's device: the device sipp would
 * use for that backend (`-dev Vulkan0`), or `-dev none -ngl 0` for the CPU. Every other argument goes
 * to llama-bench unchanged; a -dev of the caller's own is refused together with --backend, since
 * the two would disagree. Any other tool name is an error that lists the available ones.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/llama_tools.h"
#include "cli/options.h"
#include "cli/packages.h"

#define TOOL_LIST "backend-ops, bench"
#define BENCH_OWN_ARGS 6 /* binary, -dev X, -ngl 0, NULL */

static const char *const bench_sources[] = {"tools/llama-bench/llama-bench.cpp", "tools/llama-bench/main.cpp",
                                            NULL};
static const char *const bench_includes[] = {"include", "ggml/include", "common", "vendor", NULL};
static const char *const bench_libs[] = {"llama-common", "llama", "ggml", "ggml-base", NULL};
static const llama_tool bench_tool = {"llama-bench", bench_sources, bench_includes, bench_libs,
                                      "run llama bench"};

static const char usage[] =
    "usage: sipp run llama TOOL [ARGS...]\n\n"
    "Runs one of llama.cpp's own tools, built from the pinned llama.cpp source against the active\n"
    "artifact's libraries (the first run compiles it into $SIPP_CACHE_DIR, default ~/.cache/sipp):\n\n"
    "  backend-ops --backend NAME [--mode test|perf|support] [--op OP] [--artifact DIR] [-- ARGS]\n"
    "               llama.cpp's test-backend-ops (the same as sipp backend-ops)\n"
    "  bench [--backend NAME] [--artifact DIR] LLAMA-BENCH-ARGS...\n"
    "               llama-bench, e.g. sipp run llama bench --backend cpu -m model.gguf -p 64 -n 16\n"
    "               --backend (default auto) picks llama-bench's device the way sipp picks it; the\n"
    "               other arguments go to llama-bench as they are (llama-bench --help lists them)\n";

typedef struct {
    cli_common c; /* --backend, --artifact */
} bench_options;

static const cli_option opt_backend = {
    .like = &cli_opt_backend, .help = "picks llama-bench's device the way sipp picks it (default auto)"};
static const cli_option *const bench_table[] = {&opt_backend, &cli_opt_artifact, NULL};

static const cli_command bench_command = {
    .name = "run llama bench",
    .synopsis = "run llama bench [--backend NAME] [--artifact DIR] LLAMA-BENCH-ARGS...",
    .about = "Runs llama-bench, built from the pinned llama.cpp source against the active artifact's\n"
             "libraries (the first run compiles it into $SIPP_CACHE_DIR, default ~/.cache/sipp), e.g.\n"
             "sipp run llama bench --backend cpu -m model.gguf -p 64 -n 16. The other arguments go to\n"
             "llama-bench as they are (llama-bench --help lists them).\n",
    .options = bench_table,
    .max_args = LLAMA_TOOL_MAX_ARGS - BENCH_OWN_ARGS,
    .args_hint = "too many arguments for llama-bench",
    .pass_unknown = true};

static int run_bench(int argc, char **argv) {
    bench_options o = {0};
    const char *pass[LLAMA_TOOL_MAX_ARGS];
    int np;
    int rc = cli_parse(&bench_command, argc, argv, &o, pass, &np);
    if (rc != CLI_PARSED) return rc;
    const char *backend = o.c.backend, *artifact = o.c.artifact;
    bool own_device = false;
    for (int i = 0; i < np; i++)
        own_device |= strcmp(pass[i], "-dev") == 0 || strcmp(pass[i], "--device") == 0;
    if (own_device && backend) {
        cli_error(
            "run llama bench: give --backend or llama-bench's -dev, not both (--backend picks the device)");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE];
    if (backend && sipp_backend_check_name(backend, err) != SIPP_OK) {
        cli_error("run llama bench: --backend: %s", err);
        return EXIT_USAGE;
    }
    if (!cli_runtime_init_for(artifact, backend)) return EXIT_RUNTIME;
    char device[sizeof((sipp_backend_decision *)0)->devices] = "", binary[LLAMA_TOOL_PATH];
    if (!own_device &&
        !llama_tool_device("run llama bench", backend ? backend : "auto", device, sizeof device))
        return EXIT_RUNTIME;
    const char *art = sipp_runtime_artifact_dir();
    if (!llama_tool_ensure(&bench_tool, art, binary, sizeof binary)) return EXIT_RUNTIME;

    char *targv[LLAMA_TOOL_MAX_ARGS];
    int k = 0;
    targv[k++] = binary;
    bool cpu = strcmp(device, "CPU") == 0;
    if (!own_device) {
        targv[k++] = "-dev";
        targv[k++] = cpu ? "none" : device;
        if (cpu) {
            targv[k++] = "-ngl";
            targv[k++] = "0";
        }
    }
    for (int i = 0; i < np; i++)
        targv[k++] = (char *)pass[i];
    targv[k] = NULL;
    printf("sipp run llama bench: llama-bench on %s, artifact %s\n",
           own_device ? "the devices given" : device, art);
    rc = llama_tool_run(targv, art);
    if (rc != 0) {
        cli_error("run llama bench: llama-bench %s (exit %d); see its message above",
                  rc < 0 ? "did not finish" : "failed", rc);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

int cmd_run_tool(int argc, char **argv) {
    if (argc == 0 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(usage, argc == 0 ? stderr : stdout);
        return argc == 0 ? EXIT_USAGE : EXIT_OK;
    }
    if (strcmp(argv[0], "llama") != 0) {
        cli_error("run: '%s' is not a tool family; the form is sipp run llama TOOL (tools: " TOOL_LIST
                  "). To run a model: sipp MODEL PROMPT",
                  argv[0]);
        return EXIT_USAGE;
    }
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (argc < 2)
            cli_error("run llama: name a tool: " TOOL_LIST " (sipp run llama --help)");
        else
            fputs(usage, stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    const char *tool = argv[1];
    if (strcmp(tool, "backend-ops") == 0) return cmd_backend_ops(argc - 2, argv + 2);
    if (strcmp(tool, "bench") == 0) return run_bench(argc - 2, argv + 2);
    cli_error("run llama: unknown tool '%s'; the available ones are " TOOL_LIST " (sipp run llama --help)",
              tool);
    return EXIT_USAGE;
}
