/*
 * ops.c: the operations routes.
 *
 *   GET /health        200 while the process lives (no auth): for a liveness probe
 *   GET /ready         200 once every target is loaded, 503 before (or when one failed), with
 *                      each target's state: for a readiness probe and for tests
 *   GET /metrics       Prometheus text (no auth, like most exporters: keep the port private), with
 *                      the residency counters and memory per place (residency.c)
 *   GET /v1/backends   what `sipp doctor` reports of this process: the artifact, every backend
 *                      (compiled, available), the recipe x backend matrix (sipp_recipes_list), the
 *                      devices, and per target the backend decision of
 *                      its load (backend, reason, devices, gpu_layers, and the placement: which
 *                      layers and weight buffers sit on which device and host) or its upstream
 *                      replicas and their health
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/api/api.h"
#include "gateway/kinds/kinds.h"
#include "util/recipes_json.h"

#define GW_MAX_LISTED 32 /* backends and devices listed by /v1/backends */
#define GW_MAX_RECIPES 8 /* recipes of its matrix */

/* /ready and /v1/backends have said "ready" for a loaded target since before residency. */
static const char *state_name(int s) { return s == GW_STATE_READY ? "ready" : gw_state_name(s); }

void gw_route_health(gw_call *call) { gw_reply_json(call, 200, json_pack("{s:s}", "status", "ok")); }

void gw_route_ready(gw_call *call) {
    gw_server *srv = call->srv;
    json_t *targets = json_array();
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (!gw_target_listed(t)) continue;
        char why[SIPP_ERROR_SIZE];
        int s = gw_target_status(srv, t, why, sizeof why);
        json_t *o = json_pack("{s:s, s:s, s:s}", "name", t->cfg->name, "type", gw_kind_of(t)->type_name,
                              "state", state_name(s));
        if (*why) json_object_set_new(o, "error", json_string(why));
        json_array_append_new(targets, o);
    }
    bool ready = gw_targets_ready(srv) && !atomic_load(&srv->draining);
    gw_reply_json(call, ready ? 200 : 503,
                  json_pack("{s:s, s:o}", "status", ready ? "ready" : "not_ready", "targets", targets));
}

/* The gauges that read the targets' state, after metrics.c's counters. */
static void render_gauges(gw_server *srv, sipp_buf *o) {
    size_t n = srv->n_targets;
    gw_metrics_header(o, "sipp_target_ready", "gauge", "1 when the target is loaded and serving.");
    for (size_t i = 0; i < n; i++)
        if (gw_target_listed(&srv->targets[i]))
            gw_metrics_line(o, "sipp_target_ready", srv->targets[i].cfg->name,
                            atomic_load(&srv->targets[i].state) == GW_STATE_READY);
    enum { RUNNING, QUEUED, SLOTS, DRAFTED, ACCEPTED, DRAFT_STEPS, CUTOFF_STEPS };
    static const struct {
        const char *name, *type, *help;
    } engine_gauges[] = {
        [RUNNING] = {"sipp_engine_running_requests", "gauge", "Requests in an engine slot."},
        [QUEUED] = {"sipp_engine_queued_requests", "gauge", "Requests in an engine's queue."},
        [SLOTS] = {"sipp_engine_slots", "gauge", "Slots (parallel sequences) of an engine."},
        [DRAFTED] = {"sipp_speculative_draft_tokens_total", "counter",
                     "Tokens speculative decoding proposed."},
        [ACCEPTED] = {"sipp_speculative_accepted_tokens_total", "counter",
                      "Proposed tokens the model confirmed (acceptance rate = accepted / draft)."},
        [DRAFT_STEPS] = {"sipp_speculative_draft_steps_total", "counter",
                         "Decode steps that verified proposals."},
        [CUTOFF_STEPS] = {"sipp_speculative_cutoff_steps_total", "counter",
                          "Steps that could have drafted and that the draft cut-off ran plain."}};
    for (size_t g = 0; g < sizeof engine_gauges / sizeof engine_gauges[0]; g++) {
        gw_metrics_header(o, engine_gauges[g].name, engine_gauges[g].type, engine_gauges[g].help);
        for (size_t i = 0; i < n; i++) {
            gw_target *t = &srv->targets[i];
            if (!gw_residency_peek(srv, t)) continue;
            sipp_engine_stats es = {0};
            bool engine = t->engine != NULL; /* a kind without a text engine has none of these */
            if (engine) sipp_engine_get_stats(t->engine, &es);
            gw_residency_unpeek(srv, t);
            if (!engine) continue;
            uint64_t v = g == RUNNING       ? (uint64_t)es.running
                         : g == QUEUED      ? (uint64_t)es.queued
                         : g == SLOTS       ? (uint64_t)es.slots
                         : g == DRAFTED     ? es.draft_tokens
                         : g == ACCEPTED    ? es.accepted_tokens
                         : g == DRAFT_STEPS ? es.draft_steps
                                            : es.cutoff_steps;
            gw_metrics_line(o, engine_gauges[g].name, t->cfg->name, v);
        }
    }
    gw_residency_metrics(srv, o);
    gw_metrics_header(o, "sipp_open_connections", "gauge", "Open HTTP connections.");
    sipp_buf_appendf(o, "sipp_open_connections %d\n", atomic_load(&srv->connections));
    gw_metrics_header(o, "sipp_buffered_request_bytes", "gauge",
                      "Bytes of request bodies held while they arrive.");
    sipp_buf_appendf(o, "sipp_buffered_request_bytes %zu\n", atomic_load(&srv->buffered));
    gw_metrics_header(
        o, "sipp_media_decoded_bytes", "gauge",
        "Decoded image and audio bytes held now by requests ([limits] media_decoded_budget_mb).");
    sipp_buf_appendf(o, "sipp_media_decoded_bytes %zu\n", sipp_media_budget_in_use(srv->media_budget));
    gw_metrics_header(o, "sipp_upstream_healthy", "gauge",
                      "1 when a remote target's replica is in rotation.");
    for (size_t i = 0; i < n; i++)
        if (srv->targets[i].upstream)
            gw_upstream_metrics(srv->targets[i].upstream, srv->targets[i].cfg->name, o);
    gw_supervise_metrics(srv, o);
}

