/*
 * reload.c: SIGHUP: the configuration file read again and applied to the running gateway.
 *
 * The file is made into a configuration exactly as at start (serve.c's builder: the file, then the
 * command line's overrides, validated and its model headers checked as --check does). A file that
 * does not parse or check changes nothing: its problems are logged and the running configuration
 * stays. Otherwise the targets are compared by name with those the running configuration declares:
 *
 *   added      a local one loads as on a start (a start-up one at once, by residency.c's keeper; an
 *              on-demand one on its first request); a remote one serves at once
 *   removed    no longer listed nor found; its running requests finish, then it is unloaded
 *   changed    how it loads changed (model, backend, context, ...): out of service (state
 *              "changed", new requests wait) until its running requests end, then unloaded and
 *              loaded with the new settings; only what a running target can take changed
 *              (aliases, max_tokens, keep_alive, pin, load): taken at once
 *   untouched  nothing happens to it: no reload, no dropped stream
 *
 * A remote target that changed is removed and added (its running requests finish on the old
 * upstream). Targets on backend "rpc" (served by a supervised child, supervise.c) cannot be
 * added, changed or removed by a reload: such a file is refused, naming the target.
 *
 * Server-wide settings: those read per request come from the new configuration ([server]
 * max_request_bytes, max_buffered_bytes, allowed_origins, allowed_hosts, shutdown_timeout_seconds,
 * max_loaded_models, [[tokens]], [media], [store], [web]). Those the running server took at start
 * (the listen socket, the HTTP server's limits, admission, the rate limit, memory budgets, the saved
 * slots, the Responses store, the models directory, [limits], [[mcp]]) keep their running values, and each
 * one that differs is logged as needing a restart (keep_restart_settings).
 *
 * Nothing a running request may still read is freed: a replaced configuration and a removed remote
 * target's upstream live until the server stops (a few kilobytes a reload). srv->cfg and a
 * target's cfg are atomic pointers, so a reader sees the old or the new one, whole.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

struct gw_reloads {
    gw_config **configs; /* made by reloads, the running one among them */
    size_t n_configs;
};

typedef enum change_kind { CH_ADD, CH_REMOVE, CH_RELOAD, CH_SOFT } change_kind;

typedef struct change {
    change_kind kind;
    gw_target *t;                /* REMOVE, RELOAD, SOFT */
    const gw_target_config *cfg; /* ADD, RELOAD, SOFT: in the new configuration */
    gw_upstream *up;             /* ADD of a remote target */
} change;

typedef struct plan {
    change *c;
    size_t n, cap;
    size_t unchanged, fresh; /* untouched targets; added ones that need a new table entry */
} plan;

