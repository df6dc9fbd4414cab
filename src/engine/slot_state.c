/*
 * slot_state.c: the KV of context-keyed conversations kept on disk while their model is unloaded.
 *
 * When a gateway unloads an idle model (residency), the slots that hold a context_key's conversation
 * would lose the history they have read; the next turn would read it all again. sipp_engine_save_slots
 * writes each such slot to one file, and sipp_engine_restore_slots puts them back into the slots of
 * the next engine of the same model, so that the next request with that key reuses the KV as if the
 * model had stayed loaded (cached_tokens).
 *
 * A file holds a header, the key, the tokens whose KV it holds (the slot's token list, which prefix
 * reuse compares with the next prompt), and the sequence state as llama_state_seq_get_data writes it.
 * The header carries the identity of the model file: a SHA-256 over its path, size, modification
 * time (ns), device and inode, and the loaded model's parameter count, vocabulary size and
 * description. A file that changed (a new download at the same path), or another model, never
 * matches, and llama.cpp refuses a state of another shape itself. Hashing the file's bytes would be
 * stronger than its metadata, but would read gigabytes at every unload.
 *
 * Names: PATHHASH-KEYHASH.slot (the first 16 hex digits of SHA-256 of the model path and of the
 * key), so that a restore reads only the files of its own model path, and a later save of one key
 * replaces the earlier one. Each file is written to a temporary name and renamed, so that a reader
 * never sees half a file. Every file of this model path that a restore reads is removed afterwards,
 * restored or refused (stale). A save first removes the oldest files of the directory until it holds
 * fewer than SIPP_SLOT_STATE_MAX_FILES and, with the new file, at most max_bytes.
 *
 * One slot is saved to, restored from and erased by a file the caller names too (llama-server's
 * /slots/ID?action=...): the same file format, a slot without a key included.
 *
 * Every call runs on an engine that nothing is using: under engine->mu, once the engine thread is
 * parked waiting for work (engine.c sets parked), with no request queued or in a slot.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/slot.h"
#include "engine/state.h"
#include "model/model.h"

#define MAGIC "SIPPSLT1"
#define MAGIC_SIZE 8
#define FORMAT_VERSION 1
#define NAME_HASH_DIGITS 16
#define SUFFIX ".slot"
#define TMP_SUFFIX ".tmp"
#define PARK_WAIT_MS 5000 /* bound on waiting for the engine thread to finish its last step */
#define PARK_SLICE_MS 10
#define MAX_KEY_BYTES 4096
#define NAME_SIZE (NAME_HASH_DIGITS * 2 + 16)

typedef struct file_header {
    char magic[MAGIC_SIZE];
    uint32_t version;
    uint32_t key_bytes;
    uint32_t n_tokens;
    uint32_t reserved;
    uint64_t state_bytes;
    char identity[SIPP_SHA256_HEX];
} file_header;

/* ---- names and identity ------------------------------------------------------------------------- */

static bool short_hash(const char *text, char out[NAME_HASH_DIGITS + 1]) {
    char hex[SIPP_SHA256_HEX];
    if (!sipp_sha256_hex(text, strlen(text), hex)) return false;
    memcpy(out, hex, NAME_HASH_DIGITS);
    out[NAME_HASH_DIGITS] = '\0';
    return true;
}

/* What a file's state belongs to: the model file as it is now, and the model loaded from it. */
static bool model_identity(const sipp_model *m, char hex[SIPP_SHA256_HEX]) {
    struct stat st;
    if (stat(m->path, &st) != 0) return false;
    char text[PATH_MAX + 512];
    int n = snprintf(text, sizeof text, "%s|%lld|%lld.%09ld|%llu|%llu|%" PRIu64 "|%d|%s", m->path,
                     (long long)st.st_size, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec,
                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, m->info.n_params,
                     m->info.n_vocab, m->info.description);
    return n > 0 && (size_t)n < sizeof text && sipp_sha256_hex(text, (size_t)n, hex);
}

/* ---- waiting for an idle engine ----------------------------------------------------------------- */

static bool engine_idle(const sipp_engine *e) {
    SIPP_ASSERT_ENGINE_LOCKED(e);
    if (e->n_queued) return false;
    for (int i = 0; i < e->params.parallel; i++)
        if (e->slots[i].req) return false;
    return true;
}

