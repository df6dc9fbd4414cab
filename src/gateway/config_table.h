/*
 * config_table.h: the configuration file's keys as tables, one per section, and the one reader and
 * printer that walk them (config_table.c). The tables themselves are in config_keys.c.
 *
 * A row names a key, its kind (which says how the TOML value is checked and stored), its range or
 * its values, the field it fills (an offset into the section's struct: gw_config, gw_target_config,
 * ...), and its help line. Parsing a section checks its keys against the rows (an unknown key is
 * named with the closest known one), then reads each row in order: a key read later may look at one
 * read before (draft_model at speculative). `sipp serve --config-keys` prints the same rows as the
 * Markdown reference in docs/gateway.md, each default read from a struct the section's init filled,
 * so a key, its check and its documentation cannot drift apart (Redis's standardConfig and
 * src/cli/options.c's flag tables are the models).
 *
 * Depends on util/ only: the reader knows offsets, not the gateway's structs.
 */
#ifndef SIPP_GATEWAY_CONFIG_TABLE_H
#define SIPP_GATEWAY_CONFIG_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/toml.h"
#include "util/util.h"

/* What parsing one file needs: where messages go and whether there was one. */
typedef struct gw_cfg_ctx {
    const char *file;  /* for messages */
    const char *path;  /* the config file, NULL when there is none: relative paths stay as given */
    const char *where; /* the section being read, as messages name it: "[server]", "target 'a'" */
    sipp_buf *errs;
    bool ok;
} gw_cfg_ctx;

typedef enum gw_cfg_kind {
    GW_CFG_STRING,   /* char *: a non-empty string */
    GW_CFG_PATH,     /* char *: a string, relative to the config file's directory */
    GW_CFG_INT,      /* int within [lo, hi] */
    GW_CFG_INT64,    /* int64_t within [lo, hi] */
    GW_CFG_SIZE,     /* size_t within [lo, hi] */
    GW_CFG_MB,       /* size_t bytes, given in MiB within [lo, hi] */
    GW_CFG_SECONDS,  /* double, given as whole seconds within [lo, hi] */
    GW_CFG_FRACTION, /* float, a number within [lo, hi) */
    GW_CFG_BOOL,     /* bool */
    GW_CFG_ENUM,     /* char *: one of values ("none|ngram|draft"), or what check accepts */
    GW_CFG_CHOICE,   /* an enum field (int): the index of the value among values */
    GW_CFG_LIST,     /* char ** and its count (count_offset): an array of non-empty strings */
    GW_CFG_TABLE,    /* a table of its own, read by the section sub ([security] rate_limit) */
    GW_CFG_CUSTOM,   /* read: a key whose value has a shape of its own, or that others constrain */
} gw_cfg_kind;

struct gw_cfg_key;
struct gw_cfg_section;

/* A custom row's reader: called whether the key is present or not (a required key reports its
 * absence); obj is the section's struct. Problems go through gw_cfg_err. */
typedef void (*gw_cfg_read_fn)(gw_cfg_ctx *x, const toml_node *tbl, const struct gw_cfg_key *k, void *obj);
/* An enum row's check instead of its values: false with err set ("flash_attn 'x' is not one of ..."),
 * reported as "WHERE: err". obj holds the rows read before it. */
typedef bool (*gw_cfg_check_fn)(const void *obj, const char *value, char *err);

typedef struct gw_cfg_key {
    const char *key;
    gw_cfg_kind kind;
    size_t offset;       /* of the field it fills in the section's struct */
    size_t count_offset; /* GW_CFG_LIST's size_t count */
    double lo, hi;       /* the range of numbers */
    const char *values;  /* GW_CFG_ENUM's and GW_CFG_CHOICE's words, '|'-separated */
    const char *refusal; /* what follows "'VALUE' " when it is not among them; NULL: "is not one of ..." */
    gw_cfg_check_fn check;
    gw_cfg_read_fn read;
    const struct gw_cfg_section *sub; /* GW_CFG_TABLE's section */
    const char *value_doc;            /* the reference's value column, where the kind does not say it */
    const char *default_doc;          /* the reference's default, where the field does not hold it */
    const char *help;                 /* its line in the reference */
} gw_cfg_key;

typedef struct gw_cfg_section {
    const char *name; /* as the reference titles it: "[server]", "[[targets]] type = \"local\"" */
    const gw_cfg_key *keys;
    size_t n_keys;
    /* more rows the same tables accept, read by their own code ([[targets]]' name, type, aliases) */
    const struct gw_cfg_section *also;
    /* after every row: what depends on several keys */
    void (*check)(gw_cfg_ctx *x, const toml_node *tbl, void *obj);
    /* the reference's defaults: a struct of obj_size bytes, zeroed, then init (NULL: zeros), then fini */
    size_t obj_size;
    void (*init)(void *obj);
    void (*fini)(void *obj);
    const char *help; /* a sentence under its title */
} gw_cfg_section;

#define GW_CFG_KEYS(rows) .keys = (rows), .n_keys = (sizeof(rows) / sizeof *(rows))

/* Appends "FILE:LINE: problem" (or "FILE: problem" for line 0) to x->errs and clears x->ok. A quoted
 * value is escaped, so a newline in it cannot start a line of its own. */
void gw_cfg_err(gw_cfg_ctx *x, int line, const char *fmt, ...) SIPP_PRINTF(3, 4);
/* Whether n is of kind; else reports "WHERE KEY: expected WHAT, found KIND". */
bool gw_cfg_expect(gw_cfg_ctx *x, const toml_node *n, toml_kind kind, const char *key, const char *what);
/* The line of n, or of tbl when n is NULL. */
int gw_cfg_line(const toml_node *tbl, const toml_node *n);
/* Checks tbl's keys against s's rows (and s->also's), then reads every row in order into obj, then runs
 * s->check. */
void gw_cfg_read_section(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_section *s, void *obj);
/* Reads one row (what gw_cfg_read_section does for each); false when the key is present and was
 * refused. */
bool gw_cfg_read_key(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_key *k, void *obj);
/* Reports every key of tbl that no row of s (or s->also) names, with the closest known key when one
 * is near: "unknown key 'max_qeue' in [server] (did you mean 'max_queue'? known keys: ...)". */
void gw_cfg_check_keys(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_section *s);
/* The known key nearest to key (at most a third of its letters changed, at least one), or NULL. */
const char *gw_cfg_suggest(const gw_cfg_section *s, const char *key);
/* p relative to the directory of config_path (NULL: p as it is); NULL when out of memory. */
char *gw_cfg_resolve_path(const char *config_path, const char *p);
/* Appends the reference of the sections (NULL-terminated) as Markdown: one table each. */
bool gw_cfg_markdown(const gw_cfg_section *const *sections, sipp_buf *out);
void gw_cfg_free_strv(char **v, size_t n);

/* The configuration file: its top-level keys, each leading to a section's rows (config_keys.c). */
extern const gw_cfg_section gw_config_file;
/* Its sections, in the order the reference gives them (config_keys.c). */
extern const gw_cfg_section *const gw_config_sections[];

#endif
