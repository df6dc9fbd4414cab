/*
 * against.c: `sipp verify --against MANIFEST`: what a manifest promised, checked here.
 *
 * A manifest states five contracts; each is reported as "holds", "changed" or "not checked":
 *
 *   checkpoint  the model file is the same bytes (SHA-256 and size), and so is the image case's
 *               projector when the manifest recorded one
 *   tokenizer   the vocabulary, merges, special tokens and chat template hash are the same, and the
 *               recorded prompts tokenize to the recorded token ids
 *   graph       per backend, the decode step's graph has the same ops, counts, device support and
 *               placement, and the same device boundaries per decode step and per prefill
 *   numerics    per backend, this run is within the thresholds (against the reference and for cached
 *               decoding), the greedy continuations are the recorded ones (same SHA-256), and the
 *               logits agree with the recorded top tokens (top-1 agreement at least --min-top1); with
 *               the perplexity case, the perplexity is within --ppl-max-drift of the recorded one, or
 *               on another quantization of the model within --ppl-max-drift-quant per step
 *   speed       per backend, pp and tg are no more than --speed-tolerance slower than recorded
 *               (checked only when the manifest has bench figures)
 *
 * Differences that are not contracts (another CPU, kernel, llama.cpp commit, CPU module, driver) are
 * listed as context: they are the likely causes when a contract changed.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/against.h"
#include "verify/greedy.h"
#include "verify/ppl_case.h"

#define SHORT_HASH 12
#define DETAIL_BYTES 512

typedef struct contract {
    const char *name;
    json_t *details;
    bool changed, checked;
} contract;

static void note(contract *c, bool is_change, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(contract *c, bool is_change, const char *fmt, ...) {
    char buf[DETAIL_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_array_append_new(c->details, json_string(buf));
    if (is_change) c->changed = true;
}

static const char *str(const json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "(none)";
}

static json_t *path(const json_t *o, const char *a, const char *b) {
    return json_object_get(json_object_get(o, a), b);
}

/* The image case's projector: the same file as recorded. */
static void check_projector(contract *c, const json_t *recorded, const json_t *current) {
    const json_t *rp = path(recorded, "image", "projector"), *cp = path(current, "image", "projector");
    if (!rp) return;
    if (!cp) {
        note(c, false, "the manifest's image case did not run here (no projector)");
        return;
    }
    const char *rh = str(rp, "sha256"), *ch = str(cp, "sha256");
    if (strcmp(rh, ch) != 0)
        note(c, true, "projector sha256 is %.*s... here, the manifest recorded %.*s... ('%s')", SHORT_HASH,
             ch, SHORT_HASH, rh, str(cp, "path"));
    else
        note(c, false, "projector sha256 %.*s..., as recorded", SHORT_HASH, ch);
}

/* The perplexity case against the recorded one: within --ppl-max-drift on the same model file, within
 * --ppl-max-drift-quant per quantization step on another quantization of it. */
