/*
 * store.c: the local model store (layout in store.h): where it is, its metadata files, listing,
 * removal, resolving a MODEL argument, and cached file hashes.
 *
 * Metadata is trusted no further than the store's own naming: the file names a NAME.json lists must
 * be exactly the names the store would give (NAME.gguf, or NAME-0000i-of-0000n.gguf in order), so a
 * hand-edited or hostile metadata file can never make `sipp models rm` delete anything else.
 *
 * Hashes are cached by (size, mtime in nanoseconds): a changed file changes at least one of them in
 * practice, and re-hashing a multi-gigabyte model on every `sipp models info` would make it useless.
 * Files in the store keep their hash in NAME.json (written by the pull, which hashed the bytes as
 * they arrived); other files go to .sha256-cache.json in the store directory, bounded in size.
 */
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/catalog.h"
#include "store/paths.h"
#include "store/whisper_file.h"
#include "util/util.h"

_Static_assert(SIPP_PATH_MAX >= PATH_MAX, "sipp.h's paths hold every path the store builds");

#define HASH_CACHE_FILE ".sha256-cache.json"
#define HASH_CACHE_MAX_ENTRIES 1024
#define META_VERSION 1
#define DIR_MODE 0755
#define FILE_MODE 0644
#define MMPROJ_NAME "mmproj" /* how a projector's file name starts */

sipp_status sipp_store_mkdirs(const char *dir, char *errbuf) {
    char path[PATH_MAX];
    if (strlen(dir) >= sizeof path)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "path '%s' is too long", dir);
    sipp_strlcpy(path, dir, sizeof path);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, DIR_MODE) != 0 && errno != EEXIST)
            return sipp_fail(errbuf, SIPP_ERR_IO, "cannot create directory '%s': %s", path, strerror(errno));
        *p = saved;
        if (!saved) break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sipp_fail(errbuf, SIPP_ERR_IO, "'%s' is not a directory", dir);
    return SIPP_OK;
}

sipp_status sipp_store_ensure(const char *dir, char *errbuf) {
    sipp_status s = sipp_store_mkdirs(dir, errbuf);
    if (s != SIPP_OK) return s;
    char partial[PATH_MAX];
    sipp_pathf(partial, sizeof partial, "%s/%s", dir, SIPP_STORE_PARTIAL_DIR);
    return sipp_store_mkdirs(partial, errbuf);
}

sipp_status sipp_store_write_atomic(const char *path, const char *data, size_t len, char *errbuf) {
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "path '%s' is too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, FILE_MODE);
    if (fd < 0) return sipp_fail(errbuf, SIPP_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return sipp_fail(errbuf, SIPP_ERR_IO, "cannot write '%s': %s", path, strerror(e));
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
    }
    return SIPP_OK;
}

void sipp_store_now(char out[SIPP_STORE_TIME_MAX]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, SIPP_STORE_TIME_MAX, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void sipp_store_model_clear(sipp_store_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_files; i++)
        free(m->files[i].url);
    free(m->files);
    if (m->mmproj) free(m->mmproj->url);
    free(m->mmproj);
    free(m->source);
    memset(m, 0, sizeof *m);
}

static int64_t mtime_ns(const struct stat *st) {
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + (int64_t)st->st_mtim.tv_nsec;
}