static bool same_str(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static bool same_strv(char **a, size_t na, char **b, size_t nb) {
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (!same_str(a[i], b[i])) return false;
    return true;
}

/* Whether a and b load the same model the same way (local) or reach the same server (remote). */
static bool same_load(const gw_target_config *a, const gw_target_config *b) {
    return a->type == b->type && same_str(a->recipe, b->recipe) && same_str(a->model_path, b->model_path) &&
           same_str(a->backend, b->backend) && same_str(a->flash_attn, b->flash_attn) &&
           same_str(a->speculative, b->speculative) && same_str(a->draft_model, b->draft_model) &&
           a->draft_max == b->draft_max && a->draft_min == b->draft_min && a->draft_p_min == b->draft_p_min &&
           same_str(a->draft_cutoff, b->draft_cutoff) && same_str(a->cache_type_k, b->cache_type_k) &&
           same_str(a->cache_type_v, b->cache_type_v) && same_str(a->chat_template, b->chat_template) &&
           same_str(a->mmproj, b->mmproj) && a->mmproj_offload == b->mmproj_offload &&
           same_str(a->speaker, b->speaker) && same_str(a->voice, b->voice) && a->ctx_size == b->ctx_size &&
           a->ctx_auto == b->ctx_auto && a->parallel == b->parallel && a->threads == b->threads &&
           a->gpu_layers == b->gpu_layers && same_str(a->rpc_servers, b->rpc_servers) &&
           same_str(a->tensor_split, b->tensor_split) && a->policy == b->policy && a->repack == b->repack &&
           same_strv(a->base_urls, a->n_base_urls, b->base_urls, b->n_base_urls) &&
           same_str(a->remote_model, b->remote_model) && same_str(a->api_key_env, b->api_key_env) &&
           a->timeout_seconds == b->timeout_seconds;
}

/* Whether what a running target takes without a reload is the same too. */
static bool same_serving(const gw_target_config *a, const gw_target_config *b) {
    return same_strv(a->aliases, a->n_aliases, b->aliases, b->n_aliases) && a->max_tokens == b->max_tokens &&
           a->keep_alive_s == b->keep_alive_s && a->pin == b->pin && a->load == b->load;
}

/* ---- settings that need a restart ------------------------------------------------------------- */

static bool restart_needed(bool differs, const char *key) {
    if (differs)
        fprintf(stderr, "sipp: reload: %s changed: that needs a restart; the running value stays\n", key);
    return differs;
}

#define KEEP(field, key)                                                                                     \
    do {                                                                                                     \
        if (restart_needed(next->field != old->field, key)) next->field = old->field;                        \
    } while (0)

static void keep_str(char **field, const char *old, const char *key) {
    if (!restart_needed(!same_str(*field, old), key)) return;
    free(*field);
    *field = old ? strdup(old) : NULL;
}

/* Field by field: the struct has padding, which memcmp would compare. */
static bool same_limits(const sipp_schema_limits *a, const sipp_schema_limits *b) {
    return a->schema_max_bytes == b->schema_max_bytes && a->schema_max_depth == b->schema_max_depth &&
           a->schema_max_properties == b->schema_max_properties &&
           a->schema_max_total_properties == b->schema_max_total_properties &&
           a->schema_max_enum == b->schema_max_enum && a->schema_max_refs == b->schema_max_refs &&
           a->grammar_max_bytes == b->grammar_max_bytes &&
           a->grammar_max_alternatives == b->grammar_max_alternatives &&
           a->schema_convert_ms == b->schema_convert_ms && a->image_max_bytes == b->image_max_bytes &&
           a->image_max_pixels == b->image_max_pixels && a->media_max_items == b->media_max_items;
}

/* Whether two configurations name the same MCP servers, the same way (mcp_client.c keeps the servers
 * it started with: srv->mcp). */
static bool same_mcp(const gw_config *a, const gw_config *b) {
    if (a->n_mcp != b->n_mcp) return false;
    for (size_t i = 0; i < a->n_mcp; i++) {
        const gw_mcp_config *x = &a->mcp[i], *y = &b->mcp[i];
        if (!same_str(x->name, y->name) || !same_str(x->url, y->url) ||
            !same_strv(x->command, x->n_command, y->command, y->n_command) ||
            !same_strv(x->allowed_tools, x->n_allowed_tools, y->allowed_tools, y->n_allowed_tools) ||
            !same_strv(x->env, x->n_env, y->env, y->n_env) || x->timeout_seconds != y->timeout_seconds)
            return false;
    }
    return true;
}

/* What the running server took at start stays as it is: next gets the running values. */
static void keep_restart_settings(gw_config *next, const gw_config *old) {
    if (restart_needed(!same_str(next->host, old->host) || next->port != old->port, "[server] listen")) {
        keep_str(&next->host, old->host, "[server] listen (host)");
        next->port = old->port;
    }
    KEEP(max_concurrent_requests, "[server] max_concurrent_requests");
    KEEP(max_queue, "[server] max_queue");
    KEEP(request_timeout_seconds, "[server] request_timeout_seconds");
    KEEP(read_timeout_seconds, "[server] read_timeout_seconds");
    KEEP(max_connections, "[server] max_connections");
    KEEP(max_connections_per_client, "[server] max_connections_per_client");
    KEEP(allow_unauthenticated, "[server] allow_unauthenticated");
    KEEP(memory_budget_mb, "[server] memory_budget_mb");
    keep_str(&next->slot_state_dir, old->slot_state_dir, "[server] slot_state_dir");
    KEEP(slot_state_max_mb, "[server] slot_state_max_mb");
    KEEP(rate_requests_per_minute, "[security.rate_limit] requests_per_minute");
    KEEP(rate_burst, "[security.rate_limit] burst");
    KEEP(responses_max_stored, "[responses] max_stored");
    KEEP(responses_max_bytes, "[responses] max_stored_bytes");
    KEEP(responses_ttl_seconds, "[responses] ttl_seconds");
    keep_str(&next->models_dir, old->models_dir, "the models directory");
    KEEP(discovered_keep_alive_s, "--keep-alive");
    KEEP(discovered_max_tokens, "--max-tokens");
    restart_needed(!same_limits(&next->limits, &old->limits), "[limits]");
    next->limits = old->limits; /* whole, whatever fields it has (the check names those it knows) */
    restart_needed(!same_mcp(next, old), "[[mcp]]"); /* the servers started with the gateway stay */
}

/* ---- the plan: what changes, made in full before anything is applied ------------------------- */

static const gw_target_config *declared(const gw_config *c, const char *name) {
    for (size_t i = 0; i < c->n_targets; i++)
        if (strcmp(c->targets[i].name, name) == 0) return &c->targets[i];
    return NULL;
}

/* The table's listed entry named name (not an alias), or NULL. */
static gw_target *entry_named(gw_server *srv, const char *name) {
    for (size_t i = 0; i < srv->n_targets; i++)
        if (gw_target_listed(&srv->targets[i]) && strcmp(srv->targets[i].cfg->name, name) == 0)
            return &srv->targets[i];
    return NULL;
}

static bool plan_add(plan *p, change c) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        change *a = realloc(p->c, cap * sizeof *a);
        if (!a) return false;
        p->c = a;
        p->cap = cap;
    }
    p->c[p->n++] = c;
    return true;
}

