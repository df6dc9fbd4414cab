/*
 * slot_dir.h: where a gateway keeps the saved slots of the models it unloads (slot_dir.c), for
 * residency.c's sipp_engine_save_slots / sipp_engine_restore_slots.
 */
#ifndef SIPP_GATEWAY_SLOT_DIR_H
#define SIPP_GATEWAY_SLOT_DIR_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/config.h"

/* Makes this gateway's directory (gw-PID) under [server] slot_state_dir or the default, and removes
 * those of gateways that are no longer running. False (nothing is saved) with the reason logged when
 * it cannot, or when slot_state_max_mb is 0. */
bool gw_slot_dir_open(const gw_config *cfg, char *root, size_t n);
/* The directory of one target under root. */
void gw_slot_dir_target(const char *root, int index, char *out, size_t n);
/* Removes root with everything in it (the server is stopping). */
void gw_slot_dir_remove(const char *root);

#endif
