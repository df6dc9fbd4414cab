/*
 * packages.c: the packages sipp builds artifacts for, and the artifact each one loads.
 *
 * An artifact (build/artifacts/NAME) is what runs; a target is who loads it: the CLI and gateway
 * (cli), the Node addon (node), the Python ctypes binding (python) and the browser runtime (web).
 * `sipp build TARGET --backend ...` records the artifact it made for that target in
 * build/targets/TARGET.json, {"target", "artifact", "backends"}: the Node and Python packages read
 * that file when they choose their artifact (SIPP_NODE_BACKEND, SIPP_PYTHON_BACKEND), so a build for
 * a target is what that target then selects. The CLI's choice stays with --artifact, SIPP_ARTIFACT,
 * else the artifact it was linked against; only an explicit --backend that artifact lacks falls to
 * the artifact `sipp build cli` recorded, so that building an artifact never changes what a command
 * line that works already loads, and `sipp build cli --backend cuda` makes `--backend cuda` work.
 *
 * The choosing rules are those of bindings/node/lib/artifact.js and bindings/python/sipp/_native.py,
 * restated here so that `sipp doctor --target` reports what the package itself would do; the
 * integration tests hold the three to the same answers.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"

#define RECORD_DIR "build/targets"
#define ARTIFACTS_DIR "build/artifacts"
#define DEFAULT_ARTIFACT "build/artifact"
#define EXE_LEVELS 3 /* ROOT/build/bin/sipp: three path components above the binary */

static const char *const target_names[TARGET_COUNT] = {"cli", "node", "python", "web"};

const char *cli_target_name(cli_target t) { return (unsigned)t < TARGET_COUNT ? target_names[t] : "?"; }

const char *cli_target_names(void) { return "cli, node, python, web"; }

bool cli_target_parse(const char *s, cli_target *out) {
    for (int t = 0; t < TARGET_COUNT; t++)
        if (strcmp(s, target_names[t]) == 0) {
            *out = (cli_target)t;
            return true;
        }
    return false;
}

const char *cli_target_backend_env(cli_target t) {
    return t == TARGET_NODE ? "SIPP_NODE_BACKEND" : t == TARGET_PYTHON ? "SIPP_PYTHON_BACKEND" : NULL;
}

/* The running binary's path with `levels` trailing components removed. */
static bool exe_up(char *out, size_t n, int levels) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return false;
    exe[len] = '\0';
    for (int up = 0; up < levels; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash) return false;
        *slash = '\0';
    }
    return (size_t)snprintf(out, n, "%s", exe) < n;
}

bool cli_source_root(char *root, size_t n) {
    if (!exe_up(root, n, EXE_LEVELS)) return false;
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/deps/fetch.sh", root);
    return access(probe, R_OK) == 0;
}

bool cli_target_record_path(cli_target t, char *out, size_t n) {
    char root[PATH_MAX];
    if (!cli_source_root(root, sizeof root)) return false;
    return (size_t)snprintf(out, n, "%s/%s/%s.json", root, RECORD_DIR, cli_target_name(t)) < n;
}

json_t *cli_artifact_backends(const char *dir) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_t *m = json_load_file(path, 0, NULL);
    json_t *b = json_incref(json_object_get(m, "backends"));
    json_decref(m);
    if (!json_is_array(b)) {
        json_decref(b);
        return NULL;
    }
    return b;
}

static bool has_backend(json_t *backends, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach(backends, i,
                       v) if (json_is_string(v) && strcmp(json_string_value(v), name) == 0) return true;
    return false;
}