static void plan_free(plan *p) {
    for (size_t i = 0; i < p->n; i++)
        gw_upstream_free(p->c[i].up);
    free(p->c);
}

/* An added target; a remote one gets its upstream now, so that a bad one refuses the reload. */
static bool plan_added(plan *p, const gw_target_config *now, char *err) {
    change c = {.kind = CH_ADD, .cfg = now};
    if (!gw_kind_of_config(now)->resident && !(c.up = gw_upstream_new(now, err))) return false;
    if (!plan_add(p, c)) {
        gw_upstream_free(c.up);
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory") == SIPP_OK;
    }
    p->fresh++;
    return true;
}

/* One target the running configuration declares (was), against the new one's entry (now, or NULL). */
static bool plan_declared(gw_server *srv, plan *p, const gw_target_config *was, const gw_target_config *now,
                          char *err) {
    gw_target *t = entry_named(srv, was->name);
    bool same = now && same_load(was, now);
    if (!t || (same && same_serving(was, now))) {
        p->unchanged++;
        return true;
    }
    if (gw_supervise_wanted(srv, was) || (now && gw_supervise_wanted(srv, now))) /* its cfg is its child's */
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "target '%s' is served through rpc servers by a supervised process: a reload cannot "
                         "add, change or remove it; restart the gateway",
                         was->name) == SIPP_OK;
    if (same) return plan_add(p, (change){.kind = CH_SOFT, .t = t, .cfg = now});
    if (now && gw_kind_of_config(now)->resident && gw_kind_of_config(was)->resident)
        return plan_add(p, (change){.kind = CH_RELOAD, .t = t, .cfg = now});
    if (!plan_add(p, (change){.kind = CH_REMOVE, .t = t})) return false;
    return !now || plan_added(p, now, err);
}

/* The whole plan; false (err says why) when the reload cannot be applied as it is. */
static bool make_plan(gw_server *srv, const gw_config *old, const gw_config *next, plan *p, char *err) {
    for (size_t i = 0; i < old->n_targets; i++)
        if (!plan_declared(srv, p, &old->targets[i], declared(next, old->targets[i].name), err)) return false;
    for (size_t i = 0; i < next->n_targets; i++) {
        const gw_target_config *now = &next->targets[i];
        if (declared(old, now->name)) continue;
        if (entry_named(srv, now->name)) { /* found in the models directory since the start */
            p->unchanged++;
            continue;
        }
        if (gw_supervise_wanted(srv, now))
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "target '%s' is on backend \"rpc\": a reload cannot add it; restart the gateway",
                             now->name) == SIPP_OK;
        if (!plan_added(p, now, err)) return false;
    }
    size_t room = srv->max_targets - srv->n_targets;
    if (p->fresh > room)
        return sipp_fail(
                   err, SIPP_ERR_INVALID_ARGUMENT,
                   "it adds %zu targets and this server has room for %zu more (%d added by reloads in one "
                   "run); restart the gateway",
                   p->fresh, room, GW_MAX_RELOAD_ADDED) == SIPP_OK;
    return true;
}