static const char *json_str(json_t *obj, const char *key) {
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/* One file's record of NAME.json into sf, whose name must be expect. */
static sipp_status meta_file(json_t *f, const char *expect, sipp_store_file *sf, const char *path,
                             const char *name, char *errbuf) {
    if (strcmp(json_str(f, "file"), expect) != 0)
        return sipp_fail(
            errbuf, SIPP_ERR_IO,
            "store metadata '%s' lists '%s' where '%s' belongs; remove it with: sipp models rm %s", path,
            json_str(f, "file"), expect, name);
    sipp_strlcpy(sf->file, expect, sizeof sf->file);
    sf->url = strdup(json_str(f, "url"));
    if (!sf->url) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory reading '%s'", path);
    sf->size = (uint64_t)json_integer_value(json_object_get(f, "size"));
    sf->mtime_ns = (int64_t)json_integer_value(json_object_get(f, "mtime_ns"));
    const char *h = json_str(f, "sha256");
    if (sipp_sha256_valid(h)) sipp_sha256_normalize(h, sf->sha256);
    return SIPP_OK;
}

/* Reads NAME.json. SIPP_ERR_NOT_FOUND when there is none. */
static sipp_status meta_read(const char *dir, const char *name, sipp_store_model *m, char *errbuf) {
    char path[PATH_MAX];
    sipp_pathf(path, sizeof path, "%s/%s%s", dir, name, SIPP_STORE_META_EXT);
    if (access(path, F_OK) != 0)
        return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "model '%s' is not in the store (%s)", name, dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return sipp_fail(errbuf, SIPP_ERR_IO,
                         "store metadata '%s' is unreadable (%s); remove it with: sipp models rm %s", path,
                         jerr.text, name);
    sipp_status st = SIPP_OK;
    json_t *files = json_object_get(root, "files");
    size_t n = json_array_size(files);
    memset(m, 0, sizeof *m);
    if (!json_is_object(root) || strcmp(json_str(root, "name"), name) != 0 || n == 0 || n > SIPP_SPLIT_MAX) {
        st = sipp_fail(errbuf, SIPP_ERR_IO,
                       "store metadata '%s' is not sipp's; remove it with: sipp models rm %s", path, name);
        goto out;
    }
    sipp_strlcpy(m->name, name, sizeof m->name);
    const char *recipe = json_str(root, "recipe");
    bool whisper = strcmp(recipe, SIPP_RECIPE_WHISPERCPP) == 0;
    if ((*recipe && !whisper && strcmp(recipe, SIPP_RECIPE_LLAMACPP) != 0) || (whisper && n != 1)) {
        st = sipp_fail(
            errbuf, SIPP_ERR_IO,
            "store metadata '%s' names recipe '%s' for %zu files, which sipp does not store; remove "
            "it with: sipp models rm %s",
            path, recipe, n, name);
        goto out;
    }
    sipp_strlcpy(m->recipe, whisper ? SIPP_RECIPE_WHISPERCPP : SIPP_RECIPE_LLAMACPP, sizeof m->recipe);
    m->source = strdup(json_str(root, "source"));
    sipp_strlcpy(m->pulled_at, json_str(root, "pulled_at"), sizeof m->pulled_at);
    m->verified = json_is_true(json_object_get(root, "sha256_verified"));
    m->managed = true;
    m->files = calloc(n, sizeof *m->files);
    if (!m->source || !m->files) {
        st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory reading '%s'", path);
        goto out;
    }
    m->n_files = (int)n;
    for (size_t i = 0; i < n; i++) {
        sipp_store_file *sf = &m->files[i];
        char expect[sizeof sf->file];
        if (whisper)
            sipp_store_whisper_file_name(name, expect, sizeof expect);
        else
            sipp_store_file_name(name, (int)i + 1, (int)n, expect, sizeof expect);
        if ((st = meta_file(json_array_get(files, i), expect, sf, path, name, errbuf)) != SIPP_OK) goto out;
        m->size += sf->size;
    }
    json_t *mm = json_object_get(root, "mmproj");
    if (json_is_object(mm)) { /* the projector pulled with it */
        char expect[sizeof m->files[0].file];
        sipp_store_mmproj_file_name(name, expect, sizeof expect);
        if (!(m->mmproj = calloc(1, sizeof *m->mmproj))) {
            st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory reading '%s'", path);
            goto out;
        }
        if ((st = meta_file(mm, expect, m->mmproj, path, name, errbuf)) != SIPP_OK) goto out;
    }
    sipp_pathf(m->path, sizeof m->path, "%s/%s", dir, m->files[0].file);
out:
    json_decref(root);
    if (st != SIPP_OK) sipp_store_model_clear(m);
    return st;
}

static json_t *meta_file_json(const sipp_store_file *f) {
    return json_pack("{s:s, s:s, s:I, s:I, s:s}", "file", f->file, "url", f->url ? f->url : "", "size",
                     (json_int_t)f->size, "mtime_ns", (json_int_t)f->mtime_ns, "sha256", f->sha256);
}

sipp_status sipp_store_meta_write(const char *dir, const sipp_store_model *m, char *errbuf) {
    json_t *files = json_array();
    for (int i = 0; files && i < m->n_files; i++)
        json_array_append_new(files, meta_file_json(&m->files[i]));
    json_t *root = json_pack("{s:i, s:s, s:s, s:s, s:b, s:o}", "version", META_VERSION, "name", m->name,
                             "source", m->source ? m->source : "", "pulled_at", m->pulled_at,
                             "sha256_verified", m->verified, "files", files);
    if (root && m->mmproj) json_object_set_new(root, "mmproj", meta_file_json(m->mmproj));
    /* written for a whisper.cpp model only: metadata without it is a GGUF model's, as before */
    if (root && strcmp(m->recipe, SIPP_RECIPE_WHISPERCPP) == 0)
        json_object_set_new(root, "recipe", json_string(m->recipe));
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!text)
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory writing the metadata of '%s'", m->name);
    char path[PATH_MAX];
    sipp_pathf(path, sizeof path, "%s/%s%s", dir, m->name, SIPP_STORE_META_EXT);
    size_t len = strlen(text);
    sipp_buf b = {0};
    bool ok = sipp_buf_append(&b, text, len) && sipp_buf_append(&b, "\n", 1);
    free(text);
    sipp_status s = ok ? sipp_store_write_atomic(path, b.data, b.len, errbuf)
                       : sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory writing '%s'", path);
    sipp_buf_free(&b);
    return s;
}