/* Appends an adapter's name (its file name without .gguf, as a target's from its path) to a
 * comma-separated list. */
static void lora_name(sipp_buf *list, const char *path) {
    char *name = gw_target_name_from_path(path);
    if (!name) return;
    if (list->len) sipp_buf_append(list, ",", 1);
    sipp_buf_append(list, name, strlen(name));
    free(name);
}

/* The adapters a loaded target's running and waiting requests apply (vLLM's lora_requests_info). */
static void lora_use(gw_target *t, gw_routing_row *row) {
    size_t n = sipp_engine_lora_count(t->engine);
    row->max_lora = (int)n;
    for (size_t i = 0; i < n; i++) {
        const char *path = NULL;
        int running = 0, waiting = 0;
        if (sipp_engine_lora_get(t->engine, i, &path, NULL) != SIPP_OK ||
            sipp_engine_lora_use(t->engine, i, &running, &waiting) != SIPP_OK)
            continue;
        if (running) lora_name(&row->lora_running, path);
        if (waiting) lora_name(&row->lora_waiting, path);
    }
}

/* The routing gauges' inputs: each local target's engine stats, zeros while it is not loaded. */
static void render_routing(gw_server *srv, size_t n, sipp_buf *o) {
    gw_routing_row *rows = calloc(n + 1, sizeof *rows);
    if (!rows) return;
    for (size_t i = 0; i < n; i++) {
        gw_target *t = &srv->targets[i];
        rows[i].name = t->cfg->name;
        rows[i].local = gw_kind_of(t)->resident;
        rows[i].max_lora = (int)t->cfg->n_lora;
        if (!rows[i].local || !gw_residency_peek(srv, t)) continue;
        sipp_engine_stats es = {0};
        if (t->engine) sipp_engine_get_stats(t->engine, &es); /* a kind without a text engine: zeros */
        gw_residency_unpeek(srv, t);
        /* A request the engine has not yet moved into a free slot (it does at its next turn) is
         * not waiting for room: it counts only past the free slots. */
        int free_slots = es.slots - es.running;
        rows[i].engine_queued = es.queued > free_slots ? es.queued - free_slots : 0;
        rows[i].running = es.running;
        rows[i].kv_cells = es.kv_cells;
        rows[i].kv_cells_used = es.kv_cells_used;
        if (t->engine) lora_use(t, &rows[i]);
    }
    int active, queued;
    gw_admission_counts(srv->admission, &active, &queued);
    gw_metrics_routing(srv->metrics, rows, n, queued > 0, o);
    for (size_t i = 0; i < n; i++) {
        sipp_buf_free(&rows[i].lora_running);
        sipp_buf_free(&rows[i].lora_waiting);
    }
    free(rows);
}

