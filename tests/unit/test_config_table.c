/*
 * Unit tests for src/gateway/config_table.c, the reader and printer of the configuration's key
 * tables: each kind's happy path, a value out of range, a wrong TOML type, an enum value not among
 * its words, an unknown key with and without a suggestion, the order rows are read in, and the
 * Markdown reference. The tables here are the test's own, over a struct of its own; the gateway's
 * real tables are exercised by tests/integration/test_gateway_config.py and compared with
 * docs/gateway.md by tests/lint/test_config_keys.py.
 *
 * The gateway is not part of libsipp, so its two sources under test are compiled in here.
 */
#include "gateway/config_table.c"
#include "gateway/errors.c"

#include <criterion/criterion.h>

typedef struct demo {
    char *name, *dir, *mode;
    int count, choice, inner;
    int64_t big;
    size_t bytes, mb;
    double seconds;
    float fraction;
    bool on;
    char **tags;
    size_t n_tags;
    char *custom; /* what read_custom saw */
} demo;

static void read_custom(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_key *k, void *obj) {
    demo *d = obj;
    const toml_node *n = toml_table_get(tbl, k->key);
    /* rows are read in order: name is already there */
    d->custom = strdup(n ? "present" : d->name ? d->name : "absent");
    if (n && toml_node_kind(n) != TOML_INTEGER)
        gw_cfg_err(x, toml_node_line(n), "%s custom: not a number", x->where);
}

static bool check_even(const void *obj, const char *value, char *err) {
    (void)obj;
    if (strlen(value) % 2 == 0) return true;
    snprintf(err, SIPP_ERROR_SIZE, "mode '%s' has an odd length", value);
    return false;
}

static const gw_cfg_key inner_keys[] = {
    {.key = "inner", .kind = GW_CFG_INT, .offset = offsetof(demo, inner), .lo = 0, .hi = 5, .help = "nested"},
};
static const gw_cfg_section inner_section = {
    .name = "[demo.inner]", GW_CFG_KEYS(inner_keys), .obj_size = sizeof(demo)};

static void init_demo(void *obj) {
    demo *d = obj;
    d->count = 3;
    d->mb = (size_t)2 << 20;
    d->choice = 1;
}

static const gw_cfg_key demo_keys[] = {
    {.key = "name", .kind = GW_CFG_STRING, .offset = offsetof(demo, name), .help = "a name"},
    {.key = "dir", .kind = GW_CFG_PATH, .offset = offsetof(demo, dir), .help = "a directory"},
    {.key = "count",
     .kind = GW_CFG_INT,
     .offset = offsetof(demo, count),
     .lo = 1,
     .hi = 10,
     .help = "how many"},
    {.key = "big", .kind = GW_CFG_INT64, .offset = offsetof(demo, big), .lo = -1, .hi = 1e12, .help = "big"},
    {.key = "bytes",
     .kind = GW_CFG_SIZE,
     .offset = offsetof(demo, bytes),
     .lo = 0,
     .hi = 1e9,
     .help = "bytes"},
    {.key = "mb", .kind = GW_CFG_MB, .offset = offsetof(demo, mb), .lo = 1, .hi = 1024, .help = "MiB"},
    {.key = "seconds",
     .kind = GW_CFG_SECONDS,
     .offset = offsetof(demo, seconds),
     .lo = 1,
     .hi = 60,
     .help = "s"},
    {.key = "fraction",
     .kind = GW_CFG_FRACTION,
     .offset = offsetof(demo, fraction),
     .lo = 0,
     .hi = 1,
     .help = "f"},
    {.key = "on", .kind = GW_CFG_BOOL, .offset = offsetof(demo, on), .help = "a switch"},
    {.key = "mode",
     .kind = GW_CFG_ENUM,
     .offset = offsetof(demo, mode),
     .values = "fast|slow",
     .help = "a mode"},
    {.key = "choice",
     .kind = GW_CFG_CHOICE,
     .offset = offsetof(demo, choice),
     .values = "a|b|c",
     .refusal = "is not a, b or c",
     .help = "a choice"},
    {.key = "tags",
     .kind = GW_CFG_LIST,
     .offset = offsetof(demo, tags),
     .count_offset = offsetof(demo, n_tags),
     .help = "tags"},
    {.key = "sub", .kind = GW_CFG_TABLE, .sub = &inner_section, .help = "a table"},
    {.key = "custom",
     .kind = GW_CFG_CUSTOM,
     .read = read_custom,
     .value_doc = "anything",
     .default_doc = "nothing",
     .help = "its own reader"},
};
static const gw_cfg_section demo_section = {.name = "[demo]",
                                            GW_CFG_KEYS(demo_keys),
                                            .obj_size = sizeof(demo),
                                            .init = init_demo,
                                            .help = "A section of the test."};