/* A bare model's projector: mmproj-NAME.gguf beside it, put there by hand too. */
static sipp_status bare_mmproj(const char *dir, sipp_store_model *m, char *errbuf) {
    char file[SIPP_NAME_MAX + 32], path[PATH_MAX];
    struct stat st;
    sipp_store_mmproj_file_name(m->name, file, sizeof file);
    if (!sipp_pathf(path, sizeof path, "%s/%s", dir, file) || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return SIPP_OK;
    if (!(m->mmproj = calloc(1, sizeof *m->mmproj)) || !(m->mmproj->url = strdup(""))) {
        sipp_store_model_clear(m);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    sipp_strlcpy(m->mmproj->file, file, sizeof m->mmproj->file);
    m->mmproj->size = (uint64_t)st.st_size;
    m->mmproj->mtime_ns = mtime_ns(&st);
    return SIPP_OK;
}

/* The files of a bare model: 1 for NAME.gguf, n for a split set NAME-00001-of-0000n.gguf, 1 with *whisper
 * for NAME.bin with a whisper.cpp header; 0 when there is none. */
static int bare_files(const char *dir, const char *name, bool *whisper) {
    char file[SIPP_NAME_MAX + 32], path[PATH_MAX], ignored[SIPP_ERROR_SIZE];
    struct stat st;
    int count = 0;
    *whisper = false;
    sipp_store_file_name(name, 1, 1, file, sizeof file);
    sipp_pathf(path, sizeof path, "%s/%s", dir, file);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return 1;
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t nlen = strlen(name);
    sipp_split sp;
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, name, nlen) == 0 && sipp_split_parse(e->d_name, &sp) &&
            sp.prefix_len == nlen && sp.index == 1) {
            count = sp.count;
            break;
        }
    if (d) closedir(d);
    if (count) return count;
    sipp_store_whisper_file_name(name, file, sizeof file);
    sipp_pathf(path, sizeof path, "%s/%s", dir, file);
    sipp_whisper_hparams h;
    uint64_t bytes;
    *whisper = stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
               sipp_whisper_header_read(path, &h, &bytes, ignored) == SIPP_OK;
    return *whisper ? 1 : 0;
}

/* A bare model: NAME.gguf, a split set NAME-00001-of-0000n.gguf with all its shards, or a whisper.cpp
 * model NAME.bin, put in the store by hand. */
static sipp_status bare_lookup(const char *dir, const char *name, sipp_store_model *m, char *errbuf) {
    struct stat st;
    bool whisper;
    int count = bare_files(dir, name, &whisper);
    if (count == 0)
        return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "model '%s' is not in the store (%s)", name, dir);
    memset(m, 0, sizeof *m);
    m->files = calloc((size_t)count, sizeof *m->files);
    m->source = strdup("");
    if (!m->files || !m->source) {
        sipp_store_model_clear(m);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    sipp_strlcpy(m->name, name, sizeof m->name);
    sipp_strlcpy(m->recipe, whisper ? SIPP_RECIPE_WHISPERCPP : SIPP_RECIPE_LLAMACPP, sizeof m->recipe);
    m->n_files = count;
    for (int i = 0; i < count; i++) {
        sipp_store_file *f = &m->files[i];
        if (whisper)
            sipp_store_whisper_file_name(name, f->file, sizeof f->file);
        else
            sipp_store_file_name(name, i + 1, count, f->file, sizeof f->file);
        f->url = strdup("");
        char path[PATH_MAX];
        sipp_pathf(path, sizeof path, "%s/%s", dir, f->file);
        if (stat(path, &st) == 0) {
            f->size = (uint64_t)st.st_size;
            f->mtime_ns = mtime_ns(&st);
        }
        m->size += f->size;
    }
    sipp_pathf(m->path, sizeof m->path, "%s/%s", dir, m->files[0].file);
    return whisper ? SIPP_OK : bare_mmproj(dir, m, errbuf);
}

