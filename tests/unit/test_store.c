/*
 * test_store.c: the model store's pure parts (src/store/source.c, store.c, catalog.c; src/util/sha256.c):
 * store names, hf:// URLs, split-set names, where the store is, how a MODEL argument resolves, the
 * catalog format, listing (and what it passes over) and removal.
 *
 * Store names end up in file names and in `rm`, so the name checks are tested against path tricks
 * ("..", "/", leading dots); hf:// parsing against the forms that would change a URL's meaning.
 * Tests that touch the file system work in a fresh directory under /tmp with SIPP_MODELS_DIR set;
 * Criterion runs each test in its own process, so setenv does not leak between tests.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/catalog.h"
#include "store/source.h"
#include "store/store.h"
#include "util/sha256.h"

#define SHA_A "74a4da8c9fdbcd15bd1f6d01d621410d31c6fc00986f5eb687824e7b93d7a9db"
#define SHA_B "539cf93f78e887edea1c04e2d7d8cdaca9d01dae9c9025bcb8accbe29df3d72a"

static char tmp[64];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}

static void make_tmp(void) {
    snprintf(tmp, sizeof tmp, "/tmp/sipp-test-store-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    char store[PATH_MAX];
    snprintf(store, sizeof store, "%s/models", tmp);
    setenv("SIPP_MODELS_DIR", store, 1);
    setenv("SIPP_CATALOG", "/nonexistent/catalog.json", 1);
}

static void remove_tmp(void) {
    if (tmp[0]) nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void store_path(char *out, const char *file) { snprintf(out, PATH_MAX, "%s/models/%s", tmp, file); }

/* ---- names ------------------------------------------------------------------------------------- */

Test(names, valid) {
    cr_assert(sipp_name_valid("llama-3.2-1b-instruct"));
    cr_assert(sipp_name_valid("Qwen2.5_0.5B"));
    cr_assert(sipp_name_valid("a"));
    cr_assert(sipp_name_valid("7b"));
}

Test(names, invalid) {
    cr_assert_not(sipp_name_valid(NULL));
    cr_assert_not(sipp_name_valid(""));
    cr_assert_not(sipp_name_valid(".."));
    cr_assert_not(sipp_name_valid(".hidden"));
    cr_assert_not(sipp_name_valid("-flag"));
    cr_assert_not(sipp_name_valid("a/b"));
    cr_assert_not(sipp_name_valid("../etc"));
    cr_assert_not(sipp_name_valid("with space"));
    cr_assert_not(sipp_name_valid("model.gguf"));
    cr_assert_not(sipp_name_valid("model.GGUF"));
    cr_assert_not(sipp_name_valid("model.json"));
    cr_assert_not(sipp_name_valid("tag:latest"));
    char longest[SIPP_NAME_MAX + 2];
    memset(longest, 'x', sizeof longest);
    longest[SIPP_NAME_MAX] = '\0';
    cr_assert(sipp_name_valid(longest));
    longest[SIPP_NAME_MAX] = 'x';
    longest[SIPP_NAME_MAX + 1] = '\0';
    cr_assert_not(sipp_name_valid(longest));
}

/* ---- URLs and hf:// ---------------------------------------------------------------------------- */

static void expect_url(const char *source, const char *want) {
    char url[SIPP_URL_MAX], err[SIPP_ERROR_SIZE] = "";
    cr_assert_eq(sipp_source_to_url(source, url, sizeof url, err), SIPP_OK, "%s: %s", source, err);
    cr_assert_str_eq(url, want);
}

static void expect_bad_source(const char *source) {
    char url[SIPP_URL_MAX], err[SIPP_ERROR_SIZE] = "";
    cr_assert_eq(sipp_source_to_url(source, url, sizeof url, err), SIPP_ERR_INVALID_ARGUMENT,
                 "%s was accepted", source);
    cr_assert(strlen(err) > 0);
}

