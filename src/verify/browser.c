/*
 * browser.c: `sipp verify MODEL --backends cpu,browser`: the browser runtime as one more
 * runtime to compare.
 *
 * "browser" is libsipp and the pinned llama.cpp compiled to WebAssembly (make web), run in headless
 * Chromium: tests/integration/web/drive.mjs launches Debian's /usr/bin/chromium through
 * playwright-core, serves the runtime and the model itself on loopback (cross-origin isolated, so
 * the pthread build runs), and the page's `verify` scenario evaluates the very token ids the native
 * backends evaluate: every position's logits in one batch and one token at a time (uploaded back as
 * raw float32 files), and the greedy continuation with end-of-generation ignored. They are compared
 * with the reference exactly as a native backend's are (verify_metrics), so the thresholds, the
 * manifest and --against treat "browser" like any backend name.
 *
 * What the browser needs lives in the repository that built this sipp: the driver and its
 * node_modules (npm ci in tests/integration/web) and build/web. SIPP_WEB_ROOT names another tree;
 * SIPP_CHROMIUM another browser.
 */
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"
#include "verify/browser.h"
#include "verify/distance.h"
#include "verify/greedy.h"

#define SELF_EXE "/proc/self/exe"
#define DRIVER "tests/integration/web/drive.mjs"
#define RUNTIME_JS "build/web/sipp-mt.js"
#define PLAYWRIGHT "tests/integration/web/node_modules/playwright-core/package.json"
#define CTX_MARGIN 16
#define STEP_TIMEOUT_MS (30 * 60 * 1000) /* drive.mjs's safety stop (a stalled step is cut sooner) */
#define FTW_FD_MAX 16
#define JOIN_MAX (2 * PATH_MAX) /* a directory and a name under it */

/* out = dir/name[suffix]; false when it does not fit. */
static bool join(char *out, size_t n, const char *dir, const char *name, const char *suffix) {
    int k = snprintf(out, n, "%s/%s%s", dir, name, suffix ? suffix : "");
    return k >= 0 && (size_t)k < n;
}

static bool exists(const char *root, const char *rel) {
    char p[JOIN_MAX];
    struct stat st;
    return join(p, sizeof p, root, rel, NULL) && stat(p, &st) == 0;
}

/* The repository this binary was built in: build/bin/sipp -> the directory above build/. */
static bool web_root(char *out, size_t n) {
    const char *env = getenv("SIPP_WEB_ROOT");
    if (env && *env) {
        sipp_strlcpy(out, env, n);
        return true;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink(SELF_EXE, exe, sizeof exe - 1);
    if (len <= 0) return false;
    exe[len] = '\0';
    sipp_strlcpy(out, dirname(dirname(dirname(exe))), n);
    return true;
}

static float *read_floats(const char *path, size_t want) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *v = malloc(want * sizeof *v);
    size_t got = v ? fread(v, sizeof *v, want, f) : 0;
    int extra = fgetc(f);
    fclose(f);
    if (got != want || extra != EOF) {
        free(v);
        return NULL;
    }
    return v;
}

static json_t *token_array(const verify_prompt *p) {
    json_t *a = json_array();
    for (int i = 0; i < p->n_tokens; i++)
        json_array_append_new(a, json_integer(p->tokens[i]));
    return a;
}

static sipp_status collect(const verify_config *cfg, const verify_prompt *prompts, int n_prompts,
                           const verify_result *ref, verify_result *out, const char *root, const char *tmp,
                           const char *plan_path, char *err);

