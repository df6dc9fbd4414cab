/*
 * catalog.c: reading the catalogs of models that `sipp pull NAME` knows.
 *
 * The format (one JSON object; docs/models.md has the long form):
 *
 *   {"version": 1, "models": [
 *     {"name": "qwen2.5-0.5b-instruct",              a store name (letters, digits, . _ -)
 *      "url": "hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf",
 *      "sha256": "74a4...",                          optional; a list, one per shard, for a split set
 *      "size": 491400032,                            optional; bytes of all files
 *      "labels": ["chat", "tool-calling"],           chat reasoning tool-calling embeddings reranking
 *                                                    vision coding transcription
 *      "backends": ["cpu", "vulkan", "cuda"],        optional; suggested, best first
 *      "ctx_size": 8192,                             optional; suggested context size
 *      "draft": "qwen2.5-0.5b-instruct",             optional; the catalog name of a draft model
 *                                                    for speculative decoding (sipp suggests it)
 *      "mmproj": "mmproj-model-f16.gguf",             optional; the multimodal projector, pulled with
 *                                                    the model: a URL, or a file name in the
 *                                                    directory of "url"
 *      "mmproj_sha256": "9c1e...",                   optional; the projector's digest
 *      "recipe": "whispercpp",                       optional; llamacpp (GGUF, the default) or
 *                                                    whispercpp (a whisper.cpp ggml .bin: one file,
 *                                                    no projector)
 *      "description": "...", "license": "..."}]}    optional
 *
 * Unknown keys are errors, as in every sipp configuration file: a misspelt "sha265" must not
 * silently turn verification off. A user catalog entry replaces a shipped one of the same name, so a
 * user can pin another quantisation under a familiar name.
 *
 * The shipped file is found without configuration in a build tree and in an install tree: the
 * executable (/proc/self/exe) or the library (dladdr) sits in build/bin or build/lib next to the
 * source's catalog/, or in PREFIX/bin or PREFIX/lib next to PREFIX/share/sipp/.
 */
#include "store/catalog.h"

#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/paths.h"
#include "store/source.h"
#include "util/sha256.h"
#include "util/util.h"

#define CATALOG_VERSION 1
#define CATALOG_FILE "catalog.json"
#define CTX_SIZE_MAX (1 << 24)
#define LOOKED_MAX 8
#define OOM_MESSAGE "out of memory reading the catalog"

static const char *const known_labels[] = {"chat",      "reasoning", "tool-calling", "embeddings",
                                           "reranking", "vision",    "coding",       "transcription"};
static const char *const known_keys[] = {"name",     "url",           "sha256",      "size",    "labels",
                                         "backends", "ctx_size",      "description", "license", "draft",
                                         "mmproj",   "mmproj_sha256", "recipe"};

bool sipp_catalog_label_valid(const char *label) {
    for (size_t i = 0; i < sizeof known_labels / sizeof known_labels[0]; i++)
        if (strcmp(label, known_labels[i]) == 0) return true;
    return false;
}

sipp_catalog *sipp_catalog_new(void) { return calloc(1, sizeof(sipp_catalog)); }