Test(hf, default_endpoint) {
    unsetenv("SIPP_HF_ENDPOINT");
    unsetenv("HF_ENDPOINT");
    expect_url("hf://Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf",
               "https://huggingface.co/Qwen/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q8_0.gguf");
    expect_url("hf://org/repo/sub/dir/m.gguf", "https://huggingface.co/org/repo/resolve/main/sub/dir/m.gguf");
    expect_url("HF://org/repo/m.gguf", "https://huggingface.co/org/repo/resolve/main/m.gguf");
}

Test(hf, revision) {
    unsetenv("SIPP_HF_ENDPOINT");
    unsetenv("HF_ENDPOINT");
    expect_url("hf://org/repo@0123abcd/m.gguf", "https://huggingface.co/org/repo/resolve/0123abcd/m.gguf");
    expect_url("hf://org/repo@v1.0/q/m.gguf", "https://huggingface.co/org/repo/resolve/v1.0/q/m.gguf");
}

Test(hf, endpoint_override) {
    setenv("SIPP_HF_ENDPOINT", "http://127.0.0.1:8080/", 1);
    setenv("HF_ENDPOINT", "http://ignored.example", 1);
    expect_url("hf://org/repo/m.gguf", "http://127.0.0.1:8080/org/repo/resolve/main/m.gguf");
    unsetenv("SIPP_HF_ENDPOINT");
    expect_url("hf://org/repo/m.gguf", "http://ignored.example/org/repo/resolve/main/m.gguf");
}

Test(hf, malformed) {
    expect_bad_source("hf://org");
    expect_bad_source("hf://org/repo");
    expect_bad_source("hf://org/repo/");
    expect_bad_source("hf://org/repo/dir/");
    expect_bad_source("hf:///repo/m.gguf");
    expect_bad_source("hf://org//m.gguf");
    expect_bad_source("hf://org/../m.gguf");
    expect_bad_source("hf://org/repo/../../m.gguf");
    expect_bad_source("hf://org/repo/m.gguf?x=1");
    expect_bad_source("hf://org/repo/m .gguf");
    expect_bad_source("hf://org/repo@/m.gguf");
    expect_bad_source("hf://o@x/repo/m.gguf");
}

Test(urls, http_passthrough_and_rejects) {
    expect_url("https://example.com/a/b.gguf?download=true", "https://example.com/a/b.gguf?download=true");
    expect_url("http://127.0.0.1:9/m.gguf", "http://127.0.0.1:9/m.gguf");
    expect_bad_source("ftp://example.com/m.gguf");
    expect_bad_source("model-name");
    expect_bad_source("https://example.com/a b.gguf");
    cr_assert(sipp_source_is_url("HTTPS://x/y"));
    cr_assert(sipp_source_is_url("hf://a/b/c"));
    cr_assert_not(sipp_source_is_url("qwen3-0.6b"));
    cr_assert_not(sipp_source_is_url("/path/to/m.gguf"));
}

Test(urls, file_name) {
    char f[SIPP_URL_MAX];
    sipp_url_file_name("https://h/a/b/m.gguf?download=true#frag", f, sizeof f);
    cr_assert_str_eq(f, "m.gguf");
    sipp_url_file_name("https://h/a/m-00001-of-00002.gguf", f, sizeof f);
    cr_assert_str_eq(f, "m-00001-of-00002.gguf");
    sipp_url_file_name("https://host", f, sizeof f);
    cr_assert_str_eq(f, "");
    sipp_url_file_name("https://host/dir/", f, sizeof f);
    cr_assert_str_eq(f, "");
}

/* ---- split sets -------------------------------------------------------------------------------- */

Test(split, parse) {
    sipp_split s;
    cr_assert(sipp_split_parse("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf", &s));
    cr_assert_eq(s.index, 1);
    cr_assert_eq(s.count, 2);
    cr_assert_eq(s.prefix_len, strlen("qwen2.5-7b-instruct-q4_k_m"));
    cr_assert(sipp_split_parse("m-00003-of-00003.gguf", &s));
    cr_assert_eq(s.index, 3);
}

