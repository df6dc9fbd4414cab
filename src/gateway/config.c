/*
 * config.c: the gateway's TOML configuration: defaults, parsing a file, the targets added from the
 * command line and a models directory, and what depends on the machine.
 *
 * Every key of the file is a row of config_keys.c's tables (one per section), read by config_table.c:
 * that is where a key is added, and where docs/gateway.md's reference comes from (`sipp serve
 * --config-keys`). The file is read with sipp's own TOML parser (util/toml.h), whose nodes carry
 * their line, so each problem is reported as "FILE:LINE: problem". Parsing does not stop at the first
 * problem: every unknown key, wrong type and duplicate name is listed, so that one `sipp serve
 * --check` run shows all of them. What depends on the machine (model files, environment variables,
 * the listen address) is checked separately by gw_config_validate, so that the parser stays pure and
 * fuzzable.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/config.h"
#include "gateway/config_table.h"
#include "gateway/models_dir.h"
#include "util/toml.h"

#define GW_CONFIG_MAX_FILE_BYTES ((size_t)16 << 20)
#define GW_MODEL_SUFFIX ".gguf"
#define WHISPER_RECIPE "whispercpp" /* the recipe of whisper.cpp models (kinds/whisper.c) */
#define GW_MEDIA_DECODED_BUDGET_DEFAULT ((size_t)1 << 30) /* all requests' decoded media at once: 1 GB */

void gw_config_init(gw_config *c) {
    memset(c, 0, sizeof *c);
    c->host = strdup(GW_DEFAULT_HOST);
    c->port = GW_DEFAULT_PORT;
    c->max_request_bytes = GW_DEFAULT_MAX_REQUEST_BYTES;
    c->max_concurrent_requests = GW_DEFAULT_MAX_CONCURRENT;
    c->max_queue = GW_DEFAULT_MAX_QUEUE;
    c->request_timeout_seconds = GW_DEFAULT_REQUEST_TIMEOUT_S;
    c->discovered_keep_alive_s = GW_KEEP_ALIVE_FOREVER;
    c->slot_state_max_mb = GW_DEFAULT_SLOT_STATE_MB;
    c->shutdown_timeout_seconds = GW_DEFAULT_SHUTDOWN_TIMEOUT_S;
    c->read_timeout_seconds = GW_DEFAULT_READ_TIMEOUT_S;
    c->max_connections = GW_DEFAULT_MAX_CONNECTIONS;
    c->max_connections_per_client = GW_DEFAULT_MAX_CONNECTIONS_PER_CLIENT;
    c->max_buffered_bytes = GW_DEFAULT_MAX_BUFFERED_BYTES;
    c->responses_max_stored = GW_DEFAULT_RESPONSES_MAX;
    c->responses_max_bytes = GW_DEFAULT_RESPONSES_BYTES;
    c->responses_ttl_seconds = GW_DEFAULT_RESPONSES_TTL_S;
    c->media_fetch_timeout_ms = GW_DEFAULT_FETCH_TIMEOUT_MS;
    c->limits = sipp_schema_limits_default();
    c->media_decoded_budget = GW_MEDIA_DECODED_BUDGET_DEFAULT;
    c->max_speech_chars = GW_DEFAULT_MAX_SPEECH_CHARS;
}

void gw_config_free(gw_config *c) {
    if (!c) return;
    free(c->path);
    free(c->host);
    gw_cfg_free_strv(c->allowed_origins, c->n_allowed_origins);
    gw_cfg_free_strv(c->allowed_hosts, c->n_allowed_hosts);
    gw_cfg_free_strv(c->mcp_allowed_hosts, c->n_mcp_allowed_hosts);
    for (size_t i = 0; i < c->n_mcp; i++) {
        gw_mcp_config *m = &c->mcp[i];
        free(m->name);
        free(m->url);
        gw_cfg_free_strv(m->command, m->n_command);
        gw_cfg_free_strv(m->allowed_tools, m->n_allowed_tools);
        gw_cfg_free_strv(m->env, m->n_env);
    }
    free(c->mcp);
    for (size_t i = 0; i < c->n_tokens; i++) {
        gw_token_config *t = &c->tokens[i];
        free(t->env);
        free(t->caller);
        free(t->secret);
        gw_cfg_free_strv(t->targets, t->n_targets);
    }
    free(c->tokens);
    for (size_t i = 0; i < c->n_targets; i++)
        gw_target_config_free(&c->targets[i]);
    free(c->targets);
    free(c->models_dir);
    free(c->web_runtime_dir);
    free(c->slot_state_dir);
    free(c->slot_save_dir);
    memset(c, 0, sizeof *c);
}