static void free_strings(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void entry_clear(sipp_catalog_entry *e) {
    free(e->name);
    free(e->description);
    free(e->url);
    free(e->license);
    free(e->draft);
    free(e->mmproj);
    free(e->mmproj_sha256);
    free(e->recipe);
    free_strings(e->sha256, e->n_sha256);
    free_strings(e->labels, e->n_labels);
    free_strings(e->backends, e->n_backends);
    memset(e, 0, sizeof *e);
}

void sipp_catalog_free(sipp_catalog *cat) {
    if (!cat) return;
    for (size_t i = 0; i < cat->n; i++)
        entry_clear(&cat->entries[i]);
    free(cat->entries);
    free(cat);
}

const sipp_catalog_entry *sipp_catalog_find(const sipp_catalog *cat, const char *name) {
    for (size_t i = 0; cat && i < cat->n; i++)
        if (strcmp(cat->entries[i].name, name) == 0) return &cat->entries[i];
    return NULL;
}

const sipp_catalog_entry *sipp_catalog_find_url(const sipp_catalog *cat, const char *url) {
    char mapped[SIPP_URL_MAX], shard1[SIPP_URL_MAX];
    /* a shard of a split set is found by its first shard */
    if (!sipp_split_sibling(url, 1, shard1, sizeof shard1)) sipp_strlcpy(shard1, url, sizeof shard1);
    for (size_t i = 0; cat && i < cat->n; i++)
        if (sipp_source_to_url(cat->entries[i].url, mapped, sizeof mapped, NULL) == SIPP_OK &&
            strcmp(mapped, shard1) == 0)
            return &cat->entries[i];
    return NULL;
}

/* Reads an array of strings; each must pass `check` when given. */
static bool string_list(json_t *v, char ***out, size_t *n, bool (*check)(const char *), const char **bad) {
    *out = NULL;
    *n = 0;
    *bad = NULL;
    if (!json_is_array(v)) return false;
    size_t count = json_array_size(v);
    char **list = calloc(count ? count : 1, sizeof *list);
    if (!list) return false;
    for (size_t i = 0; i < count; i++) {
        const char *s = json_string_value(json_array_get(v, i));
        if (!s || (check && !check(s))) {
            *bad = s ? s : "(not a string)";
            free_strings(list, i);
            return false;
        }
        list[i] = strdup(s);
    }
    *out = list;
    *n = count;
    return true;
}

static bool backend_ok(const char *name) { return sipp_backend_check_name(name, NULL) == SIPP_OK; }

static bool sha_ok(const char *s) { return sipp_sha256_valid(s); }

/* Every key of an entry is one the catalog knows: a typo is an error, not a field left out. */
static sipp_status check_keys(json_t *obj, const char *where, char *errbuf) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool known = false;
        for (size_t i = 0; i < sizeof known_keys / sizeof known_keys[0]; i++)
            known |= strcmp(key, known_keys[i]) == 0;
        if (!known)
            return sipp_fail(
                errbuf, SIPP_ERR_INVALID_ARGUMENT,
                "%s: unknown key '%s' (known: name, url, sha256, size, labels, backends, ctx_size, "
                "description, license, draft, mmproj, mmproj_sha256, recipe)",
                where, key);
    }
    return SIPP_OK;
}

/* The entry's name, URL (shard 1 of a split set, whose size goes to *n_files), description, license
 * and draft model. */
static sipp_status parse_identity(json_t *obj, sipp_catalog_entry *e, const char *where, int *n_files,
                                  char *errbuf) {
    const char *name = json_string_value(json_object_get(obj, "name"));
    if (!name || !sipp_name_valid(name))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s: \"name\" must be a model name (letters, digits, '.', '_', '-')", where);
    const char *url = json_string_value(json_object_get(obj, "url"));
    char mapped[SIPP_URL_MAX], err[SIPP_ERROR_SIZE];
    if (!url)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s ('%s'): \"url\" is missing", where, name);
    if (sipp_source_to_url(url, mapped, sizeof mapped, err) != SIPP_OK)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s ('%s'): %s", where, name, err);
    char file[SIPP_URL_MAX];
    sipp_url_file_name(mapped, file, sizeof file);
    sipp_split sp;
    *n_files = sipp_split_parse(file, &sp) ? sp.count : 1;
    if (*n_files > 1 && sp.index != 1)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s ('%s'): \"url\" of a split set must name shard 1", where, name);

    e->name = strdup(name);
    e->url = strdup(url);
    const char *s = json_string_value(json_object_get(obj, "description"));
    e->description = strdup(s ? s : "");
    s = json_string_value(json_object_get(obj, "license"));
    e->license = strdup(s ? s : "");
    json_t *draft = json_object_get(obj, "draft");
    s = json_string_value(draft);
    if (draft && (!s || !sipp_name_valid(s) || strcmp(s, name) == 0))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s ('%s'): \"draft\" must be the name of another catalog model", where, name);
    e->draft = strdup(s ? s : "");
    if (!e->name || !e->url || !e->description || !e->license || !e->draft)
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, OOM_MESSAGE);
    return SIPP_OK;
}

/* "sha256": one digest, or a list with one per file of the set. */
static sipp_status parse_sha256(json_t *obj, sipp_catalog_entry *e, const char *where, int n_files,
                                char *errbuf) {
    const char *bad;
    json_t *sha = json_object_get(obj, "sha256");
    if (json_is_string(sha)) {
        if (!sha_ok(json_string_value(sha)))
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s ('%s'): \"sha256\" is not 64 hex digits",
                             where, e->name);
        e->sha256 = calloc(1, sizeof *e->sha256);
        if (!e->sha256) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, OOM_MESSAGE);
        e->sha256[0] = malloc(SIPP_SHA256_HEX);
        if (!e->sha256[0]) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, OOM_MESSAGE);
        e->n_sha256 = 1;
        sipp_sha256_normalize(json_string_value(sha), e->sha256[0]);
    } else if (sha) {
        if (!string_list(sha, &e->sha256, &e->n_sha256, sha_ok, &bad))
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                             "%s ('%s'): \"sha256\" must be 64 hex digits or a list of them%s%s", where,
                             e->name, bad ? ", not " : "", bad ? bad : "");
        for (size_t i = 0; i < e->n_sha256; i++)
            sipp_sha256_normalize(e->sha256[i], e->sha256[i]);
    }
    if (e->n_sha256 && e->n_sha256 != (size_t)n_files)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s ('%s'): %zu sha256 values for %d file%s",
                         where, e->name, e->n_sha256, n_files, n_files == 1 ? "" : "s");
    return SIPP_OK;
}