sipp_status sipp_store_lookup(const char *dir, const char *name, sipp_store_model *out, char *errbuf) {
    if (!sipp_name_valid(name))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is not a model name (letters, digits, '.', '_', '-'; at most %d bytes)", name,
                         SIPP_NAME_MAX);
    sipp_status s = meta_read(dir, name, out, errbuf);
    if (s != SIPP_ERR_NOT_FOUND) return s;
    return bare_lookup(dir, name, out, errbuf);
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const sipp_store_model *)a)->name, ((const sipp_store_model *)b)->name);
}

static bool listed(const sipp_store_model *models, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(models[i].name, name) == 0) return true;
    return false;
}

/* The directory a public call names: dir, or the default store when dir is NULL. */
static const char *store_dir_or_default(const char *dir, char buf[PATH_MAX], char *errbuf) {
    if (dir) return dir;
    return sipp_store_dir(buf, PATH_MAX, errbuf) == SIPP_OK ? buf : NULL;
}

/* The models a listing has found so far. */
typedef struct {
    sipp_store_model *models;
    size_t n, cap;
} model_list;

/* The model a directory entry names in a pass of the listing: NAME.json in the first, NAME.gguf or
 * shard 1 of NAME-0000i-of-0000n.gguf in the second, NAME.bin (a whisper.cpp model, when its header
 * says so) in the third. False for any other entry. */
#define LIST_PASSES 3
static bool entry_model_name(const char *fn, int pass, char name[SIPP_NAME_MAX + 1]) {
    static const char *const exts[LIST_PASSES] = {SIPP_STORE_META_EXT, ".gguf", SIPP_STORE_WHISPER_EXT};
    size_t len = strlen(fn);
    const char *ext = exts[pass];
    size_t elen = strlen(ext);
    if (fn[0] == '.' || len <= elen || strcmp(fn + len - elen, ext) != 0) return false;
    /* a bare projector (mmproj*.gguf) is no model: it goes with one (sipp_store_find_mmproj) */
    if (pass == 1 && strncasecmp(fn, MMPROJ_NAME, strlen(MMPROJ_NAME)) == 0) return false;
    size_t stem = len - elen;
    sipp_split sp;
    if (pass == 1 && sipp_split_parse(fn, &sp)) {
        if (sp.index != 1) return false;
        stem = sp.prefix_len;
    }
    if (stem > SIPP_NAME_MAX) return false;
    memcpy(name, fn, stem);
    name[stem] = '\0';
    return sipp_name_valid(name);
}

/* One pass over the store's directory, adding each model it names that is not listed yet. */
static sipp_status list_pass(DIR *d, const char *dir, int pass, model_list *l, char *errbuf) {
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char name[SIPP_NAME_MAX + 1];
        if (!entry_model_name(e->d_name, pass, name) || listed(l->models, l->n, name)) continue;
        if (l->n == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 16;
            sipp_store_model *bigger = realloc(l->models, cap * sizeof *l->models);
            if (!bigger) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory listing the store");
            l->models = bigger;
            l->cap = cap;
        }
        char ignored[SIPP_ERROR_SIZE];
        /* A metadata file that does not parse is skipped here; `models info NAME` reports it. */
        sipp_status s = pass == 0 ? meta_read(dir, name, &l->models[l->n], ignored)
                                  : bare_lookup(dir, name, &l->models[l->n], ignored);
        if (s == SIPP_OK) l->n++;
    }
    return SIPP_OK;
}