static const gw_cfg_key checked_keys[] = {
    {.key = "mode",
     .kind = GW_CFG_ENUM,
     .offset = offsetof(demo, mode),
     .values = "ab|abcd",
     .check = check_even},
};
static const gw_cfg_section checked_section = {.name = "[checked]", GW_CFG_KEYS(checked_keys)};

static void demo_free(demo *d) {
    free(d->name);
    free(d->dir);
    free(d->mode);
    free(d->custom);
    gw_cfg_free_strv(d->tags, d->n_tags);
}

/* Reads text as the section s of "/etc/sipp/t.toml" into d; returns the problems ("" for none). */
static char *read_text(const char *text, const gw_cfg_section *s, demo *d, bool *ok) {
    char err[TOML_ERRBUF_SIZE];
    toml_doc *doc = toml_parse(text, strlen(text), "t.toml", err, sizeof err);
    cr_assert_not_null(doc, "%s", err);
    sipp_buf errs = {0};
    gw_cfg_ctx x = {
        .file = "t.toml", .path = "/etc/sipp/t.toml", .where = s->name, .errs = &errs, .ok = true};
    memset(d, 0, sizeof *d);
    init_demo(d);
    gw_cfg_read_section(&x, toml_root(doc), s, d);
    toml_free(doc);
    *ok = x.ok;
    char *out = strdup(errs.data ? errs.data : "");
    sipp_buf_free(&errs);
    return out;
}

/* Reads text and checks that it is refused with exactly the problems want. */
static void refused(const char *text, const char *want) {
    demo d;
    bool ok;
    char *got = read_text(text, &demo_section, &d, &ok);
    cr_assert(!ok, "accepted: %s", text);
    cr_assert_str_eq(got, want);
    free(got);
    demo_free(&d);
}

Test(config_table, every_kind_is_read_into_its_field) {
    demo d;
    bool ok;
    char *errs = read_text("name = \"n\"\ndir = \"data\"\ncount = 7\nbig = 1000000000000\nbytes = 0\nmb = 3\n"
                           "seconds = 30\nfraction = 0.25\non = true\nmode = \"slow\"\nchoice = \"c\"\n"
                           "tags = [\"x\", \"y\"]\ncustom = 1\n[sub]\ninner = 4\n",
                           &demo_section, &d, &ok);
    cr_assert(ok, "%s", errs);
    cr_assert_str_eq(errs, "");
    cr_assert_str_eq(d.name, "n");
    cr_assert_str_eq(d.dir, "/etc/sipp/data", "a path is relative to the file's directory");
    cr_assert_eq(d.count, 7);
    cr_assert_eq(d.big, 1000000000000LL);
    cr_assert_eq(d.bytes, 0);
    cr_assert_eq(d.mb, (size_t)3 << 20, "MiB are stored as bytes");
    cr_assert_float_eq(d.seconds, 30.0, 1e-9);
    cr_assert_float_eq(d.fraction, 0.25f, 1e-6);
    cr_assert(d.on);
    cr_assert_str_eq(d.mode, "slow");
    cr_assert_eq(d.choice, 2, "a choice is stored as the index of its word");
    cr_assert_eq(d.n_tags, 2);
    cr_assert_str_eq(d.tags[1], "y");
    cr_assert_eq(d.inner, 4, "a table's rows fill the same struct");
    cr_assert_str_eq(d.custom, "present");
    free(errs);
    demo_free(&d);
}

Test(config_table, absent_keys_keep_their_defaults) {
    demo d;
    bool ok;
    char *errs = read_text("name = \"only\"\n", &demo_section, &d, &ok);
    cr_assert(ok, "%s", errs);
    cr_assert_eq(d.count, 3);
    cr_assert_eq(d.mb, (size_t)2 << 20);
    cr_assert_eq(d.choice, 1);
    cr_assert_null(d.tags);
    cr_assert_str_eq(d.custom, "only", "a custom row is read after the rows above it, even when absent");
    free(errs);
    demo_free(&d);
}

Test(config_table, a_number_out_of_range_is_named_with_its_range) {
    refused("count = 11\n", "t.toml:1: [demo] count: 11 is out of range [1, 10]\n");
    refused("\n\nmb = 0\n", "t.toml:3: [demo] mb: 0 is out of range [1, 1024]\n");
    refused("fraction = 1.0\n", "t.toml:1: [demo] fraction: 1 is out of range [0, 1)\n");
    refused("[sub]\ninner = 6\n", "t.toml:2: [demo.inner] inner: 6 is out of range [0, 5]\n");
}

