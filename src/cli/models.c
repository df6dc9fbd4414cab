/*
 * models.c: `sipp models`: list, inspect and remove models in the local store.
 *
 *   sipp models list [--json] [--all]       what the store holds; --all adds the catalog's models
 *   sipp models info NAME|PATH [--json]     a GGUF header (or a whisper.cpp model's) read without loading
 *                                           weights, and the sha256
 *   sipp models rm NAME...                  removes models (and their partial downloads)
 *   sipp models path NAME                   the file a MODEL argument resolves to
 *
 * The work is in src/store (store.c, catalog.c, gguf_info.c); this file only prints. JSON output is one
 * object on stdout with fixed keys, values unknown to the model's header are null.
 */
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "util/util.h"
#include "util/whisper_info_json.h"

#define PROJECTOR_TEXT 128
#define SIZE_TEXT 32
#define DATE_LEN 10 /* "YYYY-MM-DD" of an ISO 8601 time */
#define LABELS_TEXT 128
#define INFO_MAX_PARALLEL 256

static const char usage[] =
    "usage: sipp models list [--json] [--all]\n"
    "       sipp models info NAME|PATH [--json] [--no-hash]\n"
    "       sipp models rm NAME...\n"
    "       sipp models path NAME\n"
    "\n"
    "  list    the models in the local store; --all adds the catalog's models that can be pulled\n"
    "  info    reads a GGUF header (no weights are loaded): architecture, parameters, context length,\n"
    "          sizes, quantisation types, tokenizer, chat template, file size and sha256 (cached;\n"
    "          --no-hash skips it); for a whisper.cpp model its hyperparameters, size name and\n"
    "          file type\n"
    "  rm      removes models from the store, with any partial downloads of them\n"
    "  path    prints the GGUF file a model name (or path) resolves to\n"
    "\n"
    "The store is $SIPP_MODELS_DIR (default ${XDG_DATA_HOME:-~/.local/share}/sipp/models); the user\n"
    "catalog is catalog.json beside it; the shipped catalog is found as docs/models.md explains\n"
    "(SIPP_CATALOG overrides it).\n"
    "\n"
    "exit status: 0 success, 1 runtime failure (including a model that is not there), 2 bad usage\n";

static json_t *json_int_or_null(int64_t v) { return v < 0 ? json_null() : json_integer((json_int_t)v); }