Test(split, not_a_split) {
    cr_assert_not(sipp_split_parse("m.gguf", NULL));
    cr_assert_not(sipp_split_parse("-00001-of-00002.gguf", NULL)); /* no prefix */
    cr_assert_not(sipp_split_parse("m-00000-of-00002.gguf", NULL));
    cr_assert_not(sipp_split_parse("m-00003-of-00002.gguf", NULL));
    cr_assert_not(sipp_split_parse("m-00001-of-00000.gguf", NULL));
    cr_assert_not(sipp_split_parse("m-0001-of-0002.gguf", NULL));
    cr_assert_not(sipp_split_parse("m-00001-of-00002.bin", NULL));
    cr_assert_not(sipp_split_parse("m-00001-of-99999.gguf", NULL)); /* above SIPP_SPLIT_MAX */
    cr_assert_not(sipp_split_parse("m-0000a-of-00002.gguf", NULL));
}

Test(split, sibling) {
    char out[SIPP_URL_MAX];
    cr_assert(sipp_split_sibling("https://h/r/m-00001-of-00003.gguf?download=1", 3, out, sizeof out));
    cr_assert_str_eq(out, "https://h/r/m-00003-of-00003.gguf?download=1");
    cr_assert(sipp_split_sibling("/store/x-00002-of-00003.gguf", 1, out, sizeof out));
    cr_assert_str_eq(out, "/store/x-00001-of-00003.gguf");
    cr_assert_not(sipp_split_sibling("/store/x-00002-of-00003.gguf", 4, out, sizeof out));
    cr_assert_not(sipp_split_sibling("/store/x.gguf", 1, out, sizeof out));
}

Test(split, store_file_names) {
    char f[SIPP_NAME_MAX + 32];
    sipp_store_file_name("m", 1, 1, f, sizeof f);
    cr_assert_str_eq(f, "m.gguf");
    sipp_store_file_name("m", 2, 3, f, sizeof f);
    cr_assert_str_eq(f, "m-00002-of-00003.gguf");
    sipp_split s;
    cr_assert(sipp_split_parse(f, &s) && s.index == 2 && s.count == 3 && s.prefix_len == 1);
}

Test(split, default_names) {
    char name[SIPP_NAME_MAX + 1], err[SIPP_ERROR_SIZE];
    cr_assert_eq(sipp_source_default_name("https://h/Llama-3.2-1B-Q4_K_M.gguf", name, sizeof name, err),
                 SIPP_OK);
    cr_assert_str_eq(name, "Llama-3.2-1B-Q4_K_M");
    cr_assert_eq(sipp_source_default_name("https://h/r/q-00001-of-00002.gguf?x=1", name, sizeof name, err),
                 SIPP_OK);
    cr_assert_str_eq(name, "q");
    /* .bin is what whisper.cpp publishes its models as: the name leaves it out, as it does .gguf */
    cr_assert_eq(sipp_source_default_name("https://h/weights.bin", name, sizeof name, err), SIPP_OK);
    cr_assert_str_eq(name, "weights");
    cr_assert_eq(sipp_source_default_name("https://h/a%20b.gguf", name, sizeof name, err),
                 SIPP_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err, "--name") != NULL);
    cr_assert_eq(sipp_source_default_name("https://host/", name, sizeof name, err),
                 SIPP_ERR_INVALID_ARGUMENT);
}

/* ---- the store's place ------------------------------------------------------------------------- */

Test(store_dir, env_and_defaults) {
    char dir[PATH_MAX], err[SIPP_ERROR_SIZE];
    setenv("SIPP_MODELS_DIR", "/data/models//", 1);
    cr_assert_eq(sipp_store_dir(dir, sizeof dir, err), SIPP_OK);
    cr_assert_str_eq(dir, "/data/models");
    cr_assert_eq(sipp_store_user_catalog(dir, sizeof dir, err), SIPP_OK);
    cr_assert_str_eq(dir, "/data/catalog.json");

    unsetenv("SIPP_MODELS_DIR");
    setenv("XDG_DATA_HOME", "/xdg", 1);
    cr_assert_eq(sipp_store_dir(dir, sizeof dir, err), SIPP_OK);
    cr_assert_str_eq(dir, "/xdg/sipp/models");
    cr_assert_eq(sipp_store_user_catalog(dir, sizeof dir, err), SIPP_OK);
    cr_assert_str_eq(dir, "/xdg/sipp/catalog.json");

    setenv("XDG_DATA_HOME", "relative/ignored", 1);
    setenv("HOME", "/home/u", 1);
    cr_assert_eq(sipp_store_dir(dir, sizeof dir, err), SIPP_OK);
    cr_assert_str_eq(dir, "/home/u/.local/share/sipp/models");
    unsetenv("XDG_DATA_HOME");
    cr_assert_eq(sipp_store_dir(dir, sizeof dir, err), SIPP_OK);
    cr_assert_str_eq(dir, "/home/u/.local/share/sipp/models");
}