sipp_status sipp_store_list(const char *dir, sipp_store_model **out, size_t *n_out, char *errbuf) {
    *out = NULL;
    *n_out = 0;
    char dflt[PATH_MAX];
    if (!(dir = store_dir_or_default(dir, dflt, errbuf))) return SIPP_ERR_INVALID_ARGUMENT;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return SIPP_OK; /* no store yet: nothing in it */
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot read the model store '%s': %s", dir, strerror(errno));
    }
    model_list l = {NULL, 0, 0};
    sipp_status st = SIPP_OK;
    /* Models with metadata first, so that their files are not listed again as bare. */
    for (int pass = 0; pass < LIST_PASSES && st == SIPP_OK; pass++)
        st = list_pass(d, dir, pass, &l, errbuf);
    closedir(d);
    if (st != SIPP_OK) {
        sipp_store_list_free(l.models, l.n);
        return st;
    }
    if (l.n) qsort(l.models, l.n, sizeof *l.models, by_name);
    *out = l.models;
    *n_out = l.n;
    return SIPP_OK;
}

void sipp_store_list_free(sipp_store_model *models, size_t n) {
    for (size_t i = 0; i < n; i++)
        sipp_store_model_clear(&models[i]);
    free(models);
}

/* True when a partial/ entry belongs to model `name`: NAME.gguf.part[.json], a shard of NAME, or its
 * projector's mmproj-NAME.gguf.part[.json]. */
static bool partial_of(const char *entry, const char *name) {
    size_t plen = strlen(SIPP_STORE_MMPROJ_PREFIX);
    if (strncmp(entry, SIPP_STORE_MMPROJ_PREFIX, plen) == 0 && partial_of(entry + plen, name)) {
        sipp_split sp;
        char file[SIPP_NAME_MAX + 64];
        sipp_strlcpy(file, entry + plen, sizeof file);
        *strstr(file, SIPP_STORE_PART_EXT) = '\0';
        if (!sipp_split_parse(file, &sp)) return true; /* a projector is one file */
    }
    size_t nlen = strlen(name);
    if (strncmp(entry, name, nlen) != 0) return false;
    char file[SIPP_NAME_MAX + 64];
    sipp_strlcpy(file, entry, sizeof file);
    char *part = strstr(file, SIPP_STORE_PART_EXT);
    if (!part || (strcmp(part, SIPP_STORE_PART_EXT) != 0 && strcmp(part, SIPP_STORE_PART_EXT ".json") != 0))
        return false;
    *part = '\0';
    sipp_split sp;
    if (sipp_split_parse(file, &sp)) return sp.prefix_len == nlen;
    return strcmp(file + nlen, ".gguf") == 0 || strcmp(file + nlen, SIPP_STORE_WHISPER_EXT) == 0;
}

sipp_status sipp_store_remove(const char *dir, const char *name, char *errbuf) {
    char dflt[PATH_MAX];
    if (!(dir = store_dir_or_default(dir, dflt, errbuf))) return SIPP_ERR_INVALID_ARGUMENT;
    sipp_store_model m;
    sipp_status s = sipp_store_lookup(dir, name, &m, errbuf);
    if (s != SIPP_OK && s != SIPP_ERR_NOT_FOUND) return s;
    bool found = s == SIPP_OK;
    char path[PATH_MAX];
    if (found) {
        /* The metadata goes first: from then on the model is not listed, whatever is left. */
        if (m.managed) {
            sipp_pathf(path, sizeof path, "%s/%s%s", dir, name, SIPP_STORE_META_EXT);
            if (unlink(path) != 0 && errno != ENOENT) {
                s = sipp_fail(errbuf, SIPP_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
                sipp_store_model_clear(&m);
                return s;
            }
        }
        for (int i = 0; i <= m.n_files; i++) {
            const sipp_store_file *f = i < m.n_files ? &m.files[i] : m.mmproj; /* its projector last */
            if (!f) break;
            sipp_pathf(path, sizeof path, "%s/%s", dir, f->file);
            if (unlink(path) != 0 && errno != ENOENT) {
                s = sipp_fail(errbuf, SIPP_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
                sipp_store_model_clear(&m);
                return s;
            }
        }
        sipp_store_model_clear(&m);
    }
    sipp_pathf(path, sizeof path, "%s/%s", dir, SIPP_STORE_PARTIAL_DIR);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!partial_of(e->d_name, name)) continue;
        char part[PATH_MAX];
        sipp_pathf(part, sizeof part, "%s/%s", path, e->d_name);
        if (unlink(part) == 0) found = true;
    }
    if (d) closedir(d);
    if (!found)
        return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND,
                         "model '%s' is not in the store (%s); see sipp models list", name, dir);
    return SIPP_OK;
}