void gw_target_config_free(gw_target_config *t) {
    free(t->name);
    free(t->model_path);
    free(t->backend);
    free(t->flash_attn);
    free(t->speculative);
    free(t->draft_model);
    free(t->mmproj);
    free(t->recipe);
    free(t->speaker);
    free(t->language);
    for (int i = 0; i < t->n_speakers; i++) {
        free(t->speaker_names[i]);
        free(t->speaker_paths[i]);
    }
    free(t->speaker_names);
    free(t->speaker_paths);
    free(t->voice);
    free(t->draft_cutoff);
    free(t->cache_type_k);
    free(t->cache_type_v);
    for (size_t i = 0; i < t->n_lora; i++)
        free(t->lora[i].path);
    free(t->lora);
    free(t->pooling);
    free(t->chat_template);
    free(t->rpc_servers);
    free(t->tensor_split);
    free(t->remote_model);
    free(t->api_key_env);
    gw_cfg_free_strv(t->base_urls, t->n_base_urls);
    gw_cfg_free_strv(t->aliases, t->n_aliases);
}

void gw_target_config_init(gw_target_config *t) {
    memset(t, 0, sizeof *t);
    t->backend = strdup("auto");
    t->parallel = sipp_engine_default_params().parallel;
    t->gpu_layers = sipp_model_default_params().gpu_layers;
    t->timeout_seconds = GW_DEFAULT_UPSTREAM_TIMEOUT_S;
    t->load = GW_LOAD_STARTUP;
    t->keep_alive_s = GW_KEEP_ALIVE_FOREVER;
    t->repack = true;
}

bool gw_parse_keep_alive(const char *s, int64_t *out) {
    static const struct {
        char unit;
        int64_t seconds;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}};
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < GW_KEEP_ALIVE_FOREVER || v > GW_MAX_KEEP_ALIVE_S) return false;
    if (v < 0 && *end) return false; /* "-1" only, without a unit */
    int64_t mul = 1;
    if (*end) {
        size_t i = 0;
        while (i < sizeof units / sizeof *units && units[i].unit != *end)
            i++;
        if (i == sizeof units / sizeof *units || end[1]) return false;
        mul = units[i].seconds;
    }
    if (v * mul > GW_MAX_KEEP_ALIVE_S) return false;
    *out = v < 0 ? GW_KEEP_ALIVE_FOREVER : v * mul;
    return true;
}

/* Each scope a token names must be a target. */
static void check_token_scopes(gw_cfg_ctx *x, const gw_config *c) {
    for (size_t i = 0; i < c->n_tokens; i++)
        for (size_t k = 0; k < c->tokens[i].n_targets; k++) {
            bool found = false;
            for (size_t j = 0; j < c->n_targets && !found; j++)
                found = strcmp(c->targets[j].name, c->tokens[i].targets[k]) == 0;
            if (!found)
                gw_cfg_err(x, c->tokens[i].line, "[[tokens]] '%s': targets names '%s', which is not a target",
                           c->tokens[i].caller, c->tokens[i].targets[k]);
        }
}