/* ---- resolve ----------------------------------------------------------------------------------- */

Test(resolve, paths_names_and_errors, .init = make_tmp, .fini = remove_tmp) {
    char err[SIPP_ERROR_SIZE], out[PATH_MAX], p[PATH_MAX], dir[PATH_MAX];
    cr_assert_eq(sipp_store_dir(dir, sizeof dir, err), SIPP_OK);
    cr_assert_eq(sipp_store_ensure(dir, err), SIPP_OK, "%s", err);

    /* a file outside the store: as it is, even when its name would be a valid store name */
    snprintf(p, sizeof p, "%s/loose.gguf", tmp);
    write_file(p, "GGUF");
    cr_assert_eq(sipp_store_resolve(p, out, sizeof out, err), SIPP_OK);
    cr_assert_str_eq(out, p);

    /* a bare NAME.gguf in the store */
    store_path(p, "bare.gguf");
    write_file(p, "GGUF");
    cr_assert_eq(sipp_store_resolve("bare", out, sizeof out, err), SIPP_OK, "%s", err);
    cr_assert_str_eq(out, p);

    /* a bare split set: shard 1 */
    store_path(p, "set-00002-of-00002.gguf");
    write_file(p, "GGUF");
    store_path(p, "set-00001-of-00002.gguf");
    write_file(p, "GGUF");
    cr_assert_eq(sipp_store_resolve("set", out, sizeof out, err), SIPP_OK, "%s", err);
    cr_assert_str_eq(out, p);

    /* a managed model: its metadata names the files */
    sipp_store_file files[2] = {{.url = "https://h/x-00001-of-00002.gguf", .size = 4},
                                {.url = "https://h/x-00002-of-00002.gguf", .size = 4}};
    strcpy(files[0].file, "managed-00001-of-00002.gguf");
    strcpy(files[1].file, "managed-00002-of-00002.gguf");
    sipp_store_model m = {.name = "managed",
                          .source = "hf://o/r/x-00001-of-00002.gguf",
                          .n_files = 2,
                          .files = files,
                          .managed = true,
                          .verified = true};
    strcpy(m.pulled_at, "2025-01-01T00:00:00Z");
    cr_assert_eq(sipp_store_meta_write(dir, &m, err), SIPP_OK, "%s", err);
    store_path(p, "managed-00002-of-00002.gguf");
    write_file(p, "GGUF");
    /* shard 1 missing: a clear error, not a path to nothing */
    cr_assert_eq(sipp_store_resolve("managed", out, sizeof out, err), SIPP_ERR_NOT_FOUND);
    cr_assert(strstr(err, "incomplete") != NULL, "%s", err);
    store_path(p, "managed-00001-of-00002.gguf");
    write_file(p, "GGUF");
    cr_assert_eq(sipp_store_resolve("managed", out, sizeof out, err), SIPP_OK, "%s", err);
    cr_assert_str_eq(out, p);

    /* a directory that shares a store model's name does not hide the model; another one is a path */
    cr_assert_eq(chdir(tmp), 0);
    cr_assert_eq(mkdir("bare", 0755), 0);
    cr_assert_eq(mkdir("somedir", 0755), 0);
    store_path(p, "bare.gguf");
    cr_assert_eq(sipp_store_resolve("bare", out, sizeof out, err), SIPP_OK, "%s", err);
    cr_assert_str_eq(out, p);
    cr_assert_eq(sipp_store_resolve("somedir", out, sizeof out, err), SIPP_OK, "%s", err);
    cr_assert_str_eq(out, "somedir");

    /* not there: the message says how to pull */
    cr_assert_eq(sipp_store_resolve("missing", out, sizeof out, err), SIPP_ERR_NOT_FOUND);
    cr_assert(strstr(err, "sipp pull") != NULL, "%s", err);
    cr_assert(strstr(err, "missing") != NULL, "%s", err);
    cr_assert_eq(sipp_store_resolve("no/such/file.gguf", out, sizeof out, err), SIPP_ERR_NOT_FOUND);
    cr_assert(strstr(err, "no/such/file.gguf") != NULL, "%s", err);
    cr_assert_eq(sipp_store_resolve("", out, sizeof out, err), SIPP_ERR_INVALID_ARGUMENT);
}