static sipp_status copy_path(const char *path, char *out, size_t cap, char *errbuf) {
    if (strlen(path) >= cap)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "model path '%s' is too long", path);
    sipp_strlcpy(out, path, cap);
    return SIPP_OK;
}

sipp_status sipp_store_resolve(const char *name_or_path, char *path_out, size_t cap, char *errbuf) {
    if (!name_or_path || !*name_or_path)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model given");
    struct stat st;
    bool exists = stat(name_or_path, &st) == 0;
    /* A file is what the user meant. Something else that exists (a directory) is too, unless the
     * store has a model of that name; the loader says what is wrong with it. */
    if (exists && (S_ISREG(st.st_mode) || !sipp_name_valid(name_or_path))) {
        return copy_path(name_or_path, path_out, cap, errbuf);
    }
    if (!sipp_name_valid(name_or_path))
        return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "model '%s': no such file (and it is not a store name)",
                         name_or_path);
    char dir[PATH_MAX];
    sipp_status s = sipp_store_dir(dir, sizeof dir, errbuf);
    if (s != SIPP_OK) return s;
    sipp_store_model m;
    char err[SIPP_ERROR_SIZE];
    s = sipp_store_lookup(dir, name_or_path, &m, err);
    if (s == SIPP_OK) {
        if (stat(m.path, &st) != 0) {
            s = sipp_fail(errbuf, SIPP_ERR_NOT_FOUND,
                          "model '%s' in the store is incomplete (%s is missing); pull it again",
                          name_or_path, m.path);
        } else {
            s = copy_path(m.path, path_out, cap, errbuf);
        }
        sipp_store_model_clear(&m);
        return s;
    }
    if (s != SIPP_ERR_NOT_FOUND) {
        if (errbuf) sipp_strlcpy(errbuf, err, SIPP_ERROR_SIZE);
        return s;
    }
    if (exists) { /* not in the store either: the path it is */
        return copy_path(name_or_path, path_out, cap, errbuf);
    }
    sipp_catalog *cat = NULL;
    char cat_err[SIPP_ERROR_SIZE];
    bool known = sipp_catalog_load(&cat, cat_err) == SIPP_OK && sipp_catalog_find(cat, name_or_path) != NULL;
    sipp_catalog_free(cat);
    if (known)
        return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND,
                         "model '%s' is not a file and not in the store (%s); pull it with: sipp pull %s",
                         name_or_path, dir, name_or_path);
    return sipp_fail(
        errbuf, SIPP_ERR_NOT_FOUND,
        "model '%s' is not a file and not in the store (%s); pull it with: sipp pull URL --name %s "
        "(sipp models list --all shows the catalog)",
        name_or_path, dir, name_or_path);
}

/* ---- cached hashes ---------------------------------------------------------------------------- */

/* If `path` is a file of a managed model in the store, the model's name, the file's index and its name. */
static bool store_file_of(const char *dir, const char *path, char name[SIPP_NAME_MAX + 1], int *index,
                          char base[SIPP_NAME_MAX + 32]) {
    char real_dir[PATH_MAX], real_path[PATH_MAX];
    if (!realpath(dir, real_dir) || !realpath(path, real_path)) return false;
    size_t dlen = strlen(real_dir);
    if (strncmp(real_path, real_dir, dlen) != 0 || real_path[dlen] != '/') return false;
    const char *file = real_path + dlen + 1;
    if (strchr(file, '/')) return false;
    size_t len = strlen(file);
    sipp_strlcpy(base, file, SIPP_NAME_MAX + 32);
    sipp_split sp;
    size_t stem;
    if (sipp_split_parse(file, &sp)) {
        stem = sp.prefix_len;
        *index = sp.index - 1;
    } else if (len > 5 && strcmp(file + len - 5, ".gguf") == 0) {
        stem = len - 5;
        *index = 0;
    } else if (len > strlen(SIPP_STORE_WHISPER_EXT) &&
               strcmp(file + len - strlen(SIPP_STORE_WHISPER_EXT), SIPP_STORE_WHISPER_EXT) == 0) {
        stem = len - strlen(SIPP_STORE_WHISPER_EXT);
        *index = 0;
    } else {
        return false;
    }
    if (stem > SIPP_NAME_MAX) return false;
    memcpy(name, file, stem);
    name[stem] = '\0';
    return sipp_name_valid(name);
}