/* ---- applying it ------------------------------------------------------------------------------- */

static const char *const kind_names[] = {
    [CH_ADD] = "added", [CH_REMOVE] = "removed", [CH_RELOAD] = "reloading", [CH_SOFT] = "changed in place"};

static void apply(gw_server *srv, plan *p, sipp_buf *said) {
    for (size_t i = 0; i < p->n; i++) {
        change *c = &p->c[i];
        const char *name = c->cfg ? c->cfg->name : c->t->cfg->name;
        switch (c->kind) {
        case CH_REMOVE: gw_residency_retire(srv, c->t); break;
        case CH_SOFT: gw_residency_reconfigure(srv, c->t, c->cfg, false); break;
        case CH_RELOAD: gw_residency_reconfigure(srv, c->t, c->cfg, true); break;
        case CH_ADD:
            if (!gw_residency_add(srv, c->cfg, c->up)) {
                fprintf(stderr, "sipp: reload: target '%s' not added: the target table is full\n", name);
                continue;
            }
            c->up = NULL; /* the table's now */
            break;
        }
        sipp_buf_appendf(said, "%s%s '%s'", said->len ? ", " : "", kind_names[c->kind], name);
    }
}

static bool keep_config(gw_server *srv, gw_config *next) {
    if (!srv->reloads && !(srv->reloads = calloc(1, sizeof *srv->reloads))) return false;
    struct gw_reloads *r = srv->reloads;
    gw_config **a = realloc(r->configs, (r->n_configs + 1) * sizeof *a);
    if (!a) return false;
    r->configs = a;
    r->configs[r->n_configs++] = next;
    return true;
}

/* The new configuration, or NULL after logging why it cannot be used. */
static gw_config *read_next(const gw_reloader *rl, const gw_config *old) {
    gw_config *next = malloc(sizeof *next);
    if (!next) return NULL;
    gw_config_init(next);
    sipp_buf errs = {0};
    if (!rl->build(rl->arg, next, &errs)) {
        const char *p = errs.data ? errs.data : "";
        for (const char *nl; *p; p = *nl ? nl + 1 : nl) {
            nl = p + strcspn(p, "\n");
            fprintf(stderr, "sipp: reload: %.*s\n", (int)(nl - p), p);
        }
        fprintf(stderr, "sipp: reload: %s has problems (above): the running configuration stays\n",
                old->path);
        sipp_buf_free(&errs);
        gw_config_free(next);
        free(next);
        return NULL;
    }
    sipp_buf_free(&errs);
    gw_budgets_fit_contexts(next);
    keep_restart_settings(next, old);
    return next;
}

void gw_reload(gw_server *srv, const gw_reloader *rl) {
    const gw_config *old = srv->cfg;
    if (!rl || !old->path) {
        fprintf(stderr, "sipp: SIGHUP: there is no configuration file to read again (started without "
                        "--config); serving on as before\n");
        return;
    }
    fprintf(stderr, "sipp: SIGHUP: reading %s again\n", old->path);
    gw_config *next = read_next(rl, old);
    if (!next) return;
    plan p = {0};
    char err[SIPP_ERROR_SIZE] = "out of memory";
    if (!make_plan(srv, old, next, &p, err) || !keep_config(srv, next)) {
        fprintf(stderr, "sipp: reload: %s: %s: the running configuration stays\n", old->path, err);
        plan_free(&p);
        gw_config_free(next);
        free(next);
        return;
    }
    sipp_buf said = {0};
    apply(srv, &p, &said);
    srv->cfg = next;
    if (!srv->prober) gw_probe_start(srv); /* a remote target the start did not have */
    fprintf(stderr, "sipp: reloaded %s: %s%s%zu target%s untouched\n", next->path, said.data ? said.data : "",
            said.len ? "; " : "", p.unchanged, p.unchanged == 1 ? "" : "s");
    sipp_buf_free(&said);
    plan_free(&p);
}

void gw_reloads_free(gw_server *srv) {
    struct gw_reloads *r = srv->reloads;
    if (!r) return;
    for (size_t i = 0; i < r->n_configs; i++) {
        gw_config_free(r->configs[i]);
        free(r->configs[i]);
    }
    free(r->configs);
    free(r);
    srv->reloads = NULL;
}