/* Takes e->mu once the engine thread is parked (a stepped engine is driven by this caller); false,
 * with the lock not held, when a request is queued or running. */
static bool lock_idle(sipp_engine *e) {
    sipp_engine_lock(e);
    for (int waited = 0; e->thread_started && !e->parked && waited < PARK_WAIT_MS; waited += PARK_SLICE_MS) {
        sipp_engine_unlock(e);
        struct timespec slice = {0, PARK_SLICE_MS * 1000000L};
        nanosleep(&slice, NULL);
        sipp_engine_lock(e);
    }
    if ((e->thread_started && !e->parked) || !engine_idle(e)) {
        sipp_engine_unlock(e);
        return false;
    }
    return true;
}

/* ---- the directory's bound ---------------------------------------------------------------------- */

typedef struct entry {
    char name[NAME_SIZE];
    time_t mtime;
    uint64_t bytes;
} entry;

static int older_first(const void *a, const void *b) {
    const entry *x = a, *y = b;
    return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

static bool is_slot_file(const char *name) {
    size_t n = strlen(name), k = strlen(SUFFIX);
    return n > k && n < NAME_SIZE && strcmp(name + n - k, SUFFIX) == 0;
}

static void join(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Removes the oldest files (not `keep`) until there is room for one more of `incoming` bytes. */
static void make_room(const char *dir, const char *keep, uint64_t incoming, uint64_t max_bytes) {
    DIR *d = opendir(dir);
    if (!d) return;
    entry *list = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_slot_file(de->d_name) || strcmp(de->d_name, keep) == 0) continue;
        char path[PATH_MAX];
        struct stat st;
        join(path, sizeof path, dir, de->d_name);
        if (stat(path, &st) != 0) continue;
        if (n == cap) {
            entry *grown = realloc(list, (cap = cap ? cap * 2 : 16) * sizeof *list);
            if (!grown) break;
            list = grown;
        }
        snprintf(list[n].name, sizeof list[n].name, "%s", de->d_name);
        list[n].mtime = st.st_mtime;
        list[n].bytes = (uint64_t)st.st_size;
        total += list[n++].bytes;
    }
    closedir(d);
    qsort(list, n, sizeof *list, older_first);
    for (size_t i = 0;
         i < n && (n - i >= SIPP_SLOT_STATE_MAX_FILES || (max_bytes && total + incoming > max_bytes)); i++) {
        char path[PATH_MAX];
        join(path, sizeof path, dir, list[i].name);
        if (unlink(path) == 0) total -= list[i].bytes;
    }
    free(list);
}

/* ---- save --------------------------------------------------------------------------------------- */

static bool write_all(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

/* Writes slot s to path (through path.tmp, renamed); false (nothing left behind) when it cannot.
 * *bytes is the file's size. */
static bool write_slot_file(sipp_engine *e, const slot *s, const char *path, const char *identity,
                            uint64_t *bytes, char *err) {
    /* lock_idle's rule: the engine thread is parked (or there is none) and no slot is serving */
    SIPP_ASSERT_ENGINE_LOCKED(e);
    SIPP_ASSERT(!s->req && (!e->thread_started || e->parked));
    char tmp[PATH_MAX + 8];
    const char *key = s->key ? s->key : "";
    size_t key_bytes = strlen(key);
    size_t state_bytes = llama_state_seq_get_size(e->ctx, s->id);
    if (key_bytes > MAX_KEY_BYTES || !state_bytes) return false;
    snprintf(tmp, sizeof tmp, "%s%s", path, TMP_SUFFIX);
    *bytes = sizeof(file_header) + key_bytes + (uint64_t)s->n_cache * sizeof(llama_token) + state_bytes;
    uint8_t *state = malloc(state_bytes);
    if (!state || llama_state_seq_get_data(e->ctx, state, state_bytes, s->id) != state_bytes) {
        free(state);
        return false;
    }
    file_header h = {.version = FORMAT_VERSION,
                     .key_bytes = (uint32_t)key_bytes,
                     .n_tokens = (uint32_t)s->n_cache,
                     .state_bytes = state_bytes};
    memcpy(h.magic, MAGIC, MAGIC_SIZE);
    memcpy(h.identity, identity, SIPP_SHA256_HEX);
    FILE *f = fopen(tmp, "wb");
    bool ok = f && write_all(f, &h, sizeof h) && write_all(f, key, key_bytes) &&
              write_all(f, s->cache, (size_t)s->n_cache * sizeof *s->cache) &&
              write_all(f, state, state_bytes);
    if (f && fclose(f) != 0) ok = false;
    free(state);
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot write %.300s: %s", tmp, strerror(errno));
        unlink(tmp);
    }
    return ok;
}