Test(resolve, catalog_name_hint, .init = make_tmp, .fini = remove_tmp) {
    char cat[PATH_MAX], err[SIPP_ERROR_SIZE], out[PATH_MAX];
    unsetenv("SIPP_CATALOG"); /* the shipped catalog is found beside the binary; it must parse */
    snprintf(cat, sizeof cat, "%s/catalog.json", tmp); /* the user catalog, beside models/ */
    write_file(cat, "{\"version\": 1, \"models\": [{\"name\": \"known\", \"url\": \"hf://o/r/k.gguf\"}]}");
    cr_assert_eq(sipp_store_resolve("known", out, sizeof out, err), SIPP_ERR_NOT_FOUND);
    cr_assert(strstr(err, "sipp pull known") != NULL, "%s", err);
}

/* ---- list and remove --------------------------------------------------------------------------- */

Test(store, list_and_remove, .init = make_tmp, .fini = remove_tmp) {
    char err[SIPP_ERROR_SIZE], p[PATH_MAX], dir[PATH_MAX];
    cr_assert_eq(sipp_store_dir(dir, sizeof dir, err), SIPP_OK);
    cr_assert_eq(sipp_store_ensure(dir, err), SIPP_OK);
    store_path(p, "b.gguf");
    write_file(p, "GGUF1234");
    store_path(p, "a-00001-of-00002.gguf");
    write_file(p, "GGUF");
    store_path(p, "a-00002-of-00002.gguf");
    write_file(p, "GGUF");
    store_path(p, "partial/b.gguf.part");
    write_file(p, "GG");
    store_path(p, "partial/bb.gguf.part");
    write_file(p, "GG");
    store_path(p, "not a model.gguf");
    write_file(p, "GGUF");

    sipp_store_model *models;
    size_t n;
    cr_assert_eq(sipp_store_list(dir, &models, &n, err), SIPP_OK, "%s", err);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(models[0].name, "a");
    cr_assert_eq(models[0].n_files, 2);
    cr_assert_eq(models[0].size, 8);
    cr_assert_str_eq(models[1].name, "b");
    cr_assert_eq(models[1].size, 8);
    cr_assert_not(models[1].managed);
    sipp_store_list_free(models, n);

    cr_assert_eq(sipp_store_remove(dir, "b", err), SIPP_OK, "%s", err);
    store_path(p, "b.gguf");
    cr_assert_neq(access(p, F_OK), 0);
    store_path(p, "partial/b.gguf.part");
    cr_assert_neq(access(p, F_OK), 0, "the partial download of b is gone too");
    store_path(p, "partial/bb.gguf.part");
    cr_assert_eq(access(p, F_OK), 0, "another model's partial download stays");
    cr_assert_eq(sipp_store_remove(dir, "b", err), SIPP_ERR_NOT_FOUND);
    cr_assert_eq(sipp_store_remove(dir, "../models/a", err), SIPP_ERR_INVALID_ARGUMENT);
    cr_assert_eq(sipp_store_remove(dir, "a", err), SIPP_OK, "%s", err);
    cr_assert_eq(sipp_store_list(dir, &models, &n, err), SIPP_OK);
    cr_assert_eq(n, 0);
    sipp_store_list_free(models, n);
}

typedef struct skipped {
    char lines[16][512];
    int n;
} skipped;