Test(config_table, a_wrong_type_names_what_was_expected) {
    refused("count = \"7\"\n", "t.toml:1: [demo] count: expected an integer, found string\n");
    refused("on = 1\n", "t.toml:1: [demo] on: expected true or false, found integer\n");
    refused("fraction = \"x\"\n", "t.toml:1: [demo] fraction: expected a number, found string\n");
    refused("tags = \"x\"\n", "t.toml:1: [demo] tags: expected an array of strings, found string\n");
    refused("tags = [\"x\", 2]\n", "t.toml:1: [demo] tags: element 1 must be a non-empty string\n");
    refused("name = \"\"\n", "t.toml:1: [demo] name: must be a non-empty string without NUL characters\n");
    refused("sub = 1\n", "t.toml:1: [demo] sub: expected a table, found integer\n");
}

Test(config_table, an_enum_value_not_among_its_words) {
    refused("mode = \"medium\"\n", "t.toml:1: [demo] mode: 'medium' is not one of fast, slow\n");
    refused("choice = \"d\"\n", "t.toml:1: [demo] choice: 'd' is not a, b or c\n");
    demo d;
    bool ok;
    char *errs = read_text("mode = \"abc\"\n", &checked_section, &d, &ok);
    cr_assert(!ok);
    cr_assert_str_eq(errs, "t.toml:1: [checked]: mode 'abc' has an odd length\n",
                     "a check has the last word");
    free(errs);
    demo_free(&d);
}

Test(config_table, an_unknown_key_is_named_with_the_nearest_known_one) {
    refused("cuont = 1\n",
            "t.toml:1: unknown key 'cuont' in [demo] (did you mean 'count'? known keys: name, dir, "
            "count, big, bytes, mb, seconds, fraction, on, mode, choice, tags, sub, custom)\n");
    refused("colour = 1\n",
            "t.toml:1: unknown key 'colour' in [demo] (known keys: name, dir, count, big, bytes, mb, "
            "seconds, fraction, on, mode, choice, tags, sub, custom)\n");
    cr_assert_str_eq(gw_cfg_suggest(&demo_section, "tag"), "tags");
    cr_assert_str_eq(gw_cfg_suggest(&demo_section, "fractoin"), "fraction");
    cr_assert_null(gw_cfg_suggest(&demo_section, "xyz"), "three changes in three letters suggest nothing");
}

Test(config_table, a_quoted_value_cannot_start_a_line) {
    refused("mode = \"a\\nb\"\n", "t.toml:1: [demo] mode: 'a\\x0ab' is not one of fast, slow\n");
}

Test(config_table, every_problem_is_listed) {
    refused("count = 0\non = 2\nchoice = \"z\"\n",
            "t.toml:1: [demo] count: 0 is out of range [1, 10]\n"
            "t.toml:2: [demo] on: expected true or false, found integer\n"
            "t.toml:3: [demo] choice: 'z' is not a, b or c\n");
}

Test(config_table, the_reference_shows_kind_range_and_default) {
    const gw_cfg_section *const sections[] = {&demo_section, NULL};
    sipp_buf out = {0};
    cr_assert(gw_cfg_markdown(sections, &out));
    const char *want[] = {"#### `[demo]`\n\nA section of the test.\n\n| key | value | default | meaning |\n",
                          "| `count` | integer, 1 to 10 | `3` | how many |\n",
                          "| `mb` | MiB, 1 to 1024 | `2` | MiB |\n",
                          "| `fraction` | number in [0, 1) | `0` | f |\n",
                          "| `choice` | one of a, b, c | `\"b\"` | a choice |\n",
                          "| `name` | string | none | a name |\n",
                          "| `sub` | table: [demo.inner] |  | a table |\n",
                          "| `custom` | anything | nothing | its own reader |\n"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert_not_null(strstr(out.data, want[i]), "no %s in:\n%s", want[i], out.data);
    sipp_buf_free(&out);
}

Test(config_table, a_path_is_resolved_against_the_file) {
    char *p = gw_cfg_resolve_path("conf/gw.toml", "m.gguf");
    cr_assert_str_eq(p, "conf/m.gguf");
    free(p);
    p = gw_cfg_resolve_path("gw.toml", "m.gguf");
    cr_assert_str_eq(p, "./m.gguf");
    free(p);
    p = gw_cfg_resolve_path("conf/gw.toml", "/abs/m.gguf");
    cr_assert_str_eq(p, "/abs/m.gguf");
    free(p);
    p = gw_cfg_resolve_path(NULL, "m.gguf");
    cr_assert_str_eq(p, "m.gguf");
    free(p);
}
