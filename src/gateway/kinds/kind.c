/*
 * kind.c: which kind a target is (kinds.h). The only place outside config parsing that reads a
 * target's type.
 */
#include "gateway/kinds/kinds.h"

#include <string.h>

/* A local target's recipe (config.c checks the name) and the kind that serves it. */
static const struct {
    const char *recipe;
    const gw_kind *kind;
} by_recipe[] = {
    {"llamacpp", &gw_kind_llama},
    {"whispercpp", &gw_kind_whisper},
    {"tts", &gw_kind_tts},
    {"flite", &gw_kind_tts},
};

const gw_kind *gw_kind_of_config(const gw_target_config *c) {
    if (c->type != GW_TARGET_LOCAL) return &gw_kind_remote;
    for (size_t i = 0; c->recipe && i < sizeof by_recipe / sizeof by_recipe[0]; i++)
        if (strcmp(c->recipe, by_recipe[i].recipe) == 0) return by_recipe[i].kind;
    return &gw_kind_llama;
}

const gw_kind *gw_kind_of(const gw_target *t) {
    if (t->supervisor) return &gw_kind_supervised; /* its cfg is the remote face of a llama target */
    return gw_kind_of_config(t->cfg);
}

const char *gw_state_name(int s) {
    switch (s) {
    case GW_STATE_READY: return "loaded";
    case GW_STATE_LOADING: return "loading";
    case GW_STATE_FAILED: return "failed";
    case GW_STATE_WAITING: return "waiting";
    case GW_STATE_CHANGED: return "changed";
    default: return "unloaded";
    }
}