void gw_route_metrics(gw_call *call) {
    gw_server *srv = call->srv;
    sipp_buf out = {0};
    size_t n = srv->n_targets; /* once: a models directory may add targets meanwhile */
    const char **names = calloc(n + 1, sizeof *names);
    if (!names) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = srv->targets[i].cfg->name;
    gw_metrics_render(srv->metrics, names, n, &out);
    free(names);
    render_gauges(srv, &out);
    render_routing(srv, n, &out);
    gw_reply_text(call, 200, "text/plain; version=0.0.4; charset=utf-8", out.data, out.len);
}

/* The targets the caller may see, each with its state and placement. */
static json_t *targets_json(gw_call *call) {
    gw_server *srv = call->srv;
    json_t *targets = json_array();
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (!gw_target_listed(t) || !gw_auth_allows(call, t->cfg)) continue;
        gw_target_view v;
        gw_target_view_open(srv, t, &v);
        const gw_kind *k = gw_kind_of(t);
        json_t *o = json_pack("{s:s, s:s, s:s}", "name", t->cfg->name, "type", k->type_name, "state",
                              state_name(v.state));
        k->describe_backend(srv, t, &v, o);
        gw_target_view_close(srv, t, &v);
        json_array_append_new(targets, o);
    }
    return targets;
}

static json_t *backends_json(void) {
    json_t *backends = json_array();
    sipp_backend_info bi[GW_MAX_LISTED];
    int nb = sipp_backends_list(bi, GW_MAX_LISTED);
    for (int i = 0; i < nb && i < GW_MAX_LISTED; i++)
        json_array_append_new(backends, json_pack("{s:s, s:b, s:b, s:i}", "name", bi[i].name, "compiled",
                                                  bi[i].compiled, "available", bi[i].available, "devices",
                                                  bi[i].n_devices));
    return backends;
}

/* The recipe x backend matrix (sipp_recipes_list), as sipp backends --json has it. */
static json_t *recipes_json(void) {
    sipp_recipe_info r[GW_MAX_RECIPES];
    int n = sipp_recipes_list(r, GW_MAX_RECIPES);
    return sipp_recipes_json(r, n < GW_MAX_RECIPES ? n : GW_MAX_RECIPES);
}

static json_t *devices_json(void) {
    json_t *devices = json_array();
    sipp_device_info di[GW_MAX_LISTED];
    int nd = sipp_devices_list(di, GW_MAX_LISTED);
    for (int i = 0; i < nd && i < GW_MAX_LISTED; i++)
        json_array_append_new(devices, json_pack("{s:s, s:s, s:s, s:s, s:b, s:I, s:I}", "backend",
                                                 di[i].backend, "name", di[i].name, "description",
                                                 di[i].description, "kind", di[i].kind, "software",
                                                 di[i].software, "memory_free", (json_int_t)di[i].memory_free,
                                                 "memory_total", (json_int_t)di[i].memory_total));
    return devices;
}

void gw_route_backends(gw_call *call) {
    gw_server *srv = call->srv;
    json_t *targets = targets_json(call);
    json_t *backends = backends_json(), *devices = devices_json();
    const char *art = sipp_runtime_artifact_dir();
    /* The artifact's bill of materials (sipp build / make write it beside manifest.json). */
    char sbom[PATH_MAX + 32], sig[PATH_MAX + 32];
    snprintf(sbom, sizeof sbom, "%s/sbom.spdx.json", art ? art : ".");
    snprintf(sig, sizeof sig, "%s/signature.json", art ? art : ".");
    bool has_sbom = art && access(sbom, R_OK) == 0;
    gw_reply_json(call, 200,
                  json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:b, s:s, s:o, s:o, s:o, s:o, s:o}", "sipp_version",
                            sipp_version(), "llama_release", sipp_llama_release(), "llama_commit",
                            sipp_llama_commit(), "artifact", art, "sbom", has_sbom ? sbom : NULL, "signed",
                            art && access(sig, R_OK) == 0, "cpu_module", sipp_cpu_module(), "backends",
                            backends, "recipes", recipes_json(), "devices", devices, "targets", targets,
                            "memory", gw_residency_budgets(srv)));
}