static void check_perplexity(contract *c, const char *backend, const json_t *recorded, const json_t *current,
                             const json_t *rb, const json_t *cb, const sipp_verify_thresholds *t) {
    const json_t *rppl = json_object_get(rb, "perplexity"), *cppl = json_object_get(cb, "perplexity");
    if (!rppl) return;
    if (!cppl) {
        note(c, false, "%s: perplexity not measured here (no --ppl-text)", backend);
        return;
    }
    const char *rt = str(path(recorded, "perplexity", "text"), "sha256"),
               *ct = str(path(current, "perplexity", "text"), "sha256");
    if (strcmp(rt, ct) != 0) {
        note(c, false,
             "%s: perplexity not compared: the text here (sha256 %.*s...) is not the manifest's (%.*s...)",
             backend, SHORT_HASH, ct, SHORT_HASH, rt);
        return;
    }
    double was = json_number_value(json_object_get(rppl, "ppl")),
           now = json_number_value(json_object_get(cppl, "ppl"));
    double drift = verify_ppl_drift(now, was), allowed = t->ppl_max_drift;
    char why[DETAIL_BYTES];
    snprintf(why, sizeof why, "--ppl-max-drift");
    const json_t *rm = json_object_get(recorded, "model"), *cm = json_object_get(current, "model");
    if (strcmp(str(rm, "sha256"), str(cm, "sha256")) != 0) {
        const char *here, *there;
        int steps = verify_quant_steps(json_object_get(cm, "tensor_types"),
                                       json_object_get(rm, "tensor_types"), &here, &there);
        if (steps > 0) {
            allowed = steps * t->ppl_max_drift_quant;
            snprintf(why, sizeof why, "--ppl-max-drift-quant x %d step%s: %s here, %s in the manifest", steps,
                     steps == 1 ? "" : "s", here, there);
        }
    }
    bool over = !(drift <= allowed);
    note(c, over, "%s: perplexity %.4f here, %.4f in the manifest: drift %.4g%s the %g allowed (%s)", backend,
         now, was, drift, over ? ", above" : ", within", allowed, why);
}

static void check_checkpoint(contract *c, const json_t *rm, const json_t *cm) {
    c->checked = true;
    const char *rh = str(rm, "sha256"), *ch = str(cm, "sha256");
    if (strcmp(rh, ch) != 0)
        note(c, true, "model sha256 is %.*s... here, the manifest recorded %.*s... ('%s')", SHORT_HASH, ch,
             SHORT_HASH, rh, str(cm, "path"));
    if (!json_equal(json_object_get(rm, "size_bytes"), json_object_get(cm, "size_bytes")))
        note(c, true, "model size is %lld bytes here, %lld in the manifest",
             (long long)json_integer_value(json_object_get(cm, "size_bytes")),
             (long long)json_integer_value(json_object_get(rm, "size_bytes")));
    if (!c->changed)
        note(c, false, "sha256 %.*s..., %lld bytes", SHORT_HASH, ch,
             (long long)json_integer_value(json_object_get(cm, "size_bytes")));
}

static void check_tokenizer(contract *c, const json_t *recorded, const json_t *current) {
    static const char *const keys[] = {"model",         "n_vocab", "vocab_sha256", "n_merges",
                                       "merges_sha256", "bos_id",  "eos_id"};
    c->checked = true;
    const json_t *rt = path(recorded, "model", "tokenizer"), *ct = path(current, "model", "tokenizer");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *a = json_object_get(rt, keys[i]), *b = json_object_get(ct, keys[i]);
        if (json_equal(a, b) || (!a && json_is_null(b)) || (json_is_null(a) && !b)) continue;
        char *sa = json_dumps(a ? a : json_null(), JSON_ENCODE_ANY),
             *sb = json_dumps(b ? b : json_null(), JSON_ENCODE_ANY);
        note(c, true, "tokenizer %s is %s here, %s in the manifest", keys[i], sb ? sb : "?", sa ? sa : "?");
        free(sa);
        free(sb);
    }
    if (!json_equal(path(recorded, "model", "chat_template_sha256"),
                    path(current, "model", "chat_template_sha256")))
        note(c, true, "the chat template differs (sha256 %.*s here, %.*s in the manifest)", SHORT_HASH,
             str(json_object_get(current, "model"), "chat_template_sha256"), SHORT_HASH,
             str(json_object_get(recorded, "model"), "chat_template_sha256"));
    json_t *rp = json_object_get(recorded, "prompts"), *cp = json_object_get(current, "prompts");
    for (size_t p = 0; p < json_array_size(rp) && p < json_array_size(cp); p++) {
        json_t *a = json_object_get(json_array_get(rp, p), "tokens"),
               *b = json_object_get(json_array_get(cp, p), "tokens");
        if (json_equal(a, b)) continue;
        size_t k = 0;
        while (k < json_array_size(a) && k < json_array_size(b) &&
               json_equal(json_array_get(a, k), json_array_get(b, k)))
            k++;
        note(c, true,
             "prompt %zu tokenizes to %zu tokens here, %zu in the manifest; they differ from token %zu on",
             p + 1, json_array_size(b), json_array_size(a), k);
    }
    if (!c->changed)
        note(c, false, "%s vocabulary of %lld tokens (sha256 %.*s...), %zu prompts tokenize as recorded",
             str(ct, "model"), (long long)json_integer_value(json_object_get(ct, "n_vocab")), SHORT_HASH,
             str(ct, "vocab_sha256"), json_array_size(rp));
}