/* "mmproj" (a URL, or a .gguf file name in the model URL's directory) and "mmproj_sha256", optional;
 * a digest without a projector is an error. */
static sipp_status parse_mmproj(json_t *obj, sipp_catalog_entry *e, const char *where, char *errbuf) {
    json_t *mm = json_object_get(obj, "mmproj"), *sha = json_object_get(obj, "mmproj_sha256");
    const char *url = json_string_value(mm), *digest = json_string_value(sha);
    char resolved[SIPP_URL_MAX], err[SIPP_ERROR_SIZE];
    if (mm && (!url || sipp_catalog_mmproj_url(e, url, resolved, sizeof resolved, err) != SIPP_OK))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s ('%s'): \"mmproj\" must be the projector's URL or a .gguf file name beside the "
                         "model's%s%s",
                         where, e->name, url ? ": " : "", url ? err : "");
    if (sha && (!digest || !sha_ok(digest)))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s ('%s'): \"mmproj_sha256\" is not 64 hex digits", where, e->name);
    if (sha && !mm)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s ('%s'): \"mmproj_sha256\" without \"mmproj\"",
                         where, e->name);
    e->mmproj = strdup(url ? url : "");
    e->mmproj_sha256 = malloc(SIPP_SHA256_HEX);
    if (!e->mmproj || !e->mmproj_sha256) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, OOM_MESSAGE);
    if (digest)
        sipp_sha256_normalize(digest, e->mmproj_sha256);
    else
        e->mmproj_sha256[0] = '\0';
    return SIPP_OK;
}

sipp_status sipp_catalog_mmproj_url(const sipp_catalog_entry *e, const char *mmproj, char *out, size_t cap,
                                    char *errbuf) {
    if (sipp_source_is_url(mmproj)) return sipp_source_to_url(mmproj, out, cap, errbuf);
    size_t n = strlen(mmproj), ext = strlen(".gguf");
    if (!n || strchr(mmproj, '/') || strchr(mmproj, '?') || strchr(mmproj, '#') || n <= ext ||
        strcmp(mmproj + n - ext, ".gguf") != 0 || strcmp(mmproj, "..") == 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is neither a URL nor a .gguf file name (no '/')", mmproj);
    char model[SIPP_URL_MAX];
    sipp_status st = sipp_source_to_url(e->url, model, sizeof model, errbuf);
    if (st != SIPP_OK) return st;
    char *slash = strrchr(model, '/');
    if (!slash)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the model URL '%s' has no directory", model);
    int w = snprintf(out, cap, "%.*s/%s", (int)(slash - model), model, mmproj);
    if (w < 0 || (size_t)w >= cap) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "URL too long");
    return SIPP_OK;
}

/* "recipe", optional (llamacpp, or whispercpp for a .bin URL): what runs the model. A whisper.cpp model
 * is one file without a projector. */
static sipp_status parse_recipe(json_t *obj, sipp_catalog_entry *e, const char *where, int n_files,
                                char *errbuf) {
    json_t *v = json_object_get(obj, "recipe");
    /* without one, a .bin file is taken for what whisper.cpp publishes under that extension */
    const char *dflt = sipp_source_is_whisper_file(e->url) ? SIPP_RECIPE_WHISPERCPP : SIPP_RECIPE_LLAMACPP;
    const char *recipe = v ? json_string_value(v) : dflt;
    if (!recipe || (strcmp(recipe, SIPP_RECIPE_LLAMACPP) != 0 && strcmp(recipe, SIPP_RECIPE_WHISPERCPP) != 0))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s ('%s'): \"recipe\" must be \"%s\" or \"%s\"",
                         where, e->name, SIPP_RECIPE_LLAMACPP, SIPP_RECIPE_WHISPERCPP);
    if (strcmp(recipe, SIPP_RECIPE_WHISPERCPP) == 0 && (n_files > 1 || *e->mmproj))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s ('%s'): a \"%s\" model is one .bin file: no split set, no \"mmproj\"", where,
                         e->name, SIPP_RECIPE_WHISPERCPP);
    if (!(e->recipe = strdup(recipe))) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, OOM_MESSAGE);
    return SIPP_OK;
}