/* Runs the driver on the plan; returns its one step's result object (new reference) or NULL. */
static json_t *run_driver(const char *root, const char *plan_path, char *why, size_t why_n) {
    char driver[JOIN_MAX], out_path[JOIN_MAX];
    int k = snprintf(out_path, sizeof out_path, "%s.out", plan_path);
    if (!join(driver, sizeof driver, root, DRIVER, NULL) || k < 0 || (size_t)k >= sizeof out_path) {
        snprintf(why, why_n, "the repository's path is too long");
        return NULL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, why_n, "fork: %s", strerror(errno));
        return NULL;
    }
    if (pid == 0) {
        FILE *o = freopen(out_path, "w", stdout);
        (void)o;
        execlp("node", "node", driver, plan_path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(why, why_n, "node " DRIVER " exited with status %d%s",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                 WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (is Node.js installed?)" : "");
        return NULL;
    }
    json_error_t je;
    json_t *all = json_load_file(out_path, 0, &je);
    json_t *step = json_is_array(all) ? json_incref(json_array_get(all, 0)) : NULL;
    json_decref(all);
    if (!step) {
        snprintf(why, why_n, "the driver's output is not JSON: %s", je.text);
        return NULL;
    }
    const char *err = json_string_value(json_object_get(step, "error"));
    if (err) {
        snprintf(why, why_n, "the page failed: %s", err);
        json_decref(step);
        return NULL;
    }
    json_t *res = json_incref(json_object_get(step, "result"));
    json_decref(step);
    return res;
}

bool verify_is_browser(const char *name) { return strcmp(name, "browser") == 0; }

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

sipp_status verify_run_browser(const verify_config *cfg, const verify_prompt *prompts, int n_prompts,
                               const verify_result *ref, verify_result *out, char *err) {
    sipp_strlcpy(out->backend, "browser", sizeof out->backend);
    char root[PATH_MAX];
    if (!web_root(root, sizeof root) || !exists(root, DRIVER))
        return sipp_fail(err, SIPP_ERR_NOT_FOUND,
                         "browser: cannot find " DRIVER
                         " beside this sipp (set SIPP_WEB_ROOT to the repository)");
    if (!exists(root, RUNTIME_JS))
        return sipp_fail(err, SIPP_ERR_NOT_FOUND,
                         "browser: the browser runtime is not built (" RUNTIME_JS
                         " is missing); run make web");
    if (!exists(root, PLAYWRIGHT))
        return sipp_fail(err, SIPP_ERR_NOT_FOUND,
                         "browser: playwright-core is not installed; run npm ci --ignore-scripts in "
                         "tests/integration/web");
    char tmp[] = "/tmp/sipp-verify-browser-XXXXXX";
    if (!mkdtemp(tmp))
        return sipp_fail(err, SIPP_ERR_IO, "browser: cannot make a temporary directory: %s", strerror(errno));
    char model_abs[PATH_MAX], plan_path[JOIN_MAX], profile[JOIN_MAX];
    if (!realpath(cfg->model_path, model_abs)) sipp_strlcpy(model_abs, cfg->model_path, sizeof model_abs);
    join(plan_path, sizeof plan_path, tmp, "plan.json", NULL);
    join(profile, sizeof profile, tmp, "profile", NULL);

    int longest = 0;
    json_t *toks = json_array();
    for (int p = 0; p < n_prompts; p++) {
        json_array_append_new(toks, token_array(&prompts[p]));
        longest = prompts[p].n_tokens > longest ? prompts[p].n_tokens : longest;
    }
    json_t *args = json_pack("{s:s, s:o, s:i, s:i, s:s, s:i, s:s}", "model", "{base}/models/model.gguf",
                             "prompts", toks, "greedyTokens", cfg->greedy_tokens, "threads",
                             cfg->threads > 0 ? cfg->threads : 1, "upload", "{base}/upload", "ctxSize",
                             longest + cfg->greedy_tokens + CTX_MARGIN, "backend", "cpu");
    json_t *plan = json_pack("{s:s, s:i, s:{s:s, s:{s:s}, s:s}, s:[{s:s, s:s, s:o}]}", "userDataDir", profile,
                             "timeoutMs", STEP_TIMEOUT_MS, "serve", "root", root, "files",
                             "/models/model.gguf", model_abs, "uploadDir", tmp, "steps", "url",
                             "{base}/tests/integration/web/harness.html", "scenario", "verify", "args", args);
    bool written = plan && json_dump_file(plan, plan_path, 0) == 0;
    json_decref(plan);
    sipp_status rc = written ? SIPP_OK : sipp_fail(err, SIPP_ERR_IO, "browser: cannot write %s", plan_path);
    if (cfg->progress)
        cfg->progress((sipp_now_ms() - cfg->t_start) / 1e3, "browser",
                      "the model in headless Chromium (WebAssembly)", cfg->user);
    if (rc == SIPP_OK) rc = collect(cfg, prompts, n_prompts, ref, out, root, tmp, plan_path, err);
    nftw(tmp, remove_entry, FTW_FD_MAX, FTW_DEPTH | FTW_PHYS);
    return rc;
}

static sipp_status collect(const verify_config *cfg, const verify_prompt *prompts, int n_prompts,
                           const verify_result *ref, verify_result *out, const char *root, const char *tmp,
                           const char *plan_path, char *err) {
    sipp_status rc = SIPP_OK;
    char why[SIPP_ERROR_SIZE];
    json_t *res = run_driver(root, plan_path, why, sizeof why);
    if (!res) return sipp_fail(err, SIPP_ERR_BACKEND, "browser: %s", why);
    int nv = (int)json_integer_value(json_object_get(res, "nVocab"));
    json_t *greedy = json_object_get(res, "greedy");
    json_t *rt = json_object_get(res, "runtime");
    out->ran = true;
    out->n_vocab = nv;
    out->device =
        json_pack("{s:s, s:s, s:s, s:b, s:O?, s:O?}", "name", "wasm", "description",
                  "libsipp + llama.cpp in WebAssembly, headless Chromium", "type", "cpu", "software", false,
                  "runtime", rt, "user_agent", json_object_get(res, "userAgent"));
    snprintf(out->model_desc, sizeof out->model_desc, "%s", ref ? ref->model_desc : "");
    if (ref) out->info = ref->info;
    out->logits = calloc((size_t)n_prompts, sizeof *out->logits);
    out->greedy = calloc((size_t)n_prompts, sizeof *out->greedy);
    out->greedy_agree = calloc((size_t)n_prompts, sizeof *out->greedy_agree);
    out->greedy_len = calloc((size_t)n_prompts, sizeof *out->greedy_len);
    if (!out->logits || !out->greedy || !out->greedy_agree || !out->greedy_len || nv <= 0 ||
        json_array_size(greedy) != (size_t)n_prompts) {
        json_decref(res);
        return sipp_fail(err, SIPP_ERR_INTERNAL, "browser: the page's results are incomplete");
    }
    if (ref && ref->n_vocab != nv) {
        json_decref(res);
        return sipp_fail(err, SIPP_ERR_MODEL,
                         "browser has %d vocabulary entries, the reference %s %d: not the same model", nv,
                         ref->backend, ref->n_vocab);
    }
    for (int p = 0; p < n_prompts && rc == SIPP_OK; p++) {
        char path[JOIN_MAX], name[32];
        size_t want = (size_t)prompts[p].n_tokens * (size_t)nv;
        snprintf(name, sizeof name, "p%d.batched.f32", p);
        out->logits[p] = join(path, sizeof path, tmp, name, NULL) ? read_floats(path, want) : NULL;
        snprintf(name, sizeof name, "p%d.inc.f32", p);
        float *inc = join(path, sizeof path, tmp, name, NULL) ? read_floats(path, want) : NULL;
        if (!out->logits[p] || !inc) {
            free(inc);
            rc = sipp_fail(err, SIPP_ERR_INTERNAL, "browser: the logits of prompt %d did not come back whole",
                           p + 1);
            break;
        }
        verify_metrics_add(&out->cached, out->logits[p], inc, prompts[p].n_tokens, nv);
        free(inc);
        if (ref) verify_metrics_add(&out->vs_ref, ref->logits[p], out->logits[p], prompts[p].n_tokens, nv);
        out->greedy[p] = strdup(json_string_value(json_array_get(greedy, (size_t)p)) ?: "");
        const char *against = ref ? ref->greedy[p] : out->greedy[p];
        out->greedy_agree[p] =
            verify_token_agreement(cfg->vocab, against, out->greedy[p], &out->greedy_len[p]);
    }
    verify_metrics_finish(&out->cached);
    verify_metrics_finish(&out->vs_ref);
    json_decref(res);
    return rc;
}
