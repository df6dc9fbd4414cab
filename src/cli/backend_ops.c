/*
 * backend_ops.c: `sipp backend-ops --backend NAME --mode test|perf|support [--op OP]`: run llama.cpp's
 * own op test, test-backend-ops, against the active artifact's backend module.
 *
 * test-backend-ops is compiled from the pinned source against the artifact's own libggml and
 * libggml-base and run in the artifact's directory (llama_tools.c says why), so what is tested is
 * what runs: the artifact's modules (the prebuilt Vulkan module, say), not a second build of ggml.
 * test-backend-ops's -b names a device ("CPU", "Vulkan0"): the device sipp would use for the backend.
 * Arguments after `--` go to test-backend-ops unchanged (e.g. -- -p 'type=f16').
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/llama_tools.h"
#include "cli/options.h"
#include "cli/packages.h"

#define MAX_ARGS LLAMA_TOOL_MAX_ARGS

static const char *const sources[] = {"tests/test-backend-ops.cpp", NULL};
static const char *const includes[] = {"ggml/include", NULL};
static const char *const libs[] = {"ggml", "ggml-base", NULL};
static const llama_tool tool = {"test-backend-ops", sources, includes, libs, "backend-ops"};

typedef struct {
    cli_common c; /* --backend, --artifact */
    const char *mode, *op;
} backend_ops_options;

static const cli_option opt_mode = {.name = "--mode",
                                    .arg = "test|perf|support",
                                    .kind = CLI_OPT_STRING,
                                    .offset = offsetof(backend_ops_options, mode),
                                    .help = "compare with the CPU, time, or list support (default test)"};
static const cli_option opt_op = {.name = "--op",
                                  .arg = "OP",
                                  .kind = CLI_OPT_STRING,
                                  .offset = offsetof(backend_ops_options, op),
                                  .help = "only this op, as ggml names it (ADD, MUL_MAT, ...)"};

static const cli_option *const options[] = {&cli_opt_backend, &opt_mode, &opt_op, &cli_opt_artifact, NULL};

static const char about[] =
    "The same as sipp run llama backend-ops --backend NAME [OPTIONS] [-- ARGS...].\n\n"
    "Runs llama.cpp's test-backend-ops against the active artifact's backend: test compares every op\n"
    "with the CPU backend, perf times them, support lists which ops the device supports. --op restricts\n"
    "it to one op (as ggml names it: ADD, MUL_MAT, ...). ARGS after -- go to test-backend-ops as they\n"
    "are. The first run compiles test-backend-ops from the pinned llama.cpp source against the artifact's\n"
    "libraries, into $SIPP_CACHE_DIR (default ~/.cache/sipp); that takes a few minutes. The exit status\n"
    "is 0 when test-backend-ops passes, 1 otherwise. Vulkan on lavapipe needs GGML_VK_VISIBLE_DEVICES=0.\n";

static const cli_command command = {.name = "backend-ops",
                                    .synopsis = "backend-ops --backend NAME [OPTIONS] [-- ARGS...]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 0,
                                    .args_hint = "arguments for test-backend-ops go after --"};

int cmd_backend_ops(int argc, char **argv) {
    /* sipp's options come before "--"; what follows goes to test-backend-ops unchanged */
    int own = 0;
    while (own < argc && strcmp(argv[own], "--") != 0)
        own++;
    int extra = own < argc ? own + 1 : argc;
    backend_ops_options o = {.mode = "test"};
    int n_args;
    int rc = cli_parse(&command, own, argv, &o, NULL, &n_args);
    if (rc != CLI_PARSED) return rc;
    const char *backend = o.c.backend, *mode = o.mode, *op = o.op, *artifact = o.c.artifact;
    if (!backend) {
        cli_error("backend-ops: --backend is required (sipp backend-ops --backend vulkan --mode test)");
        return EXIT_USAGE;
    }
    if (!mode || (strcmp(mode, "test") != 0 && strcmp(mode, "perf") != 0 && strcmp(mode, "support") != 0)) {
        cli_error("backend-ops: --mode '%s' is not one of test, perf, support", mode ? mode : "");
        return EXIT_USAGE;
    }
    if (argc - extra > MAX_ARGS - 8) {
        cli_error("backend-ops: too many arguments after --");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE];
    if (sipp_backend_check_name(backend, err) != SIPP_OK) {
        cli_error("backend-ops: --backend: %s", err);
        return EXIT_USAGE;
    }
    if (!cli_runtime_init_for(artifact, backend)) return EXIT_RUNTIME;
    char device[sizeof((sipp_backend_decision *)0)->devices], binary[LLAMA_TOOL_PATH];
    if (!llama_tool_device("backend-ops", backend, device, sizeof device)) return EXIT_RUNTIME;
    const char *art = sipp_runtime_artifact_dir();
    if (!llama_tool_ensure(&tool, art, binary, sizeof binary)) return EXIT_RUNTIME;

    char *targv[MAX_ARGS];
    int k = 0;
    targv[k++] = binary;
    targv[k++] = (char *)mode;
    targv[k++] = "-b";
    targv[k++] = device;
    if (op) {
        targv[k++] = "-o";
        targv[k++] = (char *)op;
    }
    for (int i = extra; i < argc; i++)
        targv[k++] = argv[i];
    targv[k] = NULL;
    printf("sipp backend-ops: test-backend-ops %s -b %s%s%s on artifact %s\n", mode, device, op ? " -o " : "",
           op ? op : "", art);
    rc = llama_tool_run(targv, art);
    if (rc != 0) {
        cli_error("backend-ops: test-backend-ops %s on %s %s (exit %d)", mode, device,
                  rc < 0 ? "did not finish" : "reported failures", rc);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