static void on_skipped(void *user, const char *entry, const char *why) {
    skipped *s = user;
    if (s->n < 16) snprintf(s->lines[s->n++], sizeof s->lines[0], "%s: %s", entry, why);
}

static bool has_line(const skipped *s, const char *entry, const char *words) {
    for (int i = 0; i < s->n; i++)
        if (strncmp(s->lines[i], entry, strlen(entry)) == 0 && s->lines[i][strlen(entry)] == ':' &&
            strstr(s->lines[i], words))
            return true;
    return false;
}

Test(store, skipped_entries_are_named, .init = make_tmp, .fini = remove_tmp) {
    char err[SIPP_ERROR_SIZE], p[PATH_MAX], dir[PATH_MAX];
    cr_assert_eq(sipp_store_dir(dir, sizeof dir, err), SIPP_OK);
    cr_assert_eq(sipp_store_ensure(dir, err), SIPP_OK);
    static const char *const quiet[] = {
        "good.gguf",  "a-00001-of-00002.gguf", "a-00002-of-00002.gguf", "mmproj-good.gguf",
        "README.txt", ".hidden.gguf",          "partial/x.gguf.part"};
    for (size_t i = 0; i < sizeof quiet / sizeof *quiet; i++) {
        store_path(p, quiet[i]);
        write_file(p, "GGUF");
    }
    store_path(p, "My Model.gguf");
    write_file(p, "GGUF");
    store_path(p, "c-00002-of-00003.gguf");
    write_file(p, "GGUF");
    store_path(p, "config.json"); /* not reported: a model is a .gguf file */
    write_file(p, "{not store metadata");
    store_path(p, "pipe.gguf");
    cr_assert_eq(mkfifo(p, 0600), 0);
    store_path(p, "fifo");
    cr_assert_eq(mkfifo(p, 0600), 0);
    store_path(p, "dangling.gguf");
    cr_assert_eq(symlink("/nonexistent/model.gguf", p), 0);

    skipped s = {.n = 0};
    cr_assert_eq(sipp_store_list_skipped(dir, on_skipped, &s, err), SIPP_OK, "%s", err);
    for (int i = 0; i < s.n; i++)
        cr_log_info("%s", s.lines[i]);
    cr_assert_eq(s.n, 5);
    cr_assert(has_line(&s, "My Model.gguf", "'My Model' is not a model name"));
    cr_assert(has_line(&s, "My Model.gguf", "rename the file"));
    cr_assert(has_line(&s, "c-00002-of-00003.gguf", "shard 2 of 3 of a split set whose shard 1 is not here"));
    cr_assert(has_line(&s, "pipe.gguf", "it is a FIFO, not a regular file"));
    cr_assert(has_line(&s, "fifo", "it is a FIFO"));
    cr_assert(has_line(&s, "dangling.gguf", "symbolic link to nothing"));
}

Test(store, hostile_metadata_is_refused, .init = make_tmp, .fini = remove_tmp) {
    char err[SIPP_ERROR_SIZE], p[PATH_MAX], dir[PATH_MAX], victim[PATH_MAX];
    cr_assert_eq(sipp_store_dir(dir, sizeof dir, err), SIPP_OK);
    cr_assert_eq(sipp_store_ensure(dir, err), SIPP_OK);
    snprintf(victim, sizeof victim, "%s/victim.txt", tmp);
    write_file(victim, "keep me");
    store_path(p, "evil.json");
    write_file(p, "{\"name\": \"evil\", \"files\": [{\"file\": \"../victim.txt\", \"size\": 7}]}");
    sipp_store_model m;
    cr_assert_neq(sipp_store_lookup(dir, "evil", &m, err), SIPP_OK);
    cr_assert_neq(sipp_store_remove(dir, "evil", err), SIPP_OK);
    cr_assert_eq(access(victim, F_OK), 0, "rm must never follow a metadata file outside the store");
}

/* ---- catalog ----------------------------------------------------------------------------------- */

static sipp_status parse(sipp_catalog *c, const char *text, char *err) {
    return sipp_catalog_parse(c, text, strlen(text), "test", err);
}