static long ival(const json_t *o, const char *key) {
    return (long)json_integer_value(json_object_get(o, key));
}

static void check_graph(contract *c, const char *backend, const json_t *rg, const json_t *cg) {
    static const char *const totals[] = {"n_nodes", "boundaries_decode", "boundaries_prefill"};
    static const char *const fields[] = {"count", "supported", "on_device"};
    bool before = c->changed;
    for (size_t i = 0; i < sizeof totals / sizeof totals[0]; i++)
        if (ival(rg, totals[i]) != ival(cg, totals[i]))
            note(c, true, "%s: %s is %ld here, %ld in the manifest", backend, totals[i], ival(cg, totals[i]),
                 ival(rg, totals[i]));
    json_t *rops = json_object_get(rg, "ops"), *cops = json_object_get(cg, "ops"), *v;
    const char *op;
    json_object_foreach(rops, op, v) {
        json_t *w = json_object_get(cops, op);
        if (!w) {
            note(c, true, "%s: op %s (%ld in the manifest) is no longer in the graph", backend, op,
                 ival(v, "count"));
            continue;
        }
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            if (ival(v, fields[i]) != ival(w, fields[i]))
                note(c, true, "%s: op %s %s is %ld here, %ld in the manifest", backend, op, fields[i],
                     ival(w, fields[i]), ival(v, fields[i]));
    }
    json_object_foreach(cops, op, v) if (!json_object_get(rops, op))
        note(c, true, "%s: op %s (%ld) is new in the graph", backend, op, ival(v, "count"));
    if (c->changed == before)
        note(c, false, "%s: %ld nodes, %zu op types, %ld boundaries per decode step, as recorded", backend,
             ival(cg, "n_nodes"), json_object_size(cops), ival(cg, "boundaries_decode"));
}

/* This run's logits against the top tokens the manifest recorded for the same backend. */
static void check_top(contract *c, const char *backend, const json_t *rtop, const json_t *ctop,
                      double min_top1) {
    long positions = 0, hits = 0;
    double overlap = 0, max_abs = 0;
    for (size_t p = 0; p < json_array_size(rtop) && p < json_array_size(ctop); p++) {
        json_t *ri = json_object_get(json_array_get(rtop, p), "ids"),
               *ci = json_object_get(json_array_get(ctop, p), "ids");
        json_t *rv = json_object_get(json_array_get(rtop, p), "logits"),
               *cv = json_object_get(json_array_get(ctop, p), "logits");
        for (size_t t = 0; t < json_array_size(ri) && t < json_array_size(ci); t++) {
            json_t *a = json_array_get(ri, t), *b = json_array_get(ci, t);
            positions++;
            if (json_equal(json_array_get(a, 0), json_array_get(b, 0))) hits++;
            int common = 0;
            for (size_t i = 0; i < json_array_size(a); i++)
                for (size_t j = 0; j < json_array_size(b); j++)
                    if (json_equal(json_array_get(a, i), json_array_get(b, j))) {
                        common++;
                        /* Logits are floats; the manifest stores 9 significant digits, which
                         * give back the same float, so compare as floats. */
                        double d =
                            fabs((double)(float)json_number_value(json_array_get(json_array_get(rv, t), i)) -
                                 (double)(float)json_number_value(json_array_get(json_array_get(cv, t), j)));
                        if (d > max_abs) max_abs = d;
                    }
            overlap += (double)common / VERIFY_TOPK;
        }
    }
    if (positions == 0) return;
    double top1 = (double)hits / positions;
    note(c, top1 < min_top1,
         "%s: logits against the manifest's: top-1 %.1f%%%s, top-5 overlap %.1f%%, max |d| on the "
         "top tokens %.3g",
         backend, 100 * top1, top1 < min_top1 ? " (below --min-top1)" : "", 100 * overlap / positions,
         max_abs);
}

