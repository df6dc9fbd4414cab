/*
 * host.c: what this host is (CPU model and ISA features, OS and kernel) and which artifact is
 * active, read from /proc/cpuinfo, /etc/os-release, uname(2) and <artifact>/manifest.json. Doctor
 * prints these (sipp_host_facts_json); verify records them in its manifest, so the two always
 * describe a host the same way.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "sipp.h"
#include "verify/host.h"

#define LINE_BYTES 4096

/* The CPU's model name and the ISA features that matter to ggml's CPU modules. */
json_t *verify_host_cpu_json(void) {
    static const char *const isa[] = {"sse4_2",      "avx",      "avx2",     "fma",
                                      "f16c",        "avx512f",  "avx512bw", "avx512_vnni",
                                      "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8"};
    char model[256] = "unknown", line[LINE_BYTES];
    json_t *features = json_array();
    FILE *f = fopen("/proc/cpuinfo", "r");
    bool flags_done = false;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 && strcmp(model, "unknown") == 0) {
            char *c = strchr(line, ':');
            if (c) snprintf(model, sizeof model, "%s", c + 2);
            model[strcspn(model, "\n")] = '\0';
        } else if (strncmp(line, "flags", 5) == 0 && !flags_done) {
            flags_done = true;
            for (size_t i = 0; i < sizeof isa / sizeof isa[0]; i++) {
                char needle[32];
                snprintf(needle, sizeof needle, " %s", isa[i]);
                char *p = strstr(line, needle);
                if (p && (p[strlen(needle)] == ' ' || p[strlen(needle)] == '\n'))
                    json_array_append_new(features, json_string(isa[i]));
            }
        }
    }
    if (f) fclose(f);
    return json_pack("{s:s, s:i, s:o, s:s}", "model", model, "cores", (int)sysconf(_SC_NPROCESSORS_ONLN),
                     "features", features, "ggml_cpu_module", sipp_cpu_module());
}

json_t *verify_host_os_json(void) {
    struct utsname u;
    uname(&u);
    char pretty[256] = "unknown", line[LINE_BYTES];
    FILE *f = fopen("/etc/os-release", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "PRETTY_NAME=", 12) == 0) {
            snprintf(pretty, sizeof pretty, "%s", line + 12 + (line[12] == '"'));
            pretty[strcspn(pretty, "\"\n")] = '\0';
        }
    }
    if (f) fclose(f);
    return json_pack("{s:s, s:s, s:s}", "name", pretty, "kernel", u.release, "machine", u.machine);
}

json_t *verify_artifact_json(void) {
    const char *dir = sipp_runtime_artifact_dir();
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", dir ? dir : ".");
    json_error_t jerr;
    json_t *manifest = json_load_file(path, 0, &jerr);
    /* The SBOM and the signature beside the manifest, when the artifact has them. */
    char sbom[1024], sig[1024];
    snprintf(sbom, sizeof sbom, "%s/sbom.spdx.json", dir ? dir : ".");
    snprintf(sig, sizeof sig, "%s/signature.json", dir ? dir : ".");
    return json_pack("{s:s, s:o, s:s?, s:s?}", "dir", dir ? dir : "", "manifest",
                     manifest ? manifest : json_null(), "sbom", dir && access(sbom, R_OK) == 0 ? sbom : NULL,
                     "signature", dir && access(sig, R_OK) == 0 ? sig : NULL);
}

char *sipp_host_facts_json(void) {
    json_t *facts = json_pack("{s:o, s:o, s:o}", "os", verify_host_os_json(), "cpu", verify_host_cpu_json(),
                              "artifact", verify_artifact_json());
    char *text = facts ? json_dumps(facts, JSON_PRESERVE_ORDER) : NULL;
    json_decref(facts);
    return text;
}