Test(catalog, good_entries_and_lookup) {
    unsetenv("SIPP_HF_ENDPOINT");
    unsetenv("HF_ENDPOINT");
    sipp_catalog *c = sipp_catalog_new();
    char err[SIPP_ERROR_SIZE] = "";
    cr_assert_eq(parse(c,
                       "{\"version\": 1, \"models\": ["
                       "{\"name\": \"one\", \"url\": \"hf://o/r/one.gguf\", \"sha256\": \"" SHA_A
                       "\", \"size\": 5,"
                       " \"labels\": [\"chat\", \"tool-calling\"], \"backends\": [\"cpu\", \"vulkan\"], "
                       "\"ctx_size\": 4096},"
                       "{\"name\": \"two\", \"url\": \"hf://o/r/two-00001-of-00002.gguf\","
                       " \"sha256\": [\"" SHA_A "\", \"" SHA_B "\"], \"labels\": [\"embeddings\"]}]}",
                       err),
                 SIPP_OK, "%s", err);
    cr_assert_eq(c->n, 2);
    const sipp_catalog_entry *e = sipp_catalog_find(c, "one");
    cr_assert_not_null(e);
    cr_assert_eq(e->n_sha256, 1);
    cr_assert_str_eq(e->sha256[0], SHA_A);
    cr_assert_eq(e->size, 5);
    cr_assert_eq(e->n_labels, 2);
    cr_assert_eq(e->ctx_size, 4096);
    cr_assert_eq(sipp_catalog_find_url(c, "https://huggingface.co/o/r/resolve/main/one.gguf"), e);
    const sipp_catalog_entry *two = sipp_catalog_find(c, "two");
    cr_assert_eq(two->n_sha256, 2);
    /* any shard of the set finds the entry */
    cr_assert_eq(sipp_catalog_find_url(c, "https://huggingface.co/o/r/resolve/main/two-00002-of-00002.gguf"),
                 two);
    cr_assert_null(sipp_catalog_find(c, "three"));

    /* a later catalog (the user's) replaces an entry of the same name */
    cr_assert_eq(parse(c, "{\"models\": [{\"name\": \"one\", \"url\": \"https://mirror/one.gguf\"}]}", err),
                 SIPP_OK, "%s", err);
    cr_assert_eq(c->n, 2);
    e = sipp_catalog_find(c, "one");
    cr_assert_str_eq(e->url, "https://mirror/one.gguf");
    cr_assert_eq(e->n_sha256, 0);
    sipp_catalog_free(c);
}

