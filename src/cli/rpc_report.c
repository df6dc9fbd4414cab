/*
 * rpc_report.c: what `sipp doctor --rpc HOST:PORT[,...]` says about rpc servers: reachable, the
 * protocol version, the remote device and its free memory (sipp_rpc_probe), as JSON and as text.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define BYTES_PER_MIB (1024.0 * 1024.0)
#define MAX_LIST 1024

json_t *cli_rpc_report_json(const char *list, bool *all_ok) {
    json_t *arr = json_array();
    char copy[MAX_LIST];
    snprintf(copy, sizeof copy, "%s", list);
    char *save = NULL;
    *all_ok = true;
    for (char *ep = strtok_r(copy, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
        sipp_rpc_server_info info;
        char err[SIPP_ERROR_SIZE] = "";
        bool ok = sipp_rpc_probe(ep, &info, err) == SIPP_OK;
        *all_ok &= ok;
        char version[32] = "";
        if (info.proto_major || info.proto_minor || info.proto_patch)
            snprintf(version, sizeof version, "%d.%d.%d", info.proto_major, info.proto_minor,
                     info.proto_patch);
        json_t *o =
            json_pack("{s:s, s:b, s:s?}", "endpoint", ep, "ok", ok, "protocol", *version ? version : NULL);
        if (ok) {
            json_object_set_new(o, "n_devices", json_integer(info.n_devices));
            json_object_set_new(o, "device", json_string(info.device));
            json_object_set_new(o, "description", json_string(info.description));
            json_object_set_new(o, "memory_free", json_integer((json_int_t)info.memory_free));
            json_object_set_new(o, "memory_total", json_integer((json_int_t)info.memory_total));
        } else {
            json_object_set_new(o, "error", json_string(err));
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

void cli_rpc_report_print(json_t *arr) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        const char *ep = json_string_value(json_object_get(v, "endpoint"));
        if (!json_is_true(json_object_get(v, "ok"))) {
            printf("rpc       %s: FAILED: %s\n", ep, json_string_value(json_object_get(v, "error")));
            continue;
        }
        printf("rpc       %s: protocol %s, %s (%s), %.0f of %.0f MiB free\n", ep,
               json_string_value(json_object_get(v, "protocol")),
               json_string_value(json_object_get(v, "device")),
               json_string_value(json_object_get(v, "description")),
               (double)json_integer_value(json_object_get(v, "memory_free")) / BYTES_PER_MIB,
               (double)json_integer_value(json_object_get(v, "memory_total")) / BYTES_PER_MIB);
    }
}
