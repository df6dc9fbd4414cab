/*
 * supervised.c: the supervised kind, a llama target served by a child sipp (kinds.h, supervise.c).
 *
 * A target on backend "rpc" runs in a child process, because a lost rpc server ends the process
 * that loaded the model: the gateway reaches the child as a remote target at a loopback port, and
 * describes it as the local target it is, with the child's placement.
 */
#include "gateway/kinds/kinds.h"

static int supervised_state(gw_server *srv, gw_target *t, char *why, size_t n) {
    return gw_supervise_state(t, why, n);
}

/* Its placement is the child's. */
static void supervised_describe_backend(gw_server *srv, gw_target *t, const gw_target_view *v, json_t *o) {
    static const char *const copied[] = {"backend", "reason", "devices", "gpu_layers", "placement"};
    json_object_set_new(o, "requested_backend", json_string(t->cfg->backend));
    if (v->state != GW_STATE_READY) json_object_set_new(o, "error", json_string(t->error));
    gw_supervise_describe(t, o);
    json_t *child = gw_supervise_backend(t);
    for (size_t k = 0; child && k < sizeof copied / sizeof copied[0]; k++)
        if (json_object_get(child, copied[k]))
            json_object_set(o, copied[k], json_object_get(child, copied[k]));
    json_decref(child);
    json_object_set_new(o, "replicas", gw_upstream_describe(t->upstream));
}

static void supervised_describe_model(gw_call *call, gw_target *t, const gw_target_view *v, json_t *o) {
    int s = atomic_load(&t->state);
    json_t *r = json_pack("{s:s}", "state", gw_state_name(s));
    if (s != GW_STATE_READY) json_object_set_new(r, "error", json_string(t->error));
    gw_supervise_describe(t, r);
    json_object_set_new(o, "sipp", r);
    json_object_set(o, "state", json_object_get(r, "state"));
}

const gw_kind gw_kind_supervised = {
    .name = "supervised",
    .type_name = "local",
    .sends_translated = true,
    .answer = gw_kind_remote_answer,
    .forward_undecoded = gw_kind_remote_forward,
    .media_ready = gw_kind_remote_media,
    .state = supervised_state,
    .describe_backend = supervised_describe_backend,
    .describe_model = supervised_describe_model,
};