/* One keyed slot's file in dir, named by the model path's and the key's hashes, within max_bytes. */
static bool save_slot(sipp_engine *e, const slot *s, const char *dir, const char *identity,
                      const char *path_hash, uint64_t max_bytes, char *err) {
    char key_hash[NAME_HASH_DIGITS + 1], name[NAME_SIZE], path[PATH_MAX];
    size_t key_bytes = strlen(s->key);
    if (key_bytes > MAX_KEY_BYTES || !short_hash(s->key, key_hash)) return false;
    snprintf(name, sizeof name, "%s-%s%s", path_hash, key_hash, SUFFIX);
    join(path, sizeof path, dir, name);
    uint64_t file_bytes = sizeof(file_header) + key_bytes + (uint64_t)s->n_cache * sizeof(llama_token) +
                          llama_state_seq_get_size(e->ctx, s->id);
    if (max_bytes && file_bytes > max_bytes) return false;
    make_room(dir, name, file_bytes, max_bytes);
    return write_slot_file(e, s, path, identity, &file_bytes, err);
}

sipp_status sipp_engine_save_slots(sipp_engine *e, const char *dir, uint64_t max_bytes, int *n_saved,
                                   char *errbuf) {
    if (n_saved) *n_saved = 0;
    if (!e || !dir || !*dir)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no engine or directory given");
    char identity[SIPP_SHA256_HEX], path_hash[NAME_HASH_DIGITS + 1];
    if (!model_identity(e->model, identity) || !short_hash(e->model->path, path_hash))
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot read %s to name its saved slots: %s", e->model->path,
                         strerror(errno));
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot make the slot state directory %s: %s", dir,
                         strerror(errno));
    if (!lock_idle(e))
        return sipp_fail(errbuf, SIPP_ERR_BUSY,
                         "the engine of '%s' is serving requests; its slots are saved only "
                         "when it is idle",
                         e->model->path);
    int saved = 0;
    char err[SIPP_ERROR_SIZE] = "";
    for (int i = 0; i < e->params.parallel; i++) {
        const slot *s = &e->slots[i];
        if (s->key && s->n_cache > 0 && llama_memory_seq_pos_min(e->mem, s->id) == 0 &&
            save_slot(e, s, dir, identity, path_hash, max_bytes, err))
            saved++;
    }
    sipp_engine_unlock(e);
    if (n_saved) *n_saved = saved;
    return *err ? sipp_fail(errbuf, SIPP_ERR_IO, "%s", err) : SIPP_OK;
}

/* ---- restore ------------------------------------------------------------------------------------ */

/* The slot a file's key goes to: the first without a key. NULL when all have one. */
static slot *free_slot(sipp_engine *e) {
    for (int i = 0; i < e->params.parallel; i++)
        if (!e->slots[i].key && e->slots[i].n_cache == 0) return &e->slots[i];
    return NULL;
}

static bool read_all(FILE *f, void *p, size_t n) { return n == 0 || fread(p, 1, n, f) == n; }

/* Empties slot s: its cells, tokens and key. */
static void clear_slot(sipp_engine *e, slot *s) {
    SIPP_ASSERT_ENGINE_LOCKED(e);
    if (s->n_cache > 0) llama_memory_seq_rm(e->mem, s->id, -1, -1);
    s->n_cache = 0;
    free(s->key);
    s->key = NULL;
}

/* Reads one file into slot s (NULL: a free one; a file without a key is refused then); false when it is
 * not this model's as it is now, is damaged, or llama.cpp refuses its state (the slot is then left
 * empty). *n_tokens gets its tokens. */
