/*
 * listing.c: what residency says of the targets, for /v1/models' "sipp" object, Ollama's ps, the
 * views the kinds describe targets from, /v1/backends' budgets and /metrics. residency.c keeps the
 * state under its lock; this file reads a copy of it (gw_residency_facts, gw_residency_totals) and
 * renders it without the lock.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

static json_t *memory_json(const sipp_memory *m) {
    json_t *devs = json_object();
    for (int i = 0; i < m->n_devices; i++)
        json_object_set_new(devs, m->devices[i].name, json_integer((json_int_t)m->devices[i].bytes));
    return json_pack("{s:I, s:o, s:I, s:I, s:I, s:I}", "host_bytes", (json_int_t)m->host_bytes,
                     "device_bytes", devs, "total_bytes", (json_int_t)sipp_memory_total(m), "weights_bytes",
                     (json_int_t)m->weights_bytes, "kv_bytes", (json_int_t)m->kv_bytes, "compute_bytes",
                     (json_int_t)m->compute_bytes);
}

int gw_residency_state(gw_server *srv, gw_target *t, char *out, size_t n) {
    gw_target_facts f;
    gw_residency_facts(srv, t, &f);
    snprintf(out, n, "%s", f.error);
    return f.state;
}

/* Residency's object for t, from facts f read once. */
static void describe_facts(const gw_target_facts *f, json_t *o) {
    int s = f->state;
    json_object_set_new(o, "state", json_string(gw_state_name(s)));
    json_object_set_new(o, "load", json_string(f->cfg->load == GW_LOAD_STARTUP ? "startup" : "on_demand"));
    json_object_set_new(o, "pinned", json_boolean(f->cfg->pin));
    double ka = f->keep_alive_s;
    json_object_set_new(o, "keep_alive_seconds",
                        ka == floor(ka) ? json_integer((json_int_t)ka) : json_real(ka)); /* "500ms" */
    json_object_set_new(o, "uses", json_integer(f->uses));
    if (s == GW_STATE_READY || s == GW_STATE_LOADING || f->measured_valid)
        json_object_set_new(o, "memory", f->measured_valid ? memory_json(&f->measured) : json_null());
    json_object_set_new(o, "ctx_size", f->cfg->ctx_size > 0 ? json_integer(f->cfg->ctx_size) : json_null());
    json_object_set_new(o, "ctx_size_auto", json_boolean(f->cfg->ctx_auto));
    json_object_set_new(o, "memory_estimate", memory_json(&f->estimate));
    json_object_set_new(o, "measured", json_boolean(f->measured_valid));
    json_object_set_new(o, "last_used", f->ever_loaded ? json_real(f->last_use_unix) : json_null());
    bool has_deadline =
        s == GW_STATE_READY && !f->uses && f->deadline_unix >= 0 && !(f->cfg->pin && !f->keep_alive_set);
    json_object_set_new(o, "unload_at", has_deadline ? json_real(f->deadline_unix) : json_null());
    if (f->measured_valid) json_object_set_new(o, "last_load_ms", json_real(f->last_load_ms));
    json_object_set_new(o, "loads", json_integer((json_int_t)f->loads));
    json_object_set_new(o, "unloads", json_integer((json_int_t)f->unloads));
    json_object_set_new(o, "evictions", json_integer((json_int_t)f->evictions));
    if (s == GW_STATE_FAILED || s == GW_STATE_CHANGED) json_object_set_new(o, "error", json_string(f->error));
}

void gw_residency_describe(gw_server *srv, gw_target *t, json_t *o) {
    if (!gw_kind_of(t)->resident) return;
    gw_target_facts f;
    gw_residency_facts(srv, t, &f);
    describe_facts(&f, o);
}

/* A resident kind's state and residency object come from one read of residency's facts, so they
 * agree; another kind says its own state. */