static void check_greedy(contract *c, sipp_model *vocab, const char *backend, const json_t *rgr,
                         const json_t *cgr) {
    int differing = 0;
    for (size_t p = 0; p < json_array_size(rgr) && p < json_array_size(cgr); p++) {
        json_t *a = json_array_get(rgr, p), *b = json_array_get(cgr, p);
        if (strcmp(str(a, "sha256"), str(b, "sha256")) == 0) continue;
        int n_ref = 0, agree = verify_token_agreement(vocab, str(a, "text"), str(b, "text"), &n_ref);
        note(c, true,
             "%s: the greedy continuation of prompt %zu differs from the manifest's after %d of %d tokens",
             backend, p + 1, agree, n_ref);
        differing++;
    }
    if (json_array_size(rgr) != json_array_size(cgr))
        note(c, true, "%s: %zu greedy continuations here, %zu in the manifest", backend, json_array_size(cgr),
             json_array_size(rgr));
    else if (!differing && json_array_size(rgr))
        note(c, false, "%s: %zu greedy continuations identical to the manifest's", backend,
             json_array_size(rgr));
}

static void check_numerics(contract *c, sipp_model *vocab, const char *backend, const json_t *rb,
                           const json_t *cb, const json_t *current, const sipp_verify_thresholds *t) {
    size_t i;
    json_t *f;
    json_array_foreach(path(current, "verdict", "failures"), i, f) {
        if (strcmp(str(f, "backend"), backend) != 0) continue;
        note(c, true, "%s: %s is %.4g, %s the threshold %g (%s)", backend, str(f, "metric"),
             json_is_number(json_object_get(f, "value")) ? json_number_value(json_object_get(f, "value"))
                                                         : INFINITY,
             str(f, "direction"), json_number_value(json_object_get(f, "threshold")), str(f, "flag"));
    }
    check_greedy(c, vocab, backend, json_object_get(rb, "greedy"), json_object_get(cb, "greedy"));
    check_top(c, backend, json_object_get(rb, "top"), json_object_get(cb, "top"), t->min_top1);
}

static void check_speed(contract *c, const char *backend, const json_t *rb, const json_t *cb, double tol) {
    static const char *const tests[] = {"pp", "tg"};
    json_t *rbench = json_object_get(rb, "bench"), *cbench = json_object_get(cb, "bench");
    if (!rbench) return;
    if (!cbench) {
        note(c, false, "%s: not measured here (--no-bench)", backend);
        return;
    }
    c->checked = true;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        double was = json_number_value(path(rbench, tests[i], "mean")),
               now = json_number_value(path(cbench, tests[i], "mean"));
        bool slower = now < was * (1 - tol);
        note(c, slower, "%s: %s %.2f t/s here, %.2f in the manifest (%+.1f%%)%s", backend, tests[i], now, was,
             was > 0 ? 100 * (now - was) / was : 0.0, slower ? ", slower than --speed-tolerance allows" : "");
    }
}

static void context_diff(json_t *ctx, const char *what, const char *here, const char *there) {
    if (!here || !there || strcmp(here, there) == 0) return;
    char buf[DETAIL_BYTES];
    snprintf(buf, sizeof buf, "%s: %s here, %s in the manifest", what, here, there);
    json_array_append_new(ctx, json_string(buf));
}

