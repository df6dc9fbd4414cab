/*
 * sigbus_guard.h: one line naming the model file, and exit status 75, when a request reads a mapped
 * model file that was cut short under it (sigbus_guard.c). Sits on server.h; residency.c tells it
 * where the loaded targets' files are mapped.
 */
#ifndef SIPP_GATEWAY_SIGBUS_GUARD_H
#define SIPP_GATEWAY_SIGBUS_GUARD_H

#include "gateway/server.h"

/* The exit status after such a SIGBUS: EX_TEMPFAIL, as a lost rpc server (SIPP_RPC_LOST_EXIT). */
#define GW_MAPPED_FILE_LOST_EXIT SIPP_RPC_LOST_EXIT

/* Installs the SIGBUS handler (once per process). */
void gw_sigbus_guard_install(void);
/* Rebuilds the table of mappings from /proc/self/maps: every range that maps a file of a loaded
 * target (matched by device and inode, as its last load recorded them). Called with the residency
 * lock held, after a load. */
void gw_sigbus_guard_refresh(gw_server *srv);

#endif