static bool restore_file(sipp_engine *e, const char *path, const char *identity, slot *s, int *n_tokens) {
    SIPP_ASSERT_ENGINE_LOCKED(e);
    SIPP_ASSERT(!e->thread_started || e->parked);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    file_header h;
    bool ok = read_all(f, &h, sizeof h) && memcmp(h.magic, MAGIC, MAGIC_SIZE) == 0 &&
              h.version == FORMAT_VERSION && memcmp(h.identity, identity, SIPP_SHA256_HEX) == 0 &&
              (h.key_bytes > 0 || s) && h.key_bytes <= MAX_KEY_BYTES && h.n_tokens > 0 &&
              h.n_tokens < (uint32_t)e->n_ctx && h.state_bytes > 0;
    struct stat st;
    ok = ok && fstat(fileno(f), &st) == 0 &&
         (uint64_t)st.st_size ==
             sizeof h + h.key_bytes + (uint64_t)h.n_tokens * sizeof(llama_token) + h.state_bytes;
    if (ok && s) clear_slot(e, s);
    if (ok && !s) s = free_slot(e);
    char *key = ok && s ? calloc(1, h.key_bytes + 1) : NULL;
    llama_token *tokens = key ? malloc((size_t)h.n_tokens * sizeof *tokens) : NULL;
    uint8_t *state = tokens ? malloc(h.state_bytes) : NULL;
    ok = state && read_all(f, key, h.key_bytes) && strlen(key) == h.key_bytes &&
         read_all(f, tokens, (size_t)h.n_tokens * sizeof *tokens) && read_all(f, state, h.state_bytes);
    int n_vocab = llama_vocab_n_tokens(e->model->vocab);
    for (uint32_t i = 0; ok && i < h.n_tokens; i++)
        ok = tokens[i] >= 0 && tokens[i] < n_vocab;
    fclose(f);
    if (ok) {
        ok = llama_state_seq_set_data(e->ctx, state, h.state_bytes, s->id) == h.state_bytes &&
             llama_memory_seq_pos_min(e->mem, s->id) == 0 &&
             llama_memory_seq_pos_max(e->mem, s->id) == (llama_pos)h.n_tokens - 1;
        if (!ok) llama_memory_seq_rm(e->mem, s->id, -1, -1);
    }
    if (ok) {
        free(s->cache);
        s->cache = tokens;
        s->cap_cache = s->n_cache = (int)h.n_tokens;
        /* The file does not say under which LoRA scales its KV was computed: with adapters it serves
         * no request's prefix (engine/lora.h), without them every request's. */
        s->lora_sig = e->lora.n ? UINT64_MAX : 0;
        s->key = h.key_bytes ? key : NULL;
        s->last_used = sipp_now_ms();
        if (n_tokens) *n_tokens = (int)h.n_tokens;
        tokens = NULL;
        if (h.key_bytes) key = NULL;
    }
    free(state);
    free(tokens);
    free(key);
    return ok;
}

sipp_status sipp_engine_restore_slots(sipp_engine *e, const char *dir, int *n_restored, char *errbuf) {
    if (n_restored) *n_restored = 0;
    if (!e || !dir || !*dir)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no engine or directory given");
    char identity[SIPP_SHA256_HEX], path_hash[NAME_HASH_DIGITS + 1];
    if (!model_identity(e->model, identity) || !short_hash(e->model->path, path_hash))
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot read %s to find its saved slots: %s", e->model->path,
                         strerror(errno));
    DIR *d = opendir(dir);
    if (!d) return SIPP_OK; /* nothing saved yet */
    if (!lock_idle(e)) {
        closedir(d);
        return sipp_fail(errbuf, SIPP_ERR_BUSY,
                         "the engine of '%s' is serving requests; saved slots are "
                         "restored only into an idle engine",
                         e->model->path);
    }
    int restored = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_slot_file(de->d_name) || strncmp(de->d_name, path_hash, NAME_HASH_DIGITS) != 0 ||
            de->d_name[NAME_HASH_DIGITS] != '-')
            continue;
        char path[PATH_MAX];
        join(path, sizeof path, dir, de->d_name);
        if (restore_file(e, path, identity, NULL, NULL)) restored++;
        unlink(path); /* restored, or stale: either way it is not read again */
    }
    sipp_engine_unlock(e);
    closedir(d);
    if (n_restored) *n_restored = restored;
    return SIPP_OK;
}