/* "size", "labels", "backends" and "ctx_size", each optional. */
static sipp_status parse_details(json_t *obj, sipp_catalog_entry *e, const char *where, char *errbuf) {
    const char *name = e->name, *bad;
    json_t *size = json_object_get(obj, "size");
    if (size && (!json_is_integer(size) || json_integer_value(size) < 0))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s ('%s'): \"size\" must be a byte count", where,
                         name);
    e->size = (uint64_t)json_integer_value(size);

    json_t *labels = json_object_get(obj, "labels");
    if (labels && !string_list(labels, &e->labels, &e->n_labels, sipp_catalog_label_valid, &bad))
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "%s ('%s'): \"labels\" must list chat, reasoning, tool-calling, embeddings, reranking, "
            "vision, coding or transcription%s%s",
            where, name, bad ? ", not " : "", bad ? bad : "");
    json_t *backends = json_object_get(obj, "backends");
    if (backends && !string_list(backends, &e->backends, &e->n_backends, backend_ok, &bad))
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "%s ('%s'): \"backends\" must list backend names (auto, cpu, cuda, metal, vulkan, webgpu, "
            "rpc)%s%s",
            where, name, bad ? ", not " : "", bad ? bad : "");
    json_t *ctx = json_object_get(obj, "ctx_size");
    if (ctx &&
        (!json_is_integer(ctx) || json_integer_value(ctx) < 0 || json_integer_value(ctx) > CTX_SIZE_MAX))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s ('%s'): \"ctx_size\" must be a whole number in [0, %d]", where, name,
                         CTX_SIZE_MAX);
    e->ctx_size = (int)json_integer_value(ctx);
    return SIPP_OK;
}

/* Parses one entry of "models"; `where` names it in messages. */
static sipp_status parse_entry(json_t *obj, sipp_catalog_entry *e, const char *where, char *errbuf) {
    memset(e, 0, sizeof *e);
    if (!json_is_object(obj))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s is not an object", where);
    int n_files = 1;
    sipp_status st;
    if ((st = check_keys(obj, where, errbuf)) != SIPP_OK) return st;
    if ((st = parse_identity(obj, e, where, &n_files, errbuf)) != SIPP_OK) return st;
    if ((st = parse_sha256(obj, e, where, n_files, errbuf)) != SIPP_OK) return st;
    if ((st = parse_mmproj(obj, e, where, errbuf)) != SIPP_OK) return st;
    if ((st = parse_recipe(obj, e, where, n_files, errbuf)) != SIPP_OK) return st;
    return parse_details(obj, e, where, errbuf);
}

sipp_status sipp_catalog_parse(sipp_catalog *cat, const char *text, size_t len, const char *origin,
                               char *errbuf) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "catalog %s:%d:%d: %s", origin, jerr.line,
                         jerr.column, jerr.text);
    sipp_status st = SIPP_OK;
    json_t *version = json_object_get(root, "version");
    json_t *models = json_object_get(root, "models");
    const char *key;
    json_t *v;
    if (!json_is_object(root) || !json_is_array(models)) {
        st = sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                       "catalog %s: expected an object {\"version\": 1, \"models\": [...]}", origin);
        goto out;
    }
    json_object_foreach(root, key, v) {
        if (strcmp(key, "version") != 0 && strcmp(key, "models") != 0) {
            st = sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                           "catalog %s: unknown key '%s' (known: version, models)", origin, key);
            goto out;
        }
    }
    if (version && json_integer_value(version) != CATALOG_VERSION) {
        st = sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                       "catalog %s: version %lld is not supported (this sipp reads %d)", origin,
                       (long long)json_integer_value(version), CATALOG_VERSION);
        goto out;
    }
    size_t n = json_array_size(models);
    for (size_t i = 0; i < n; i++) {
        char where[PATH_MAX + 64];
        snprintf(where, sizeof where, "catalog %s: model #%zu", origin, i + 1);
        sipp_catalog_entry e;
        st = parse_entry(json_array_get(models, i), &e, where, errbuf);
        if (st != SIPP_OK) {
            entry_clear(&e);
            goto out;
        }
        e.origin = origin;
        sipp_catalog_entry *old = (sipp_catalog_entry *)sipp_catalog_find(cat, e.name);
        if (old) {
            entry_clear(old);
            *old = e;
            continue;
        }
        sipp_catalog_entry *bigger = realloc(cat->entries, (cat->n + 1) * sizeof *cat->entries);
        if (!bigger) {
            entry_clear(&e);
            st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory reading the catalog");
            goto out;
        }
        cat->entries = bigger;
        cat->entries[cat->n++] = e;
    }