bool gw_config_parse(const char *text, size_t len, const char *path, gw_config *c, sipp_buf *errs) {
    gw_cfg_ctx x = {.file = path ? path : "<config>", .path = path, .where = "", .errs = errs, .ok = true};
    char terr[SIPP_ERROR_SIZE];
    toml_doc *doc = toml_parse(text, len, x.file, terr, sizeof terr);
    if (!doc) {
        sipp_buf_appendf(errs, "%s\n", terr);
        return false;
    }
    free(c->path);
    c->path = path ? strdup(path) : NULL;
    const toml_node *root = toml_root(doc);
    x.where = gw_config_file.name;
    gw_cfg_check_keys(&x, root, &gw_config_file);
    x.where = ""; /* a section's problems name the section */
    for (size_t i = 0; i < gw_config_file.n_keys; i++)
        gw_cfg_read_key(&x, root, &gw_config_file.keys[i], c);
    if (c->n_targets == 0)
        gw_cfg_err(&x, 0, "no [[targets]]: add at least one, e.g. name = \"tiny\" and model = \"tiny.gguf\"");
    if (c->rate_requests_per_minute > 0 && c->rate_burst == 0) c->rate_burst = c->rate_requests_per_minute;
    check_token_scopes(&x, c);
    toml_free(doc);
    return x.ok;
}

bool gw_config_reference(sipp_buf *out) { return gw_cfg_markdown(gw_config_sections, out); }

bool gw_config_load(const char *path, gw_config *c, sipp_buf *errs) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sipp_buf_appendf(errs, "%s: cannot open the config file: %s\n", path, strerror(errno));
        return false;
    }
    sipp_buf text = {0};
    char chunk[4096];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        ok = sipp_buf_append(&text, chunk, n) && text.len <= GW_CONFIG_MAX_FILE_BYTES;
    }
    if (ferror(f) || !ok) {
        sipp_buf_appendf(errs, "%s: cannot read the config file (or it is over %zu bytes)\n", path,
                         GW_CONFIG_MAX_FILE_BYTES);
        ok = false;
    }
    fclose(f);
    if (ok) ok = gw_config_parse(text.data ? text.data : "", text.len, path, c, errs);
    sipp_buf_free(&text);
    return ok;
}

char *gw_target_name_from_path(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base), sl = strlen(GW_MODEL_SUFFIX);
    if (n > sl && strcasecmp(base + n - sl, GW_MODEL_SUFFIX) == 0) n -= sl;
    return strndup(base, n);
}

/* A new local target at the end of c's, with the defaults; NULL when out of memory. */
static gw_target_config *add_target(gw_config *c) {
    gw_target_config *t = realloc(c->targets, (c->n_targets + 1) * sizeof *t);
    if (!t) return NULL;
    c->targets = t;
    gw_target_config *tc = &c->targets[c->n_targets++];
    gw_target_config_init(tc);
    tc->type = GW_TARGET_LOCAL;
    return tc;
}

bool gw_config_add_local(gw_config *c, const char *model_path, sipp_buf *errs) {
    gw_target_config *tc = add_target(c);
    if (!tc) return false;
    tc->name = gw_target_name_from_path(model_path);
    /* `sipp serve NAME` takes a store name as well as a path. */
    char found[PATH_MAX], err[SIPP_ERROR_SIZE];
    struct stat st;
    bool from_store =
        stat(model_path, &st) != 0 && sipp_store_resolve(model_path, found, sizeof found, err) == SIPP_OK;
    tc->model_path = strdup(from_store ? found : model_path);
    if (!tc->name || !*tc->name) {
        sipp_buf_appendf(errs, "MODEL '%s' has no file name to name the target after\n", model_path);
        return false;
    }
    return true;
}

bool gw_config_add_voice(gw_config *c, const char *voice, sipp_buf *errs) {
    for (size_t i = 0; i < c->n_targets; i++)
        if (strcmp(c->targets[i].name, GW_VOICE_TARGET) == 0) {
            sipp_buf_appendf(errs,
                             "--voice adds a target named '%s', and the configuration has one already; drop "
                             "--voice or rename that target\n",
                             GW_VOICE_TARGET);
            return false;
        }
    sipp_tts_params p = sipp_tts_default_params();
    p.model = "flite";
    p.voice = voice;
    sipp_tts *flite = NULL;
    char err[SIPP_ERROR_SIZE];
    if (sipp_tts_new(&p, &flite, err) != SIPP_OK) {
        sipp_buf_appendf(errs, "--voice: %s\n", err);
        return false;
    }
    sipp_tts_free(flite);
    gw_target_config *tc = add_target(c);
    if (!tc) return false;
    tc->name = strdup(GW_VOICE_TARGET);
    tc->recipe = strdup("flite");
    tc->voice = voice ? strdup(voice) : NULL;
    return tc->name && tc->recipe && (!voice || tc->voice);
}

