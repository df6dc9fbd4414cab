/*
 * build.c: `sipp build --backend cpu|vulkan|cuda|rpc|all [--from-source]`: makes an artifact, a directory
 * of the pinned llama.cpp libraries with exactly the chosen backend modules, by running the same
 * deps/fetch.sh that `make BACKENDS=...` runs. It needs the source tree the binary was built in.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

#define MAX_BUILD_BACKENDS 4

/* The source tree: build/bin/sipp lives two levels below it, beside deps/fetch.sh. */
static bool find_root(char *root, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return false;
    exe[len] = '\0';
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash) return false;
        *slash = '\0';
    }
    snprintf(root, n, "%s", exe);
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/deps/fetch.sh", root);
    return access(probe, R_OK) == 0;
}

static bool loadable(const char *lib) {
    void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
}

/* Can this host have the backend? Prints what to install when not. */
static bool host_can_have(const char *b, bool quiet) {
    if (strcmp(b, "vulkan") == 0 && !loadable("libvulkan.so.1")) {
        if (!quiet) cli_error("build: vulkan needs the Vulkan loader: apt-get install -y libvulkan1 mesa-vulkan-drivers");
        return false;
    }
    if (strcmp(b, "cuda") == 0 && !loadable("libcuda.so.1")) {
        if (!quiet)
            cli_error("build: cuda needs the NVIDIA driver (libcuda.so.1 not found): install the NVIDIA driver and "
                      "CUDA runtime (apt-get install -y nvidia-driver libcudart12 libcublas12)");
        return false;
    }
    return true;
}

int cmd_build(int argc, char **argv) {
    const char *list[MAX_BUILD_BACKENDS + 1] = {"cpu"};
    int n = 1;
    bool from_source = false, all = false;
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < argc && !a.bad) {
        if (cli_flag(&a, "--from-source")) from_source = true;
        else if (cli_flag_value(&a, "--backend")) {
            if (!a.value) break;
            if (strcmp(a.value, "all") == 0) all = true;
            else if (strcmp(a.value, "cpu") == 0) continue;
            else if (strcmp(a.value, "vulkan") == 0 || strcmp(a.value, "cuda") == 0 || strcmp(a.value, "rpc") == 0) {
                bool dup = false;
                for (int i = 0; i < n; i++) dup |= strcmp(list[i], a.value) == 0;
                if (!dup) list[n++] = a.value;
            } else {
                cli_error("build: --backend '%s' is not one of cpu, vulkan, cuda, rpc, all", a.value);
                return EXIT_USAGE;
            }
        } else if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            printf("usage: sipp build --backend cpu|vulkan|cuda|rpc|all [--backend ...] [--from-source]\n\n"
                   "Makes build/artifacts/NAME (NAME = the backends joined by '+'): the pinned llama.cpp libraries\n"
                   "with exactly these backend modules and a manifest.json. Every artifact has the CPU backend.\n"
                   "'all' is every backend this host can have. Use it with SIPP_ARTIFACT=DIR or --artifact DIR.\n"
                   "rpc (ggml's RPC client and server) is compiled from the pinned source in seconds.\n"
                   "--from-source builds llama.cpp (CPU) from the pinned source instead of the prebuilt libraries.\n");
            return EXIT_OK;
        } else {
            cli_error("build: unknown option '%s'", argv[a.i]);
            return EXIT_USAGE;
        }
    }
    if (a.bad) return EXIT_USAGE;
    if (all) {
        n = 1;
        if (!from_source && host_can_have("vulkan", true)) list[n++] = "vulkan";
        if (!from_source && host_can_have("cuda", true)) list[n++] = "cuda";
        list[n++] = "rpc";
    }
    for (int i = 1; i < n; i++)
        if (!host_can_have(list[i], false)) return EXIT_RUNTIME;
    char root[PATH_MAX];
    if (!find_root(root, sizeof root)) {
        cli_error("build: cannot find deps/fetch.sh beside this binary; run sipp build from the source tree's build/bin/sipp");
        return EXIT_RUNTIME;
    }
    char cmd[PATH_MAX * 2 + 128];
    int len = snprintf(cmd, sizeof cmd, "LLAMA_FROM_SOURCE=%d bash '%s/deps/fetch.sh' '%s/build'", from_source, root, root);
    for (int i = 0; i < n; i++) len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", list[i]);
    int rc = system(cmd);
    if (rc != 0) {
        cli_error("build: deps/fetch.sh failed (status %d); see the message above", WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