void gw_target_view_open(gw_server *srv, gw_target *t, gw_target_view *v) {
    memset(v, 0, sizeof *v);
    if (!gw_kind_of(t)->resident) {
        v->state = gw_target_status(srv, t, v->why, sizeof v->why);
        return;
    }
    gw_target_facts f;
    gw_residency_facts(srv, t, &f);
    v->state = f.state;
    snprintf(v->why, sizeof v->why, "%s", f.error);
    v->residency = json_object();
    describe_facts(&f, v->residency);
    v->loaded = gw_residency_peek(srv, t);
}

void gw_target_view_close(gw_server *srv, gw_target *t, gw_target_view *v) {
    if (v->loaded) gw_residency_unpeek(srv, t);
    json_decref(v->residency);
    v->loaded = false;
    v->residency = NULL;
}

int gw_target_status(gw_server *srv, gw_target *t, char *why, size_t n) {
    const gw_kind *k = gw_kind_of(t);
    return k->state ? k->state(srv, t, why, n) : gw_residency_state(srv, t, why, n);
}

static const char *place_name(const gw_place_budget *p) { return *p->name ? p->name : "host"; }

json_t *gw_residency_budgets(gw_server *srv) {
    gw_residency_report r;
    gw_residency_totals(srv, &r);
    json_t *a = json_array();
    for (int p = 0; p < r.budgets.n_places; p++)
        json_array_append_new(a, json_pack("{s:s, s:I, s:I}", "place", place_name(&r.budgets.places[p]),
                                           "budget_bytes", (json_int_t)r.budgets.places[p].budget,
                                           "held_bytes", (json_int_t)r.held[p]));
    return a;
}

void gw_residency_metrics(gw_server *srv, sipp_buf *o) {
    gw_residency_report r;
    gw_residency_totals(srv, &r);
    sipp_buf_appendf(
        o,
        "# HELP sipp_model_loads_total Model loads that succeeded.\n# TYPE sipp_model_loads_total counter\n");
    sipp_buf_appendf(o, "sipp_model_loads_total %" PRIu64 "\n", r.loads);
    sipp_buf_appendf(o, "# HELP sipp_model_load_failures_total Model loads that failed.\n# TYPE "
                        "sipp_model_load_failures_total counter\n");
    sipp_buf_appendf(o, "sipp_model_load_failures_total %" PRIu64 "\n", r.load_failures);
    sipp_buf_appendf(o, "# HELP sipp_model_unloads_total Models unloaded (idle, asked, or evicted).\n# TYPE "
                        "sipp_model_unloads_total counter\n");
    sipp_buf_appendf(o, "sipp_model_unloads_total %" PRIu64 "\n", r.unloads);
    sipp_buf_appendf(o, "# HELP sipp_model_evictions_total Models unloaded to make room for another.\n# TYPE "
                        "sipp_model_evictions_total counter\n");
    sipp_buf_appendf(o, "sipp_model_evictions_total %" PRIu64 "\n", r.evictions);
    sipp_buf_appendf(o, "# HELP sipp_model_load_seconds Time to load a model and start its engine.\n# TYPE "
                        "sipp_model_load_seconds summary\n");
    sipp_buf_appendf(o, "sipp_model_load_seconds_sum %.6f\nsipp_model_load_seconds_count %" PRIu64 "\n",
                     r.load_seconds_sum, r.load_seconds_count);
    sipp_buf_appendf(o, "# HELP sipp_memory_held_bytes Bytes the loaded models hold, per place.\n# TYPE "
                        "sipp_memory_held_bytes gauge\n");
    sipp_buf_appendf(o, "# HELP sipp_memory_budget_bytes Bytes the loaded models may hold, per place.\n# "
                        "TYPE sipp_memory_budget_bytes gauge\n");
    for (int p = 0; p < r.budgets.n_places; p++) {
        const char *place = place_name(&r.budgets.places[p]);
        sipp_buf_appendf(o, "sipp_memory_held_bytes{place=\"%s\"} %" PRIu64 "\n", place, r.held[p]);
        sipp_buf_appendf(o, "sipp_memory_budget_bytes{place=\"%s\"} %" PRIu64 "\n", place,
                         r.budgets.places[p].budget);
    }
}