bool gw_discoverable(const sipp_store_model *m) {
    const char *slash = strrchr(m->path, '/');
    return strncasecmp(slash ? slash + 1 : m->path, "mmproj", strlen("mmproj")) != 0;
}

bool gw_target_config_discovered(gw_target_config *tc, const char *name, const char *path,
                                 int64_t keep_alive_s) {
    gw_target_config_init(tc);
    tc->type = GW_TARGET_LOCAL;
    tc->load = GW_LOAD_ON_DEMAND;
    tc->keep_alive_s = keep_alive_s;
    tc->name = strdup(name);
    tc->model_path = strdup(path);
    return tc->name && tc->model_path && tc->backend;
}

bool gw_config_add_dir(gw_config *c, const char *dir, sipp_buf *errs) {
    char store[PATH_MAX], err[SIPP_ERROR_SIZE];
    if (!dir) {
        if (sipp_store_dir(store, sizeof store, err) != SIPP_OK) {
            sipp_buf_appendf(errs, "%s\n", err);
            return false;
        }
        dir = store;
    }
    sipp_store_model *models = NULL;
    size_t n = 0;
    if (sipp_store_list(dir, &models, &n, err) != SIPP_OK) {
        sipp_buf_appendf(errs, "models directory '%s': %s\n", dir, err);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        bool taken = false;
        for (size_t k = 0; k < c->n_targets && !taken; k++)
            taken = strcmp(c->targets[k].name, models[i].name) == 0;
        if (taken || !gw_discoverable(&models[i])) continue; /* a configured target of that name wins */
        if (!gw_models_dir_allows(dir, &models[i], c->models_follow_symlinks)) continue;
        gw_target_config *t = realloc(c->targets, (c->n_targets + 1) * sizeof *t);
        if (!t) {
            ok = false;
            break;
        }
        c->targets = t;
        ok = gw_target_config_discovered(&c->targets[c->n_targets++], models[i].name, models[i].path,
                                         c->discovered_keep_alive_s);
        c->targets[c->n_targets - 1].max_tokens = c->discovered_max_tokens;
    }
    sipp_store_list_free(models, n);
    gw_models_dir_report(dir);
    free(c->models_dir);
    c->models_dir = strdup(dir);
    ok = ok && c->models_dir;
    if (!ok) sipp_buf_appendf(errs, "out of memory listing '%s'\n", dir);
    return ok;
}

/* ---- what depends on the machine ---------------------------------------------------------------- */

