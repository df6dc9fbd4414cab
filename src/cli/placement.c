/*
 * placement.c: how the CLI shows where a model's weights went (sipp_model_placement), shared by
 * --stats, doctor and ops: per device, its host, its layers and its weight buffers.
 */
#include <jansson.h>
#include <stdio.h>

#include "cli/cli.h"

#define BYTES_PER_MIB (1024.0 * 1024.0)

void cli_print_placement(FILE *out, const sipp_placement *p) {
    if (p->mmproj) {
        fprintf(out, "  %s on %s: the projector (mmproj), %.1f MiB of weights\n", p->device, p->host,
                (double)p->buffer_bytes / BYTES_PER_MIB);
        return;
    }
    fprintf(out, "  %s", p->device);
    if (p->layout[0]) fprintf(out, " (%s layout)", p->layout);
    fprintf(out, " on %s: ", p->host);
    if (p->n_layers > 0)
        fprintf(out, "layers %d-%d (%d)", p->first_layer, p->first_layer + p->n_layers - 1, p->n_layers);
    else
        fprintf(out, "no repeating layers");
    fprintf(out, "%s, %.1f MiB of weights\n", p->output ? " + output" : "",
            (double)p->buffer_bytes / BYTES_PER_MIB);
}

json_t *cli_placement_json(const sipp_placement *p, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:i, s:i, s:b, s:I, s:b}", "device", p[i].device,
                                           "layout", p[i].layout, "host", p[i].host, "first_layer",
                                           p[i].first_layer, "n_layers", p[i].n_layers, "output", p[i].output,
                                           "buffer_bytes", (json_int_t)p[i].buffer_bytes, "mmproj",
                                           p[i].mmproj));
    return a;
}