/* ---- one slot, by id (llama-server's /slots/ID) -------------------------------------------------- */

int sipp_engine_slots(sipp_engine *e, sipp_slot_info *out, int cap) {
    if (!e) return 0;
    sipp_engine_lock(e);
    int n = e->params.parallel;
    for (int i = 0; i < n && i < cap; i++) {
        const slot *s = &e->slots[i];
        out[i] = (sipp_slot_info){
            .id = s->id, .busy = s->req != NULL, .n_tokens = s->n_cache, .last_used_ms = s->last_used};
        if (s->key) sipp_strlcpy(out[i].key, s->key, sizeof out[i].key);
    }
    sipp_engine_unlock(e);
    return n;
}

/* The model's identity and e->mu held on an idle engine, for a slot by id; else the error. */
static sipp_status lock_slot(sipp_engine *e, int slot_id, const char *what, char identity[SIPP_SHA256_HEX],
                             char *errbuf) {
    if (!e) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no engine given");
    if (slot_id < 0 || slot_id >= e->params.parallel)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "slot %d does not exist: '%s' has slots 0 to %d",
                         slot_id, e->model->path, e->params.parallel - 1);
    if (identity && !model_identity(e->model, identity))
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot read %s: %s", e->model->path, strerror(errno));
    if (!lock_idle(e))
        return sipp_fail(errbuf, SIPP_ERR_BUSY,
                         "the engine of '%s' is serving requests; a slot is %s only when it is idle",
                         e->model->path, what);
    return SIPP_OK;
}

sipp_status sipp_engine_slot_save(sipp_engine *e, int slot_id, const char *path, int *n_tokens,
                                  uint64_t *n_bytes, char *errbuf) {
    if (n_tokens) *n_tokens = 0;
    if (n_bytes) *n_bytes = 0;
    char identity[SIPP_SHA256_HEX], err[SIPP_ERROR_SIZE] = "";
    sipp_status st = lock_slot(e, slot_id, "saved", identity, errbuf);
    if (st != SIPP_OK) return st;
    const slot *s = &e->slots[slot_id];
    uint64_t bytes = 0;
    if (s->n_cache == 0 || llama_memory_seq_pos_min(e->mem, s->id) != 0)
        st = sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "slot %d holds nothing to save", slot_id);
    else if (!write_slot_file(e, s, path, identity, &bytes, err))
        st = sipp_fail(errbuf, SIPP_ERR_IO, "%s", *err ? err : "cannot read the slot's state");
    if (st == SIPP_OK && n_tokens) *n_tokens = s->n_cache;
    sipp_engine_unlock(e);
    if (st == SIPP_OK && n_bytes) *n_bytes = bytes;
    return st;
}

sipp_status sipp_engine_slot_restore(sipp_engine *e, int slot_id, const char *path, int *n_tokens,
                                     uint64_t *n_bytes, char *errbuf) {
    if (n_tokens) *n_tokens = 0;
    if (n_bytes) *n_bytes = 0;
    struct stat st_file;
    if (stat(path, &st_file) != 0)
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    char identity[SIPP_SHA256_HEX];
    sipp_status st = lock_slot(e, slot_id, "restored", identity, errbuf);
    if (st != SIPP_OK) return st;
    if (!restore_file(e, path, identity, &e->slots[slot_id], n_tokens))
        st = sipp_fail(
            errbuf, SIPP_ERR_MODEL,
            "%s is not a slot of '%s' as that file is now (another model, a changed file, or damaged); "
            "slot %d is left empty",
            path, e->model->path, slot_id);
    sipp_engine_unlock(e);
    if (st == SIPP_OK && n_bytes) *n_bytes = (uint64_t)st_file.st_size;
    return st;
}

sipp_status sipp_engine_slot_erase(sipp_engine *e, int slot_id, int *n_tokens, char *errbuf) {
    if (n_tokens) *n_tokens = 0;
    sipp_status st = lock_slot(e, slot_id, "erased", NULL, errbuf);
    if (st != SIPP_OK) return st;
    if (n_tokens) *n_tokens = e->slots[slot_id].n_cache;
    clear_slot(e, &e->slots[slot_id]);
    sipp_engine_unlock(e);
    return SIPP_OK;
}