static sipp_status cache_in_meta(const char *dir, const char *path, const struct stat *st,
                                 char hex[SIPP_SHA256_HEX], bool *cached, bool *handled, char *errbuf) {
    char name[SIPP_NAME_MAX + 1], base[SIPP_NAME_MAX + 32];
    int index;
    *handled = false;
    sipp_store_model m;
    char ignored[SIPP_ERROR_SIZE];
    if (!store_file_of(dir, path, name, &index, base) || meta_read(dir, name, &m, ignored) != SIPP_OK)
        return SIPP_OK;
    sipp_status s = SIPP_OK;
    if (index < m.n_files && strcmp(m.files[index].file, base) == 0) { /* NAME.bin beside NAME.gguf: not it */
        *handled = true;
        sipp_store_file *f = &m.files[index];
        if (f->sha256[0] && f->size == (uint64_t)st->st_size && f->mtime_ns == mtime_ns(st)) {
            memcpy(hex, f->sha256, SIPP_SHA256_HEX);
            *cached = true;
        } else if ((s = sipp_sha256_file(path, hex, errbuf)) == SIPP_OK) {
            /* a file whose bytes changed since the pull no longer matches what was verified */
            if (strcmp(f->sha256, hex) != 0) m.verified = false;
            memcpy(f->sha256, hex, SIPP_SHA256_HEX);
            f->size = (uint64_t)st->st_size;
            f->mtime_ns = mtime_ns(st);
            char werr[SIPP_ERROR_SIZE];
            sipp_store_meta_write(dir, &m, werr); /* a read-only store still gets its answer */
        }
    }
    sipp_store_model_clear(&m);
    return s;
}

static sipp_status cache_in_file(const char *dir, const char *path, const struct stat *st,
                                 char hex[SIPP_SHA256_HEX], bool *cached, char *errbuf) {
    char real_path[PATH_MAX], cache_path[PATH_MAX];
    if (!realpath(path, real_path)) return sipp_sha256_file(path, hex, errbuf);
    sipp_pathf(cache_path, sizeof cache_path, "%s/%s", dir, HASH_CACHE_FILE);
    json_t *root = json_load_file(cache_path, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        root = json_object();
    }
    json_t *files = json_object_get(root, "files");
    if (!json_is_object(files)) {
        files = json_object();
        json_object_set_new(root, "files", files);
    }
    json_t *e = json_object_get(files, real_path);
    const char *h = json_str(e, "sha256");
    if (sipp_sha256_valid(h) &&
        (uint64_t)json_integer_value(json_object_get(e, "size")) == (uint64_t)st->st_size &&
        json_integer_value(json_object_get(e, "mtime_ns")) == mtime_ns(st)) {
        sipp_sha256_normalize(h, hex);
        *cached = true;
        json_decref(root);
        return SIPP_OK;
    }
    sipp_status s = sipp_sha256_file(path, hex, errbuf);
    if (s == SIPP_OK && (json_object_size(files) < HASH_CACHE_MAX_ENTRIES || e)) {
        json_object_set_new(files, real_path,
                            json_pack("{s:I, s:I, s:s}", "size", (json_int_t)st->st_size, "mtime_ns",
                                      (json_int_t)mtime_ns(st), "sha256", hex));
        char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
        char werr[SIPP_ERROR_SIZE];
        if (text && sipp_store_mkdirs(dir, werr) == SIPP_OK)
            sipp_store_write_atomic(cache_path, text, strlen(text), werr);
        free(text);
    }
    json_decref(root);
    return s;
}

sipp_status sipp_store_file_sha256(const char *path, char hex[SIPP_SHA256_HEX], bool *cached, char *errbuf) {
    bool reused_ignored;
    if (!cached) cached = &reused_ignored;
    *cached = false;
    struct stat st;
    if (stat(path, &st) != 0)
        return sipp_fail(errbuf, errno == ENOENT ? SIPP_ERR_NOT_FOUND : SIPP_ERR_IO, "cannot open '%s': %s",
                         path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "'%s' is not a file", path);
    char dir[PATH_MAX];
    char ignored[SIPP_ERROR_SIZE];
    if (sipp_store_dir(dir, sizeof dir, ignored) != SIPP_OK) return sipp_sha256_file(path, hex, errbuf);
    bool handled;
    sipp_status s = cache_in_meta(dir, path, &st, hex, cached, &handled, errbuf);
    if (s != SIPP_OK || handled) return s;
    return cache_in_file(dir, path, &st, hex, cached, errbuf);
}