static json_t *json_strings(char **v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static void join(char **v, size_t n, char *out, size_t cap) {
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < n && used < cap; i++) {
        int w = snprintf(out + used, cap - used, "%s%s", i ? "," : "", v[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

static int print_json(json_t *j) {
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text) {
        cli_error("out of memory");
        return EXIT_RUNTIME;
    }
    printf("%s\n", text);
    free(text);
    return EXIT_OK;
}

/* The catalog entry's fields that describe a model, added to obj. */
static void add_catalog_fields(json_t *obj, const sipp_catalog_entry *e) {
    json_object_set_new(obj, "labels", e ? json_strings(e->labels, e->n_labels) : json_array());
    json_object_set_new(obj, "backends", e ? json_strings(e->backends, e->n_backends) : json_array());
    json_object_set_new(obj, "ctx_size", e && e->ctx_size ? json_integer(e->ctx_size) : json_null());
    json_object_set_new(obj, "description", json_string(e ? e->description : ""));
    json_object_set_new(obj, "in_catalog", json_boolean(e != NULL));
}

/* What a listing shows: the store's models, and with --all the catalog's. */
typedef struct {
    const char *dir;
    const sipp_catalog *cat; /* NULL when it did not load */
    const sipp_store_model *models;
    size_t n;
    bool all;
} listing;

static bool in_store(const listing *l, const char *name) {
    for (size_t j = 0; j < l->n; j++)
        if (strcmp(l->models[j].name, name) == 0) return true;
    return false;
}

/* A store model's projector (sipp_store_model.mmproj) for list --json; null when none. */
static json_t *store_mmproj_json(const listing *l, const sipp_store_model *m) {
    const sipp_store_file *f = m->mmproj;
    if (!f) return json_null();
    char path[PATH_MAX + sizeof f->file];
    snprintf(path, sizeof path, "%s/%s", l->dir, f->file);
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "file", f->file, "path", path, "size", (json_int_t)f->size,
                     "url", f->url ? f->url : "", "sha256", f->sha256);
}

/* What runs a catalog entry's model (llamacpp when the entry does not say). */
static const char *entry_recipe(const sipp_catalog_entry *e) {
    return e->recipe && *e->recipe ? e->recipe : SIPP_RECIPE_LLAMACPP;
}

static int list_json(const listing *l) {
    const sipp_catalog *cat = l->cat;
    json_t *list = json_array();
    for (size_t i = 0; i < l->n; i++) {
        const sipp_store_model *m = &l->models[i];
        json_t *o = json_pack("{s:s, s:b, s:s, s:I, s:i, s:s, s:s, s:s, s:b, s:s}", "name", m->name,
                              "in_store", 1, "path", m->path, "size", (json_int_t)m->size, "n_files",
                              m->n_files, "source", m->source, "url", m->files[0].url, "sha256",
                              m->files[0].sha256, "sha256_verified", m->verified, "pulled_at", m->pulled_at);
        add_catalog_fields(o, sipp_catalog_find(cat, m->name));
        json_object_set_new(o, "mmproj", store_mmproj_json(l, m));
        json_object_set_new(o, "recipe", json_string(m->recipe));
        json_array_append_new(list, o);
    }
    for (size_t i = 0; l->all && cat && i < cat->n; i++) {
        const sipp_catalog_entry *e = &cat->entries[i];
        if (in_store(l, e->name)) continue;
        json_t *o = json_pack("{s:s, s:b, s:s, s:o, s:o, s:o}", "name", e->name, "in_store", 0, "url", e->url,
                              "size", e->size ? json_integer((json_int_t)e->size) : json_null(), "sha256",
                              json_strings(e->sha256, e->n_sha256), "license", json_string(e->license));
        add_catalog_fields(o, e);
        json_object_set_new(o, "mmproj", *e->mmproj ? json_pack("{s:s}", "url", e->mmproj) : json_null());
        json_object_set_new(o, "recipe", json_string(entry_recipe(e)));
        json_array_append_new(list, o);
    }
    json_t *root =
        json_pack("{s:s, s:o, s:s, s:b, s:o}", "store", l->dir, "catalog",
                  cat && cat->shipped_path[0] ? json_string(cat->shipped_path) : json_null(), "user_catalog",
                  cat ? cat->user_path : "", "user_catalog_exists", cat && cat->user_exists, "models", list);
    return print_json(root);
}

/* The projector pulled with a model, on a row of its own under the model's: "  + projector FILE, SIZE". */
static void print_mmproj_row(const sipp_store_model *m) {
    if (!m->mmproj) return;
    char size[SIZE_TEXT];
    sipp_format_size(m->mmproj->size, size, sizeof size);
    printf("  + projector %s, %s\n", m->mmproj->file, size);
}

/* The table with --all: the store's models with their catalog labels, then the catalog's others. */
static void list_text_all(const listing *l, int width) {
    const sipp_catalog *cat = l->cat;
    char size[SIZE_TEXT], labels[LABELS_TEXT];
    printf("%-*s  %10s  %-10s  %-9s  %-28s  %s\n", width, "NAME", "SIZE", "RECIPE", "STORE", "LABELS",
           "DESCRIPTION");
    for (size_t i = 0; i < l->n; i++) {
        const sipp_store_model *m = &l->models[i];
        const sipp_catalog_entry *e = sipp_catalog_find(cat, m->name);
        sipp_format_size(m->size, size, sizeof size);
        join(e ? e->labels : NULL, e ? e->n_labels : 0, labels, sizeof labels);
        printf("%-*s  %10s  %-10s  %-9s  %-28s  %s\n", width, m->name, size, m->recipe, "pulled",
               labels[0] ? labels : "-", e ? e->description : "");
        print_mmproj_row(m);
    }
    for (size_t i = 0; cat && i < cat->n; i++) {
        const sipp_catalog_entry *e = &cat->entries[i];
        if (in_store(l, e->name)) continue;
        if (e->size)
            sipp_format_size(e->size, size, sizeof size);
        else
            sipp_strlcpy(size, "?", sizeof size);
        join(e->labels, e->n_labels, labels, sizeof labels);
        printf("%-*s  %10s  %-10s  %-9s  %-28s  %s\n", width, e->name, size, entry_recipe(e), "-",
               labels[0] ? labels : "-", e->description);
    }
    if (!cat || !cat->shipped_path[0])
        fprintf(stderr, "sipp: no shipped catalog was found; set SIPP_CATALOG to its path\n");
}

static void list_text(const listing *l) {
    if (l->n == 0 && !l->all) {
        printf("no models in the store (%s); pull one with: sipp pull NAME|URL (sipp models list --all shows "
               "the "
               "catalog)\n",
               l->dir);
        return;
    }
    int width = (int)strlen("NAME");
    for (size_t i = 0; i < l->n; i++)
        width = (int)strlen(l->models[i].name) > width ? (int)strlen(l->models[i].name) : width;
    for (size_t i = 0; l->all && l->cat && i < l->cat->n; i++)
        width = (int)strlen(l->cat->entries[i].name) > width ? (int)strlen(l->cat->entries[i].name) : width;
    if (l->all) {
        list_text_all(l, width);
        return;
    }
    char size[SIZE_TEXT];
    printf("%-*s  %10s  %-10s  %-10s  %s\n", width, "NAME", "SIZE", "RECIPE", "PULLED", "SOURCE");
    for (size_t i = 0; i < l->n; i++) {
        const sipp_store_model *m = &l->models[i];
        sipp_format_size(m->size, size, sizeof size);
        printf("%-*s  %10s  %-10s  %-10.*s  %s\n", width, m->name, size, m->recipe, DATE_LEN,
               m->pulled_at[0] ? m->pulled_at : "-", m->source[0] ? m->source : "(copied in)");
        print_mmproj_row(m);
    }
}

/* The options of models list and models info. sipp models --help (the usage above) covers every
 * form, so it is printed for --help after any of them. */
typedef struct {
    cli_common c;
    bool all;     /* list --all */
    bool no_hash; /* info --no-hash */
    int parallel; /* info --parallel: the slots the memory estimate assumes */
} models_options;

static const cli_option opt_all = {.name = "--all",
                                   .kind = CLI_OPT_FLAG,
                                   .offset = offsetof(models_options, all),
                                   .help = "add the catalog's models that can be pulled"};
static const cli_option opt_no_hash = {.name = "--no-hash",
                                       .kind = CLI_OPT_FLAG,
                                       .offset = offsetof(models_options, no_hash),
                                       .help = "skip the file's sha256"};
static const cli_option *const list_options[] = {&cli_opt_json, &opt_all, NULL};
static const cli_option opt_parallel = {.name = "--parallel",
                                        .arg = "N",
                                        .kind = CLI_OPT_INT,
                                        .offset = offsetof(models_options, parallel),
                                        .lo = 1,
                                        .hi = INFO_MAX_PARALLEL,
                                        .help = "the slots the memory estimate assumes (default 4)"};
static const cli_option *const info_options[] = {&cli_opt_json,     &opt_no_hash,  &cli_opt_backend,
                                                 &cli_opt_ctx_size, &opt_parallel, NULL};
static const char list_about[] =
    "The models in the local store; --all adds the catalog's models that can be pulled.\n";

static const cli_command list_command = {.name = "models list",
                                         .synopsis = "models list [--json] [--all]",
                                         .about = list_about,
                                         .options = list_options,
                                         .max_args = 0,
                                         .args_hint = "models list takes options only"};
static const char info_about[] =
    "Reads a GGUF header (no weights are loaded) and the file's sha256 (cached; --no-hash skips it).\n"
    "A whisper.cpp model (ggml-*.bin) shows its header's hyperparameters, whisper.cpp's size name, its\n"
    "file type and the estimate for --backend and --parallel whisper states (default 1).\n"
    "--json adds memory_estimate: what serving it would take (weights, KV cache, compute buffers, per\n"
    "place) for --backend (default auto), --ctx-size (default: the model's, at most 4096) and\n"
    "--parallel slots, as `sipp serve` estimates it before a load: size a container's memory from it.\n";

static const cli_command info_command = {.name = "models info",
                                         .synopsis =
                                             "models info NAME|PATH [--json] [--no-hash] [--backend NAME] "
                                             "[--ctx-size N] [--parallel N]",
                                         .about = info_about,
                                         .options = info_options,
                                         .max_args = 1,
                                         .args_hint = "models info takes one NAME or PATH"};

static int models_list(int argc, char **argv) {
    models_options o = {0};
    int n_args;
    int rc = cli_parse(&list_command, argc, argv, &o, NULL, &n_args);
    if (rc != CLI_PARSED) return rc;
    bool as_json = o.c.json, all = o.all;
    char err[SIPP_ERROR_SIZE], dir[PATH_MAX];
    if (sipp_store_dir(dir, sizeof dir, err) != SIPP_OK) {
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    sipp_catalog *cat = NULL;
    if (sipp_catalog_load(&cat, err) != SIPP_OK) {
        if (all) {
            cli_error("%s", err);
            return EXIT_RUNTIME;
        }
        fprintf(stderr, "sipp: warning: %s\n", err); /* the store can still be listed */
    }
    sipp_store_model *models;
    size_t n;
    if (sipp_store_list(dir, &models, &n, err) != SIPP_OK) {
        cli_error("%s", err);
        sipp_catalog_free(cat);
        return EXIT_RUNTIME;
    }
    listing l = {dir, cat, models, n, all};
    rc = EXIT_OK;
    if (as_json)
        rc = list_json(&l);
    else
        list_text(&l);
    sipp_store_list_free(models, n);
    sipp_catalog_free(cat);
    return rc;
}

static int models_rm(int argc, char **argv) {
    if (argc == 0) {
        cli_error("models rm needs a NAME (see sipp models list)");
        return EXIT_USAGE;
    }
    for (int i = 0; i < argc; i++)
        if (argv[i][0] == '-') {
            cli_error("unknown option '%s' to models rm", argv[i]);
            return EXIT_USAGE;
        }
    char err[SIPP_ERROR_SIZE], dir[PATH_MAX];
    if (sipp_store_dir(dir, sizeof dir, err) != SIPP_OK) {
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    int rc = EXIT_OK;
    for (int i = 0; i < argc; i++) {
        if (sipp_store_remove(dir, argv[i], err) != SIPP_OK) {
            cli_error("%s", err);
            rc = EXIT_RUNTIME;
            continue;
        }
        printf("removed %s\n", argv[i]);
    }
    return rc;
}

static int models_path(int argc, char **argv) {
    if (argc != 1 || argv[0][0] == '-') {
        cli_error("usage: sipp models path NAME");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE], path[PATH_MAX];
    if (sipp_store_resolve(argv[0], path, sizeof path, err) != SIPP_OK) {
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    printf("%s\n", path);
    return EXIT_OK;
}

typedef struct file_hash {
    char path[PATH_MAX];
    uint64_t size;
    char sha256[SIPP_SHA256_HEX];
    bool cached;
} file_hash;

/* A header value for a table: "-" when the model does not say. */
static const char *num(int64_t v, char buf[32]) {
    if (v < 0) return "-";
    snprintf(buf, 32, "%lld", (long long)v);
    return buf;
}

/* The draft row of models info: the sidecar's path, or the catalog's draft that is not pulled. */
static void draft_text(const sipp_draft_sidecar *d, char *buf, size_t cap) {
    if (*d->path)
        snprintf(buf, cap, "%s (%s; use it with --draft)", d->path,
                 *d->catalog ? "the catalog's draft" : "published beside the model");
    else if (*d->catalog)
        snprintf(buf, cap, "%s (the catalog's draft; not pulled: sipp pull %s)", d->catalog, d->catalog);
    else
        snprintf(buf, cap, "-");
}

static json_t *draft_json(const sipp_draft_sidecar *d) {
    if (!*d->path && !*d->catalog) return json_null();
    return json_pack("{s:o, s:o, s:b}", "path", *d->path ? json_string(d->path) : json_null(), "catalog",
                     *d->catalog ? json_string(d->catalog) : json_null(), "pulled", *d->path != 0);
}

/* The projector row of models info: "vision (mlp, 48 px) -> 64-wide embeddings". */
static void projector_text(const sipp_gguf_info *g, char *out, size_t cap) {
    const char *modality = g->projector_vision && g->projector_audio ? "vision+audio"
                           : g->projector_vision                     ? "vision"
                           : g->projector_audio                      ? "audio"
                                                                     : "no encoder";
    char size[64] = "", width[48] = "embeddings of unknown width";
    if (g->projector_image_size > 0 && g->projector_patch_size > 0)
        snprintf(size, sizeof size, ", %lld px in %lld px patches", (long long)g->projector_image_size,
                 (long long)g->projector_patch_size);
    else if (g->projector_image_size > 0)
        snprintf(size, sizeof size, ", %lld px", (long long)g->projector_image_size);
    if (g->projector_n_embd > 0)
        snprintf(width, sizeof width, "%lld-wide embeddings", (long long)g->projector_n_embd);
    snprintf(out, cap, "%s (%s%s) -> %s", modality, g->projector_type[0] ? g->projector_type : "unknown type",
             size, width);
}

/* The projector beside a text model (sipp_store_find_mmproj): its path, or why there is none to take
 * (several) in why; both "" when there is none. */
typedef struct {
    char path[SIPP_PATH_MAX];
    char why[SIPP_ERROR_SIZE];
} mmproj_sidecar;

static void find_mmproj_sidecar(const sipp_gguf_info *g, mmproj_sidecar *out) {
    memset(out, 0, sizeof *out);
    if (g->projector) return;
    sipp_status st = sipp_store_find_mmproj(g->path, out->path, sizeof out->path, out->why);
    if (st != SIPP_ERR_INVALID_ARGUMENT) out->why[0] = '\0'; /* none is no news */
    if (st != SIPP_OK) out->path[0] = '\0';
}

static void print_info_text(const char *name, const sipp_gguf_info *g, const file_hash *files, bool hashed,
                            const sipp_draft_sidecar *draft, const mmproj_sidecar *mm) {
    char size[SIZE_TEXT], nb[32];
    const char *dash = "-";
#define ROW(label, ...)                                                                                      \
    do {                                                                                                     \
        printf("%-15s ", label);                                                                             \
        printf(__VA_ARGS__);                                                                                 \
        putchar('\n');                                                                                       \
    } while (0)
    if (name) ROW("name", "%s (in the store)", name);
    ROW("path", "%s", g->path);
    sipp_format_size(g->file_size, size, sizeof size);
    if (g->n_files > 1)
        ROW("file size", "%s (%llu bytes, %d files)", size, (unsigned long long)g->file_size, g->n_files);
    else
        ROW("file size", "%s (%llu bytes)", size, (unsigned long long)g->file_size);
    if (hashed)
        for (int i = 0; i < g->n_files; i++)
            ROW(i == 0 ? "sha256" : "", "%s%s%s", files[i].sha256, g->n_files > 1 ? "  " : "",
                g->n_files > 1 ? strrchr(files[i].path, '/') ? strrchr(files[i].path, '/') + 1 : files[i].path
                               : "");
    ROW("architecture", "%s", g->architecture);
    if (g->name[0]) ROW("general.name", "%s", g->name);
    double params = (double)g->n_params;
    const char *unit = params >= 1e9 ? "B" : params >= 1e6 ? "M" : "K";
    double scaled = params >= 1e9 ? params / 1e9 : params >= 1e6 ? params / 1e6 : params / 1e3;
    ROW("parameters", "%.2f %s (%llu)", scaled, unit, (unsigned long long)g->n_params);
    if (g->file_type[0]) ROW("file type", "%s", g->file_type);
    if (g->projector) {
        /* a projector has no text hyperparameters: what it takes in and gives the text model instead */
        char ptext[PROJECTOR_TEXT];
        projector_text(g, ptext, sizeof ptext);
        ROW("projector", "%s", ptext);
    } else {
        ROW("context length", "%s", num(g->n_ctx_train, nb));
        ROW("embedding", "%s", num(g->n_embd, nb));
        ROW("layers", "%s", num(g->n_layer, nb));
        ROW("heads", "%s", num(g->n_head, nb));
        ROW("kv heads", "%s", num(g->n_head_kv, nb));
        ROW("feed-forward", "%s", num(g->n_ff, nb));
        ROW("vocabulary", "%s", num(g->n_vocab, nb));
        ROW("tokenizer", "%s", g->tokenizer[0] ? g->tokenizer : dash);
        ROW("chat template", "%s", g->has_chat_template ? "yes" : "no");
        if (g->pooling[0]) ROW("pooling", "%s", g->pooling);
        char dtext[SIPP_PATH_MAX + SIPP_NAME_MAX + 64];
        draft_text(draft, dtext, sizeof dtext);
        ROW("draft", "%s", dtext);
        if (*mm->path)
            ROW("mmproj", "%s (beside the model; use it with --mmproj auto)", mm->path);
        else
            ROW("mmproj", "%s", *mm->why ? mm->why : dash);
    }
    printf("%-15s ", "tensor types");
    for (int i = 0; i < g->n_types; i++)
        printf("%s%s x%lld", i ? ", " : "", g->types[i].type, (long long)g->types[i].n_tensors);
    printf(" (%lld tensors)\n", (long long)g->n_tensors);
#undef ROW
}

/* The projector object of models info --json; null for any file but a projector. */
static json_t *projector_json(const sipp_gguf_info *g) {
    if (!g->projector) return json_null();
    return json_pack(
        "{s:b, s:b, s:s, s:o, s:o, s:o}", "vision", g->projector_vision, "audio", g->projector_audio, "type",
        g->projector_type, "image_size", json_int_or_null(g->projector_image_size), "patch_size",
        json_int_or_null(g->projector_patch_size), "n_embd", json_int_or_null(g->projector_n_embd));
}

static json_t *info_json(const char *name, const sipp_gguf_info *g, const file_hash *files, bool hashed,
                         const sipp_draft_sidecar *draft, const mmproj_sidecar *mm) {
    json_t *quant = json_object(), *types = json_array(), *jfiles = json_array();
    for (int i = 0; i < g->n_types; i++) {
        const sipp_gguf_type_count *t = &g->types[i];
        json_object_set_new(quant, t->type, json_integer(t->n_tensors));
        json_array_append_new(types, json_pack("{s:s, s:I, s:I, s:I}", "type", t->type, "n_tensors",
                                               (json_int_t)t->n_tensors, "n_params", (json_int_t)t->n_params,
                                               "bytes", (json_int_t)t->bytes));
    }
    for (int i = 0; i < g->n_files; i++)
        json_array_append_new(jfiles, json_pack("{s:s, s:I, s:o}", "path", files[i].path, "size",
                                                (json_int_t)files[i].size, "sha256",
                                                hashed ? json_string(files[i].sha256) : json_null()));
    json_t *o = json_object();
    json_object_set_new(o, "name", name ? json_string(name) : json_null());
    json_object_set_new(o, "path", json_string(g->path));
    json_object_set_new(o, "architecture", json_string(g->architecture));
    json_object_set_new(o, "general_name", json_string(g->name));
    json_object_set_new(o, "file_type", g->file_type[0] ? json_string(g->file_type) : json_null());
    json_object_set_new(o, "gguf_version", json_integer(g->gguf_version));
    json_object_set_new(o, "n_params", json_integer((json_int_t)g->n_params));
    json_object_set_new(o, "n_tensors", json_integer((json_int_t)g->n_tensors));
    json_object_set_new(o, "n_ctx_train", json_int_or_null(g->n_ctx_train));
    json_object_set_new(o, "n_embd", json_int_or_null(g->n_embd));
    json_object_set_new(o, "n_layer", json_int_or_null(g->n_layer));
    json_object_set_new(o, "n_head", json_int_or_null(g->n_head));
    json_object_set_new(o, "n_head_kv", json_int_or_null(g->n_head_kv));
    json_object_set_new(o, "n_ff", json_int_or_null(g->n_ff));
    json_object_set_new(o, "n_vocab", json_int_or_null(g->n_vocab));
    json_object_set_new(o, "tokenizer", g->tokenizer[0] ? json_string(g->tokenizer) : json_null());
    json_object_set_new(o, "has_chat_template", json_boolean(g->has_chat_template));
    json_object_set_new(o, "pooling", g->pooling[0] ? json_string(g->pooling) : json_null());
    json_object_set_new(o, "quantization", quant);
    json_object_set_new(o, "tensor_types", types);
    json_object_set_new(o, "file_size", json_integer((json_int_t)g->file_size));
    json_object_set_new(o, "n_files", json_integer(g->n_files));
    json_object_set_new(o, "sha256", hashed ? json_string(files[0].sha256) : json_null());
    json_object_set_new(o, "sha256_cached", hashed ? json_boolean(files[0].cached) : json_null());
    json_object_set_new(o, "files", jfiles);
    json_object_set_new(o, "draft", draft_json(draft));
    json_object_set_new(o, "projector", projector_json(g));
    json_object_set_new(o, "mmproj", *mm->path ? json_string(mm->path) : json_null());
    return o;
}

/* An estimate as JSON: where it would sit and what it would be (the numbers `sipp serve` budgets with). */
static json_t *memory_json(const char *backend, json_t *ctx_size, int parallel, const sipp_memory *m) {
    json_t *devs = json_object();
    for (int i = 0; i < m->n_devices; i++)
        json_object_set_new(devs, m->devices[i].name, json_integer((json_int_t)m->devices[i].bytes));
    return json_pack("{s:s, s:o, s:i, s:I, s:o, s:I, s:I, s:I, s:I}", "backend", backend ? backend : "auto",
                     "ctx_size", ctx_size, "parallel", parallel, "host_bytes", (json_int_t)m->host_bytes,
                     "device_bytes", devs, "total_bytes", (json_int_t)sipp_memory_total(m), "weights_bytes",
                     (json_int_t)m->weights_bytes, "kv_bytes", (json_int_t)m->kv_bytes, "compute_bytes",
                     (json_int_t)m->compute_bytes);
}

/* What serving the model would take by sipp's own estimate (sipp_memory_estimate, the number the
 * gateway's residency budgets with), for the options' backend, context and slots; null, with the
 * reason, for a file it cannot estimate (a projector). */
static json_t *estimate_json(const char *path, const sipp_gguf_info *g, const models_options *o) {
    if (g->projector) return json_null();
    sipp_model_params mp = sipp_model_default_params();
    sipp_engine_params ep = sipp_engine_default_params();
    if (o->c.backend) mp.backend = o->c.backend;
    if (o->c.ctx_size) ep.ctx_size = o->c.ctx_size;
    if (o->parallel) ep.parallel = o->parallel;
    sipp_memory m;
    char err[SIPP_ERROR_SIZE];
    if (sipp_memory_estimate(path, &mp, &ep, &m, err) != SIPP_OK) return json_pack("{s:s}", "error", err);
    return memory_json(mp.backend, ep.ctx_size ? json_integer(ep.ctx_size) : json_null(), ep.parallel, &m);
}

/* ---- a whisper.cpp model: its own header, not GGUF ---- */

static void row(const char *label, const char *fmt, ...) SIPP_PRINTF(2, 3);
static void row(const char *label, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%-15s ", label);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

/* What a whisper target would take (sipp_transcriber_estimate, the whisper kind's estimate): the
 * weights, and --parallel states (default 1, a whisper target's) on --backend. */
static sipp_status whisper_estimate(const char *path, const models_options *o, sipp_transcriber_params *tp,
                                    sipp_memory *m, char *err) {
    *tp = sipp_transcriber_default_params();
    if (o->c.backend) tp->backend = o->c.backend;
    if (o->parallel) tp->parallel = o->parallel;
    return sipp_transcriber_estimate(path, tp, m, err);
}

static void print_whisper_text(const char *name, const char *path, const sipp_whisper_info *w,
                               const char *sha, const models_options *o) {
    char size[SIZE_TEXT], mem[SIZE_TEXT], err[SIPP_ERROR_SIZE];
    if (name) row("name", "%s (in the store)", name);
    row("path", "%s", path);
    sipp_format_size(w->file_bytes, size, sizeof size);
    row("file size", "%s (%llu bytes)", size, (unsigned long long)w->file_bytes);
    if (sha[0]) row("sha256", "%s", sha);
    row("format", "whisper.cpp ggml (recipe %s)", SIPP_RECIPE_WHISPERCPP);
    row("size", "%s (%s)", w->size_name, w->multilingual ? "multilingual" : "English only");
    row("file type", "%s (ftype %d, quantization version %d)", w->ftype_name, (int)w->ftype,
        (int)w->qnt_version);
    row("audio encoder", "ctx %d, state %d, heads %d, layers %d", (int)w->n_audio_ctx, (int)w->n_audio_state,
        (int)w->n_audio_head, (int)w->n_audio_layer);
    row("text decoder", "ctx %d, state %d, heads %d, layers %d", (int)w->n_text_ctx, (int)w->n_text_state,
        (int)w->n_text_head, (int)w->n_text_layer);
    row("vocabulary", "%d", (int)w->n_vocab);
    row("mel bins", "%d", (int)w->n_mels);
    row("tensors", "%d", w->n_tensors);
    sipp_transcriber_params tp;
    sipp_memory m;
    if (whisper_estimate(path, o, &tp, &m, err) != SIPP_OK) {
        row("memory (est.)", "not estimated: %s", err);
        return;
    }
    sipp_format_size(sipp_memory_total(&m), mem, sizeof mem);
    row("memory (est.)", "%s on %s with %d state%s (--backend, --parallel)", mem,
        tp.backend ? tp.backend : "auto", tp.parallel, tp.parallel == 1 ? "" : "s");
}

static json_t *whisper_json(const char *name, const char *path, const sipp_whisper_info *w, const char *sha,
                            bool cached, const models_options *o) {
    sipp_transcriber_params tp;
    sipp_memory m;
    char err[SIPP_ERROR_SIZE];
    json_t *estimate = whisper_estimate(path, o, &tp, &m, err) == SIPP_OK
                           ? memory_json(tp.backend, json_null(), tp.parallel, &m)
                           : json_pack("{s:s}", "error", err);
    return json_pack("{s:o, s:s, s:s, s:s, s:I, s:o, s:o, s:o, s:o}", "name",
                     name ? json_string(name) : json_null(), "path", path, "format", "whisper.cpp", "recipe",
                     SIPP_RECIPE_WHISPERCPP, "file_size", (json_int_t)w->file_bytes, "sha256",
                     sha[0] ? json_string(sha) : json_null(), "sha256_cached",
                     sha[0] ? json_boolean(cached) : json_null(), "whisper", sipp_whisper_info_json(w),
                     "memory_estimate", estimate);
}

/* models info on a whisper.cpp model: the header's hyperparameters, the file, and the estimate. */
static int whisper_info(const char *name, const char *path, const models_options *o) {
    sipp_whisper_info w;
    char err[SIPP_ERROR_SIZE], sha[SIPP_SHA256_HEX] = "";
    bool cached = false;
    if (sipp_whisper_inspect(path, &w, err) != SIPP_OK ||
        (!o->no_hash && sipp_store_file_sha256(path, sha, &cached, err) != SIPP_OK)) {
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    if (o->c.ctx_size) {
        cli_error("models info: --ctx-size does not apply to '%s', a whisper.cpp model (its text context is "
                  "fixed by the model: %d)",
                  path, (int)w.n_text_ctx);
        return EXIT_USAGE;
    }
    if (o->c.json) return print_json(whisper_json(name, path, &w, sha, cached, o));
    print_whisper_text(name, path, &w, sha, o);
    return EXIT_OK;
}

static int models_info(int argc, char **argv) {
    models_options o = {0};
    const char *target = NULL;
    int n_args;
    int rc = cli_parse(&info_command, argc, argv, &o, &target, &n_args);
    if (rc != CLI_PARSED) return rc;
    bool as_json = o.c.json, hash = !o.no_hash;
    if (!target) {
        cli_error("models info needs a NAME or PATH");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE], path[PATH_MAX];
    if (sipp_store_resolve(target, path, sizeof path, err) != SIPP_OK) {
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    struct stat st;
    const char *name = strcmp(path, target) != 0 ? target : NULL; /* a store name, not a path */
    sipp_gguf_info *g = malloc(sizeof *g);
    file_hash *files = NULL;
    rc = EXIT_RUNTIME;
    if (!g) {
        cli_error("out of memory");
        return EXIT_RUNTIME;
    }
    if (sipp_is_whisper_model(path)) { /* whisper.cpp's own format, not GGUF */
        rc = whisper_info(name, path, &o);
        goto out;
    }
    if (sipp_gguf_inspect(path, g, err) != SIPP_OK) {
        cli_error("%s", err);
        goto out;
    }
    files = calloc((size_t)g->n_files, sizeof *files);
    if (!files) {
        cli_error("out of memory");
        goto out;
    }
    for (int i = 0; i < g->n_files; i++) {
        file_hash *f = &files[i];
        if (g->n_files == 1)
            snprintf(f->path, sizeof f->path, "%s", g->path);
        else
            sipp_split_sibling(g->path, i + 1, f->path, sizeof f->path);
        if (stat(f->path, &st) == 0) f->size = (uint64_t)st.st_size;
        if (hash && sipp_store_file_sha256(f->path, f->sha256, &f->cached, err) != SIPP_OK) {
            cli_error("%s", err);
            goto out;
        }
    }
    sipp_draft_sidecar draft;
    sipp_store_find_draft(path, name, &draft, err); /* none: an empty answer */
    mmproj_sidecar mm;
    find_mmproj_sidecar(g, &mm);
    if (as_json) {
        json_t *j = info_json(name, g, files, hash, &draft, &mm);
        json_object_set_new(j, "memory_estimate", estimate_json(path, g, &o));
        rc = print_json(j);
    } else {
        print_info_text(name, g, files, hash, &draft, &mm);
        rc = EXIT_OK;
    }
out:
    free(files);
    free(g);
    return rc;
}

int cmd_models(int argc, char **argv) {
    if (argc == 0 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
        strcmp(argv[0], "help") == 0) {
        fputs(usage, argc == 0 ? stderr : stdout);
        return argc == 0 ? EXIT_USAGE : EXIT_OK;
    }
    if (cli_wants_help(argc - 1, argv + 1)) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    const char *sub = argv[0];
    if (strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0) return models_list(argc - 1, argv + 1);
    if (strcmp(sub, "info") == 0 || strcmp(sub, "show") == 0) return models_info(argc - 1, argv + 1);
    if (strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0) return models_rm(argc - 1, argv + 1);
    if (strcmp(sub, "path") == 0) return models_path(argc - 1, argv + 1);
    cli_error("unknown models subcommand '%s': list, info, rm or path (see sipp models --help)", sub);
    return EXIT_USAGE;
}