static json_t *context_json(const json_t *r, const json_t *c) {
    static const struct {
        const char *label, *a, *b, *d;
    } fields[] = {
        {"sipp", "runtime", "sipp_version", NULL},
        {"llama.cpp commit", "runtime", "llama_commit", NULL},
        {"ggml CPU module", "runtime", "ggml_cpu_module", NULL},
        {"cpu", "host", "cpu", "model"},
        {"os", "host", "os", "name"},
        {"kernel", "host", "os", "kernel"},
    };
    json_t *ctx = json_array();
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_t *x = path(r, fields[i].a, fields[i].b), *y = path(c, fields[i].a, fields[i].b);
        if (fields[i].d) {
            x = json_object_get(x, fields[i].d);
            y = json_object_get(y, fields[i].d);
        }
        context_diff(ctx, fields[i].label, json_string_value(y), json_string_value(x));
    }
    const char *name;
    json_t *rb;
    json_object_foreach(json_object_get(r, "backends"), name, rb) {
        json_t *cb = json_object_get(json_object_get(c, "backends"), name);
        char label[64];
        snprintf(label, sizeof label, "%s device", name);
        if (cb)
            context_diff(ctx, label, json_string_value(path(cb, "device", "description")),
                         json_string_value(path(rb, "device", "description")));
    }
    return ctx;
}

static json_t *contract_json(contract *c) {
    const char *status = c->changed ? "changed" : c->checked ? "holds" : "not checked";
    return json_pack("{s:s, s:s, s:o}", "contract", c->name, "status", status, "details", c->details);
}

bool verify_against(sipp_model *vocab, const json_t *recorded, const json_t *current,
                    const sipp_verify_thresholds *t, json_t *report) {
    contract cs[] = {{.name = "checkpoint"},
                     {.name = "tokenizer"},
                     {.name = "graph"},
                     {.name = "numerics"},
                     {.name = "speed"}};
    enum { C_CKPT, C_TOK, C_GRAPH, C_NUM, C_SPEED, N_CONTRACTS };
    for (int i = 0; i < N_CONTRACTS; i++)
        cs[i].details = json_array();

    check_checkpoint(&cs[C_CKPT], json_object_get(recorded, "model"), json_object_get(current, "model"));
    check_projector(&cs[C_CKPT], recorded, current);
    check_tokenizer(&cs[C_TOK], recorded, current);

    const char *name;
    json_t *rb;
    json_object_foreach(json_object_get(recorded, "backends"), name, rb) {
        json_t *cb = json_object_get(json_object_get(current, "backends"), name);
        if (!cb) {
            const char *why = json_string_value(path(current, "not_run", name));
            for (int i = C_GRAPH; i <= C_NUM; i++)
                note(&cs[i], false, "%s: not checked here: %s", name,
                     why ? why : "not run (not in --backends)");
            continue;
        }
        cs[C_GRAPH].checked = cs[C_NUM].checked = true;
        check_graph(&cs[C_GRAPH], name, json_object_get(rb, "graph"), json_object_get(cb, "graph"));
        check_numerics(&cs[C_NUM], vocab, name, rb, cb, current, t);
        check_perplexity(&cs[C_NUM], name, recorded, current, rb, cb, t);
        check_speed(&cs[C_SPEED], name, rb, cb, t->speed_tolerance);
    }
    if (!json_is_object(json_object_get(recorded, "bench")))
        note(&cs[C_SPEED], false, "the manifest has no bench figures (record them with --bench)");

    json_t *arr = json_array();
    bool hold = true;
    for (int i = 0; i < N_CONTRACTS; i++) {
        hold = hold && !cs[i].changed;
        json_array_append_new(arr, contract_json(&cs[i]));
    }
    json_object_set_new(report, "contracts", arr);
    json_object_set_new(report, "context", context_json(recorded, current));
    json_object_set_new(report, "against_passed", json_boolean(hold));
    return hold;
}