bool cli_target_record_write(cli_target t, const char *dir) {
    char path[PATH_MAX], real[PATH_MAX];
    if (!cli_target_record_path(t, path, sizeof path)) {
        cli_error("build: cannot find the source tree to record the %s artifact in", cli_target_name(t));
        return false;
    }
    if (!realpath(dir, real)) {
        cli_error("build: artifact '%s' is missing after the build: %s", dir, strerror(errno));
        return false;
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", path);
    *strrchr(parent, '/') = '\0';
    if (mkdir(parent, 0755) != 0 && errno != EEXIST) {
        cli_error("build: cannot create %s: %s", parent, strerror(errno));
        return false;
    }
    json_t *backends = cli_artifact_backends(real);
    json_t *rec = json_pack("{s:s, s:s, s:o}", "target", cli_target_name(t), "artifact", real, "backends",
                            backends ? backends : json_array());
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    bool ok = json_dump_file(rec, tmp, JSON_INDENT(2)) == 0 && rename(tmp, path) == 0;
    json_decref(rec);
    if (!ok) {
        cli_error("build: cannot write %s: %s", path, strerror(errno));
        remove(tmp);
    }
    return ok;
}

/* The artifact recorded for the target, copied into dir; false when there is none or it is gone. */
static bool record_artifact(cli_target t, char *dir, size_t n) {
    char path[PATH_MAX];
    if (!cli_target_record_path(t, path, sizeof path)) return false;
    json_t *rec = json_load_file(path, 0, NULL);
    const char *a = json_string_value(json_object_get(rec, "artifact"));
    struct stat st;
    bool ok = a && stat(a, &st) == 0 && S_ISDIR(st.st_mode) && (size_t)snprintf(dir, n, "%s", a) < n;
    json_decref(rec);
    return ok;
}

static bool default_artifact(cli_target t, char *dir, size_t n) {
    char base[PATH_MAX], link[PATH_MAX + 32];
    /* The CLI's own: the one its rpath names ($ORIGIN/../artifact). The packages' default: the source
     * tree's build/artifact, the one libsipp.so was linked against. */
    if (t == TARGET_CLI) {
        if (!exe_up(base, sizeof base, 2)) return false;
        snprintf(link, sizeof link, "%s/artifact", base);
    } else {
        if (!cli_source_root(base, sizeof base)) return false;
        snprintf(link, sizeof link, "%s/%s", base, DEFAULT_ARTIFACT);
    }
    char real[PATH_MAX];
    return realpath(link, real) && (size_t)snprintf(dir, n, "%s", real) < n;
}

/* The artifacts under build/artifacts, sorted by name. */
static json_t *artifact_dirs(void) {
    json_t *arr = json_array();
    char root[PATH_MAX], dir[PATH_MAX + 32];
    if (!cli_source_root(root, sizeof root)) return arr;
    snprintf(dir, sizeof dir, "%s/%s", root, ARTIFACTS_DIR);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char path[2 * PATH_MAX], real[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        json_t *b = names[i]->d_name[0] != '.' && realpath(path, real) ? cli_artifact_backends(real) : NULL;
        if (b) json_array_append_new(arr, json_pack("{s:s, s:o}", "dir", real, "backends", b));
        free(names[i]);
    }
    free(names);
    return arr;
}

static void choose(cli_target_choice *out, const char *dir, const char *source, const char *backend) {
    out->found = true;
    snprintf(out->dir, sizeof out->dir, "%s", dir);
    snprintf(out->source, sizeof out->source, "%s", source);
    json_t *b = cli_artifact_backends(dir);
    out->has_backend = strcmp(backend, "auto") == 0 || (b && has_backend(b, backend));
    if (!out->has_backend)
        snprintf(out->problem, sizeof out->problem, "the %s backend is not compiled into artifact %s (%s)",
                 backend, dir, source);
    json_decref(b);
}

void cli_target_choose(cli_target t, const char *backend, const char *explicit_dir, cli_target_choice *out) {
    memset(out, 0, sizeof *out);
    char dir[PATH_MAX], source[sizeof out->source];
    const char *forced = getenv("SIPP_ARTIFACT");
    if (t == TARGET_WEB) {
        snprintf(
            out->problem, sizeof out->problem,
            "the web target runs in a browser and loads no native artifact; its runtime is built with sipp "
            "build web");
        return;
    }
    if (t == TARGET_CLI && explicit_dir && *explicit_dir) {
        choose(out, explicit_dir, cli_opt_artifact.name, backend);
        return;
    }
    if (forced && *forced) {
        choose(out, forced, "SIPP_ARTIFACT", backend);
        return;
    }
    if (t != TARGET_CLI && record_artifact(t, dir, sizeof dir)) {
        json_t *b = cli_artifact_backends(dir);
        bool usable = strcmp(backend, "auto") == 0 || (b && has_backend(b, backend));
        json_decref(b);
        snprintf(source, sizeof source, "sipp build %s", cli_target_name(t));
        if (usable) {
            choose(out, dir, source, backend);
            return;
        }
    }
    bool have_default = default_artifact(t, dir, sizeof dir);
    if (have_default) {
        choose(out, dir, "the default artifact", backend);
        if (out->has_backend) return;
    }
    if (t == TARGET_CLI) {
        /* The CLI never scans: an explicit backend its default lacks comes from sipp build cli or not at all.
         */
        cli_target_choice rec;
        if (record_artifact(t, dir, sizeof dir)) {
            choose(&rec, dir, "sipp build cli", backend);
            if (rec.has_backend || !have_default) *out = rec;
        }
        return;
    }
    json_t *all = artifact_dirs();
    size_t i;
    json_t *a;
    json_array_foreach(all, i, a) {
        if (!has_backend(json_object_get(a, "backends"), backend)) continue;
        snprintf(source, sizeof source, "the first artifact with %s", backend);
        choose(out, json_string_value(json_object_get(a, "dir")), source, backend);
        json_decref(all);
        return;
    }
    json_decref(all);
    if (!have_default)
        snprintf(out->problem, sizeof out->problem,
                 "no artifact found for the %s target; build one with make", cli_target_name(t));
    else
        snprintf(out->problem, sizeof out->problem, "no artifact for the %s target has the %s backend",
                 cli_target_name(t), backend);
}

json_t *cli_target_json(cli_target t) {
    char rec[PATH_MAX] = "";
    bool has_rec = t != TARGET_WEB && record_artifact(t, rec, sizeof rec);
    json_t *arts = json_array(), *select = json_object();
    if (t != TARGET_WEB) {
        json_t *all = artifact_dirs();
        char def[PATH_MAX] = "";
        default_artifact(t, def, sizeof def);
        size_t i;
        json_t *a;
        json_array_foreach(all, i, a) {
            const char *d = json_string_value(json_object_get(a, "dir"));
            json_object_set_new(a, "record", json_boolean(has_rec && strcmp(d, rec) == 0));
            json_object_set_new(a, "default", json_boolean(strcmp(d, def) == 0));
            json_array_append(arts, a);
        }
        json_decref(all);
        /* A record made with --out lies outside build/artifacts. */
        bool listed = false;
        json_array_foreach(arts, i, a) listed |= json_is_true(json_object_get(a, "record"));
        json_t *rb = has_rec && !listed ? cli_artifact_backends(rec) : NULL;
        if (rb)
            json_array_append_new(arts, json_pack("{s:s, s:o, s:b, s:b}", "dir", rec, "backends", rb,
                                                  "record", 1, "default", strcmp(rec, def) == 0));
        static const char *const names[] = {"auto", "cpu", "vulkan", "cuda", "metal"};
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            cli_target_choice c;
            cli_target_choose(t, names[k], NULL, &c);
            if (c.found && c.has_backend)
                json_object_set_new(select, names[k],
                                    json_pack("{s:s, s:s}", "artifact", c.dir, "source", c.source));
        }
    }
    return json_pack("{s:s, s:s?, s:s?, s:o, s:o}", "target", cli_target_name(t), "backend_env",
                     cli_target_backend_env(t), "record", has_rec ? rec : NULL, "artifacts", arts, "select",
                     select);
}

bool cli_runtime_init_for(const char *artifact, const char *backend) {
    if (!artifact && backend && strcmp(backend, "auto") != 0) {
        cli_target_choice c;
        cli_target_choose(TARGET_CLI, backend, NULL, &c);
        /* Only a different artifact that has the backend changes anything; otherwise libsipp's own
         * choice stands, and its error says what is missing. */
        if (c.found && c.has_backend && strcmp(c.source, "sipp build cli") == 0) artifact = c.dir;
    }
    return cli_runtime_init(artifact);
}