out:
    json_decref(root);
    return st;
}

/* Reads a whole file; NULL with errno set on failure. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    sipp_buf b = {0};
    char chunk[8192];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!sipp_buf_append(&b, chunk, got)) {
            sipp_buf_free(&b);
            fclose(f);
            errno = ENOMEM;
            return NULL;
        }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        sipp_buf_free(&b);
        errno = EIO;
        return NULL;
    }
    if (!b.data && !sipp_buf_append(&b, "", 0)) return NULL;
    *len = b.len;
    return b.data;
}

static sipp_status parse_file(sipp_catalog *cat, const char *path, char *errbuf) {
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) return sipp_fail(errbuf, SIPP_ERR_IO, "cannot read catalog '%s': %s", path, strerror(errno));
    sipp_status s = sipp_catalog_parse(cat, text, len, path, errbuf);
    free(text);
    return s;
}

/* The directory of a file path, in place. */
static void dir_of(char *path) {
    char *slash = strrchr(path, '/');
    if (slash) *slash = '\0';
}

static bool exists(const char *path) { return access(path, R_OK) == 0; }

bool sipp_catalog_find_shipped(char *out, size_t cap) {
    const char *env = getenv("SIPP_CATALOG");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return exists(out);
    }
    char bases[2][PATH_MAX];
    int n_bases = 0;
    ssize_t n = readlink("/proc/self/exe", bases[0], sizeof bases[0] - 1);
    if (n > 0) {
        bases[0][n] = '\0';
        dir_of(bases[0]);
        n_bases++;
    }
    Dl_info info;
    if (dladdr((void *)sipp_catalog_find_shipped, &info) && info.dli_fname && info.dli_fname[0] == '/') {
        sipp_strlcpy(bases[n_bases], info.dli_fname, sizeof bases[n_bases]);
        dir_of(bases[n_bases]);
        if (n_bases == 0 || strcmp(bases[0], bases[n_bases]) != 0) n_bases++;
    }
    char looked[LOOKED_MAX][PATH_MAX];
    int n_looked = 0;
    static const char *const relative[] = {"../../catalog/" CATALOG_FILE, "../share/sipp/" CATALOG_FILE};
    for (int b = 0; b < n_bases; b++)
        for (size_t r = 0; r < sizeof relative / sizeof relative[0] && n_looked < LOOKED_MAX; r++) {
            char candidate[PATH_MAX * 2];
            if (!sipp_pathf(candidate, sizeof candidate, "%s/%s", bases[b], relative[r])) continue;
            char real[PATH_MAX];
            const char *p = realpath(candidate, real) ? real : candidate;
            sipp_strlcpy(looked[n_looked++], p, PATH_MAX);
            if (exists(p)) {
                snprintf(out, cap, "%s", p);
                return true;
            }
        }
    static const char *const system_paths[] = {"/usr/local/share/sipp/" CATALOG_FILE,
                                               "/usr/share/sipp/" CATALOG_FILE};
    for (size_t i = 0; i < sizeof system_paths / sizeof system_paths[0]; i++) {
        if (exists(system_paths[i])) {
            snprintf(out, cap, "%s", system_paths[i]);
            return true;
        }
        if (n_looked < LOOKED_MAX) sipp_strlcpy(looked[n_looked++], system_paths[i], PATH_MAX);
    }
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n_looked && used < cap; i++) {
        int w = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", looked[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    return false;
}

sipp_status sipp_catalog_load(sipp_catalog **out, char *errbuf) {
    *out = NULL;
    sipp_catalog *cat = sipp_catalog_new();
    if (!cat) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory reading the catalog");
    sipp_status s = SIPP_OK;
    char found[PATH_MAX];
    if (sipp_catalog_find_shipped(found, sizeof found)) {
        sipp_strlcpy(cat->shipped_path, found, sizeof cat->shipped_path);
        s = parse_file(cat, cat->shipped_path, errbuf);
    } else if (getenv("SIPP_CATALOG") && *getenv("SIPP_CATALOG")) {
        s = sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "SIPP_CATALOG names '%s', which does not exist",
                      getenv("SIPP_CATALOG"));
    }
    if (s == SIPP_OK &&
        (s = sipp_store_user_catalog(cat->user_path, sizeof cat->user_path, errbuf)) == SIPP_OK &&
        exists(cat->user_path)) {
        cat->user_exists = true;
        s = parse_file(cat, cat->user_path, errbuf);
    }
    if (s != SIPP_OK) {
        sipp_catalog_free(cat);
        return s;
    }
    *out = cat;
    return SIPP_OK;
}
