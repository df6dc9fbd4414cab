/*
 * kind.c: which kind a target is (kind.h). The only place outside config parsing that reads a
 * target's type.
 */
#include "gateway/kinds/kind.h"

const gw_kind *gw_kind_of_config(const gw_target_config *c) {
    return c->type == GW_TARGET_LOCAL ? &gw_kind_llama : &gw_kind_remote;
}

const gw_kind *gw_kind_of(const gw_target *t) {
    if (t->supervisor) return &gw_kind_supervised; /* its cfg is the remote face of a llama target */
    return gw_kind_of_config(t->cfg);
}