static void expect_bad_catalog(const char *text, const char *needle) {
    sipp_catalog *c = sipp_catalog_new();
    char err[SIPP_ERROR_SIZE] = "";
    cr_assert_eq(parse(c, text, err), SIPP_ERR_INVALID_ARGUMENT, "accepted: %s", text);
    cr_assert(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
    cr_assert(strstr(err, "test") != NULL, "message '%s' does not name the file", err);
    sipp_catalog_free(c);
}

Test(catalog, errors_name_the_problem) {
    expect_bad_catalog("{", "test:");
    expect_bad_catalog("[]", "expected an object");
    expect_bad_catalog("{\"models\": [], \"extra\": 1}", "unknown key 'extra'");
    expect_bad_catalog("{\"version\": 2, \"models\": []}", "version 2");
    expect_bad_catalog("{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x.gguf\", \"sha265\": \"\"}]}",
                       "unknown key 'sha265'");
    expect_bad_catalog("{\"models\": [{\"name\": \"../x\", \"url\": \"hf://o/r/x.gguf\"}]}", "\"name\"");
    expect_bad_catalog("{\"models\": [{\"name\": \"x\"}]}", "\"url\" is missing");
    expect_bad_catalog("{\"models\": [{\"name\": \"x\", \"url\": \"hf://o\"}]}", "hf://");
    expect_bad_catalog("{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x.gguf\", \"sha256\": \"abc\"}]}",
                       "64 hex digits");
    expect_bad_catalog(
        "{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x-00001-of-00002.gguf\", \"sha256\": \"" SHA_A
        "\"}]}",
        "1 sha256 values for 2 files");
    expect_bad_catalog("{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x-00002-of-00002.gguf\"}]}",
                       "shard 1");
    expect_bad_catalog(
        "{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x.gguf\", \"labels\": [\"chatty\"]}]}",
        "chatty");
    expect_bad_catalog(
        "{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x.gguf\", \"backends\": [\"tpu\"]}]}", "tpu");
    expect_bad_catalog("{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x.gguf\", \"size\": -1}]}",
                       "\"size\"");
    expect_bad_catalog(
        "{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x.gguf\", \"ctx_size\": \"big\"}]}",
        "\"ctx_size\"");
    expect_bad_catalog("{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x.bin\", \"recipe\": \"ggml\"}]}",
                       "\"recipe\" must be");
    expect_bad_catalog("{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x-00001-of-00002.gguf\", "
                       "\"recipe\": \"whispercpp\"}]}",
                       "one .bin file");
    expect_bad_catalog(
        "{\"models\": [{\"name\": \"x\", \"url\": \"hf://o/r/x.bin\", \"mmproj\": \"m.gguf\"}]}",
        "no \"mmproj\"");
}

Test(catalog, recipe_named_or_told_from_the_url) {
    sipp_catalog *c = sipp_catalog_new();
    char err[SIPP_ERROR_SIZE] = "";
    cr_assert_eq(parse(c,
                       "{\"models\": [{\"name\": \"w\", \"url\": \"hf://o/r/ggml-tiny.bin\"},"
                       "{\"name\": \"g\", \"url\": \"hf://o/r/g.gguf\"},"
                       "{\"name\": \"n\", \"url\": \"hf://o/r/weights\", \"recipe\": \"whispercpp\"}]}",
                       err),
                 SIPP_OK, "%s", err);
    cr_assert_str_eq(sipp_catalog_find(c, "w")->recipe, SIPP_RECIPE_WHISPERCPP);
    cr_assert_str_eq(sipp_catalog_find(c, "g")->recipe, SIPP_RECIPE_LLAMACPP);
    cr_assert_str_eq(sipp_catalog_find(c, "n")->recipe, SIPP_RECIPE_WHISPERCPP);
    sipp_catalog_free(c);
}

Test(catalog, shipped_file_is_valid) {
    /* the catalog that ships with sipp, from the source tree */
    const char *path = "catalog/catalog.json";
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "run the unit tests from the repository root (%s)", path);
    char *text = malloc(1 << 20);
    size_t len = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    sipp_catalog *c = sipp_catalog_new();
    char err[SIPP_ERROR_SIZE] = "";
    cr_assert_eq(sipp_catalog_parse(c, text, len, path, err), SIPP_OK, "%s", err);
    cr_assert_geq(c->n, 5);
    for (size_t i = 0; i < c->n; i++)
        cr_assert_gt(c->entries[i].n_labels, 0, "%s has no labels", c->entries[i].name);
    sipp_catalog_free(c);
    free(text);
}

/* ---- sha256 ------------------------------------------------------------------------------------ */

Test(sha256, known_vectors, .init = make_tmp, .fini = remove_tmp) {
    char p[PATH_MAX], hex[SIPP_SHA256_HEX], err[SIPP_ERROR_SIZE];
    snprintf(p, sizeof p, "%s/abc", tmp);
    write_file(p, "abc");
    cr_assert_eq(sipp_sha256_file(p, hex, err), SIPP_OK);
    cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    snprintf(p, sizeof p, "%s/empty", tmp);
    write_file(p, "");
    cr_assert_eq(sipp_sha256_file(p, hex, err), SIPP_OK);
    cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    cr_assert(sipp_sha256_valid(SHA_A));
    cr_assert(sipp_sha256_valid("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
    cr_assert_not(sipp_sha256_valid("ba7816bf"));
    cr_assert_not(sipp_sha256_valid("zz7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    bool cached;
    cr_assert_eq(sipp_store_file_sha256(p, hex, &cached, err), SIPP_OK, "%s", err);
    cr_assert_not(cached);
    cr_assert_eq(sipp_store_file_sha256(p, hex, &cached, err), SIPP_OK, "%s", err);
    cr_assert(cached, "the second call reuses the hash");
}