bool gw_config_is_loopback(const char *host) {
    if (strcmp(host, "localhost") == 0) return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

/* Why a model file cannot be read, or NULL. */
static const char *file_problem(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return strerror(errno);
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (access(path, R_OK) != 0) return strerror(errno);
    return NULL;
}

/* mmproj = "auto": the one projector file in the model's directory, where llama.cpp's ecosystem
 * publishes it (mmproj-model-f16.gguf beside model.gguf; sipp_store_find_mmproj). None, or several,
 * is an error that says what to write instead. */
static void resolve_auto_mmproj(gw_cfg_ctx *x, int line, gw_target_config *t) {
    char path[PATH_MAX], err[SIPP_ERROR_SIZE];
    if (sipp_store_find_mmproj(t->model_path, path, sizeof path, err) == SIPP_OK)
        t->mmproj = strdup(path);
    else
        gw_cfg_err(x, line, "target '%s': mmproj = \"auto\": %s, or name its file: mmproj = \"FILE\"",
                   t->name, err);
}

/* Whether program runs: a path with a '/' (relative to dir, the config file's directory, where the
 * child starts) is an executable file; a bare name is one on PATH, as posix_spawnp finds it. */
static bool program_found(const char *program, const char *dir) {
    char path[PATH_MAX];
    if (strchr(program, '/')) {
        if (program[0] == '/' || !dir) return access(program, X_OK) == 0;
        snprintf(path, sizeof path, "%s/%s", dir, program);
        return access(path, X_OK) == 0;
    }
    const char *env = getenv("PATH");
    for (const char *p = env ? env : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(path, sizeof path, "%.*s/%s", (int)n, p, program);
        if (n && access(path, X_OK) == 0) return true;
        p += n + (p[n] == ':');
    }
    return false;
}

/* An [[mcp]] command's program can be started (it is not started here: --check runs nothing). */
static void validate_mcp(gw_cfg_ctx *x, const gw_config *c) {
    char dir[PATH_MAX] = "";
    if (c->path) {
        sipp_strlcpy(dir, c->path, sizeof dir);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            sipp_strlcpy(dir, ".", sizeof dir);
    }
    for (size_t i = 0; i < c->n_mcp; i++) {
        const gw_mcp_config *m = &c->mcp[i];
        if (m->n_command && !program_found(m->command[0], c->path ? dir : NULL))
            gw_cfg_err(
                x, c->path ? m->line : 0,
                "[[mcp]] '%s' command: program '%s' is not found (not on PATH, or not executable); install "
                "it or give its path",
                m->name, m->command[0]);
    }
}

/* A local target's recipe from its model file when it names none (a whisper.cpp model's ggml magic:
 * whispercpp), and a named one that the file contradicts; the keys only llama models take are
 * refused on a whisper target. */
static void detect_recipe(gw_cfg_ctx *x, int line, gw_target_config *t) {
    bool whisper = sipp_is_whisper_model(t->model_path);
    if (!t->recipe && whisper) t->recipe = sipp_strdup(WHISPER_RECIPE);
    bool named_whisper = t->recipe && strcmp(t->recipe, WHISPER_RECIPE) == 0;
    if (named_whisper && !whisper)
        gw_cfg_err(
            x, line,
            "target '%s': recipe = \"%s\" but '%s' is not a whisper.cpp model (no ggml magic at its start)",
            t->name, WHISPER_RECIPE, t->model_path);
    else if (!named_whisper && whisper)
        gw_cfg_err(x, line,
                   "target '%s': '%s' is a whisper.cpp model; set recipe = \"%s\" or leave recipe out",
                   t->name, t->model_path, WHISPER_RECIPE);
    const char *llama_only = t->mmproj || t->mmproj_auto ? "mmproj"
                             : t->draft_model            ? "draft_model"
                             : t->speculative            ? "speculative"
                                                         : NULL;
    if (named_whisper && whisper && llama_only)
        gw_cfg_err(x, line, "target '%s': %s is a key of llama models; a whisper.cpp model takes none",
                   t->name, llama_only);
}

/* Whether the projector at path is a speech pair's (Qwen3-TTS, Pocket TTS), from its header. */
static bool tts_projector(const char *path) {
    static const char *const types[] = {"qwen3tts", "pockettts"};
    sipp_gguf_info *info = calloc(1, sizeof *info);
    char err[SIPP_ERROR_SIZE];
    bool yes = false;
    if (info && sipp_gguf_inspect(path, info, err) == SIPP_OK)
        for (size_t i = 0; i < sizeof types / sizeof *types; i++)
            yes = yes || strncmp(info->projector_type, types[i], strlen(types[i])) == 0;
    free(info);
    return yes;
}

/* A speech pair's recipe from its projector when it names none (tts), and its speaker clip. */
static void speech_files(gw_cfg_ctx *x, int line, gw_target_config *t) {
    if (!t->recipe && t->mmproj && !file_problem(t->mmproj) && tts_projector(t->mmproj))
        t->recipe = strdup("tts");
    const char *why;
    if (t->speaker && (!t->recipe || strcmp(t->recipe, "tts") != 0))
        gw_cfg_err(x, line,
                   "target '%s': speaker is for a Qwen3-TTS / Pocket TTS pair (recipe = \"tts\"), and "
                   "its mmproj is not a speech projector",
                   t->name);
    else if (t->batch_frames && (!t->recipe || strcmp(t->recipe, "tts") != 0))
        gw_cfg_err(x, line,
                   "target '%s' batch_frames: only a recipe = \"tts\" pair (Qwen3-TTS) batches frames",
                   t->name);
    else if (t->speaker && (why = file_problem(t->speaker)))
        gw_cfg_err(x, line, "target '%s': speaker clip '%s' cannot be read (%s); check the path", t->name,
                   t->speaker, why);
    if (t->language &&
        (!t->recipe || (strcmp(t->recipe, "tts") != 0 && strcmp(t->recipe, "whispercpp") != 0)))
        gw_cfg_err(x, line,
                   "target '%s' language: only a speech target (recipe \"tts\" or \"whispercpp\") has one",
                   t->name);
    if (t->n_speakers && (!t->recipe || strcmp(t->recipe, "tts") != 0))
        gw_cfg_err(x, line, "target '%s' speakers: only a recipe = \"tts\" pair speaks in reference voices",
                   t->name);
    for (int i = 0; i < t->n_speakers; i++)
        if ((why = file_problem(t->speaker_paths[i])))
            gw_cfg_err(x, line, "target '%s': speakers.%s clip '%s' cannot be read (%s); check the path",
                       t->name, t->speaker_names[i], t->speaker_paths[i], why);
}

bool gw_config_validate(gw_config *c, sipp_buf *errs) {
    gw_cfg_ctx x = {.file = c->path ? c->path : "sipp serve", .where = "", .errs = errs, .ok = true};
    int line;
    validate_mcp(&x, c);
    for (size_t i = 0; i < c->n_targets; i++) {
        gw_target_config *t = &c->targets[i];
        line = c->path ? t->line : 0;
        if (t->type == GW_TARGET_LOCAL) {
            if (!t->model_path) continue; /* already reported where the target was parsed */
            const char *why = file_problem(t->model_path);
            if (why)
                gw_cfg_err(&x, line, "target '%s': model file '%s' cannot be read (%s); check the path",
                           t->name, t->model_path ? t->model_path : "", why);
            if (t->draft_model && (why = file_problem(t->draft_model)))
                gw_cfg_err(&x, line, "target '%s': draft_model file '%s' cannot be read (%s); check the path",
                           t->name, t->draft_model, why);
            if (!why) detect_recipe(&x, line, t);
            if (t->mmproj_auto && !t->mmproj) resolve_auto_mmproj(&x, line, t);
            if (t->mmproj && (why = file_problem(t->mmproj)))
                gw_cfg_err(&x, line, "target '%s': mmproj file '%s' cannot be read (%s); check the path",
                           t->name, t->mmproj, why);
            speech_files(&x, line, t);
            char berr[SIPP_ERROR_SIZE];
            if (sipp_backend_check_name(t->backend, berr) != SIPP_OK)
                gw_cfg_err(&x, line, "target '%s' backend: %s", t->name, berr);
        } else if (t->api_key_env && !getenv(t->api_key_env)) {
            gw_cfg_err(&x, line,
                       "target '%s': api_key_env names '%s', which is not set; export it with the "
                       "upstream's key",
                       t->name, t->api_key_env);
        }
    }
    for (size_t i = 0; i < c->n_tokens; i++) {
        gw_token_config *tk = &c->tokens[i];
        if (!tk->env) continue; /* already reported where the token was parsed */
        const char *v = getenv(tk->env);
        if (!v || !*v) {
            gw_cfg_err(&x, c->path ? tk->line : 0,
                       "[[tokens]] '%s': environment variable '%s' is not set (or empty); export it with the "
                       "bearer secret",
                       tk->caller, tk->env);
            continue;
        }
        if (strlen(v) < GW_MIN_TOKEN_SECRET) {
            gw_cfg_err(
                &x, c->path ? tk->line : 0,
                "[[tokens]] '%s': the secret in '%s' is %zu bytes; use at least %d (e.g. `openssl rand "
                "-hex 32`)",
                tk->caller, tk->env, strlen(v), GW_MIN_TOKEN_SECRET);
            continue;
        }
        free(tk->secret);
        tk->secret = strdup(v);
    }
    if (c->n_tokens == 0 && !c->allow_unauthenticated && !gw_config_is_loopback(c->host))
        gw_cfg_err(&x, 0,
                   "refusing to listen on %s without authentication: add [[tokens]], or set "
                   "allow_unauthenticated = true "
                   "in [server] (--allow-unauthenticated) if this network is trusted",
                   c->host);
    return x.ok;
}
