/*
 * ops.c: `sipp ops MODEL --backend NAME [--json]`: the ops of a model's real compute graph and where
 * each runs, before the model is deployed.
 *
 * The model is loaded on the backend and sipp_model_trace_graph walks a short prefill and one decode
 * step through the scheduler's evaluation callback. Per op type it reports how many nodes one decode
 * step has, how many of them the chosen device supports, how many ran there and on which devices they
 * ran. A device boundary is a change of device between consecutive nodes: a copy between devices.
 * Inside the decode graph a boundary is paid on every generated token, which is what makes one
 * unsupported op in the decode loop expensive; the warning says so.
 *
 * The input embedding lookup (GET_ROWS on token_embd) runs on the CPU by llama.cpp's design, so a GPU
 * backend normally shows one boundary per step from it; docs/verify.md explains how to read the rest.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"

#define MAX_DEVICES 32
#define OFF_DEVICE_LIST 512

static const cli_option *const options[] = {&cli_opt_backend,  &cli_opt_json, &cli_opt_threads,
                                            &cli_opt_artifact, &cli_opt_rpc,  NULL};

static const char about[] =
    "Loads MODEL on the backend, walks its real compute graph (a short prefill and one decode step) and\n"
    "prints per op type: the node count in one decode step, how many the chosen device supports, how many\n"
    "ran on it and where they ran; then the device boundaries per decode step and per prefill. A boundary\n"
    "inside the decode graph is a copy between devices paid on every token: a warning says when there is\n"
    "one. Last, which layers and weight buffers sit on which device and host. Vulkan on a software device\n"
    "(lavapipe) needs GGML_VK_VISIBLE_DEVICES=0. --backend rpc takes its servers from --rpc or "
    "SIPP_RPC_SERVERS.\n";

static const cli_command command = {.name = "ops",
                                    .synopsis = "ops MODEL --backend NAME [OPTIONS]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 1,
                                    .args_hint = "one MODEL only"};

/* "yes" when all are, "no" when none, "2/3" otherwise. */
static void fraction(char *buf, size_t n, int part, int whole) {
    if (part == whole)
        snprintf(buf, n, "yes");
    else if (part == 0)
        snprintf(buf, n, "no");
    else
        snprintf(buf, n, "%d/%d", part, whole);
}

static json_t *report_json(const sipp_graph_report *g, const char *description, const char *model,
                           const char *warning) {
    json_t *ops = json_array();
    for (int i = 0; i < g->n_ops; i++) {
        const sipp_op_stat *s = &g->ops[i];
        json_array_append_new(ops,
                              json_pack("{s:s, s:i, s:i, s:b, s:i, s:s}", "op", s->op, "count", s->count,
                                        "supported", s->supported, "all_supported", s->supported == s->count,
                                        "on_device", s->on_device, "where", s->where));
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:s?}", "model", model, "backend",
                     g->backend, "device", g->device, "description", description, "n_nodes", g->n_nodes,
                     "n_ops", g->n_ops, "boundaries_decode", g->boundaries_decode, "boundaries_prefill",
                     g->boundaries_prefill, "ops", ops, "warning", warning);
}

int cmd_ops(int argc, char **argv) {
    cli_common o = {0}; /* ops has no options of its own */
    const char *model = NULL;
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, &model, &n_args);
    if (rc != CLI_PARSED) return rc;
    const char *backend = o.backend, *artifact = o.artifact;
    bool as_json = o.json;
    int threads = o.threads;
    if (!model || !backend) {
        cli_error("ops: %s (sipp ops MODEL --backend NAME)",
                  !model ? "no MODEL given" : "--backend is required");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE];
    if (sipp_backend_check_name(backend, err) != SIPP_OK) {
        cli_error("ops: --backend: %s", err);
        return EXIT_USAGE;
    }
    if (!cli_runtime_init_for(artifact, backend)) return EXIT_RUNTIME;
    if (threads == 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);

    sipp_model_params mp = sipp_model_default_params();
    mp.backend = backend;
    sipp_model *m = NULL;
    if (sipp_model_load(model, &mp, &m, err) != SIPP_OK) {
        cli_error("ops: %s", err);
        return EXIT_RUNTIME;
    }
    sipp_model_info info;
    sipp_model_get_info(m, &info);
    sipp_graph_report *g = calloc(1, sizeof *g);
    if (!g || sipp_model_trace_graph(m, threads, g, err) != SIPP_OK) {
        cli_error("ops: tracing the graph of '%s' failed: %s", model, g ? err : "out of memory");
        free(g);
        sipp_model_free(m);
        return EXIT_RUNTIME;
    }
    sipp_placement place[MAX_PLACEMENT];
    int n_place = sipp_model_placement(m, place, MAX_PLACEMENT);
    if (n_place > MAX_PLACEMENT) n_place = MAX_PLACEMENT;
    sipp_model_free(m);

    char description[160] = "";
    sipp_device_info devs[MAX_DEVICES];
    int nd = sipp_devices_list(devs, MAX_DEVICES);
    for (int i = 0; i < nd && i < MAX_DEVICES; i++)
        if (strcmp(devs[i].name, g->device) == 0)
            snprintf(description, sizeof description, "%s", devs[i].description);

    /* Ops whose nodes did not all run on the chosen device: what the boundaries come from. */
    char off[OFF_DEVICE_LIST] = "";
    for (int i = 0; i < g->n_ops; i++) {
        const sipp_op_stat *s = &g->ops[i];
        if (s->on_device == s->count && s->supported == s->count) continue;
        size_t len = strlen(off);
        snprintf(off + len, sizeof off - len, "%s%s (%d of %d on %s%s)", len ? ", " : "", s->op, s->on_device,
                 s->count, g->device, s->supported < s->count ? ", not all supported" : "");
    }
    char warning[OFF_DEVICE_LIST + 256] = "";
    if (g->boundaries_decode > 0)
        snprintf(warning, sizeof warning, "%d boundar%s per decode step: each costs a copy every token (%s)",
                 g->boundaries_decode, g->boundaries_decode == 1 ? "y" : "ies",
                 off[0] ? off : "see the table");

    if (as_json) {
        json_t *j = report_json(g, description, info.description, warning[0] ? warning : NULL);
        json_object_set_new(j, "placement", cli_placement_json(place, n_place));
        char *s = json_dumps(j, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(j);
    } else {
        printf("sipp ops: %s on %s, device %s%s%s%s\n", info.description, g->backend, g->device,
               description[0] ? " (" : "", description, description[0] ? ")" : "");
        printf("one decode step: %d nodes, %d op types\n\n", g->n_nodes, g->n_ops);
        printf("  %-16s %6s %10s %10s  %s\n", "op", "count", "supported", "on device", "ran on");
        for (int i = 0; i < g->n_ops; i++) {
            const sipp_op_stat *s = &g->ops[i];
            char sup[16];
            fraction(sup, sizeof sup, s->supported, s->count);
            printf("  %-16s %6d %10s %10d  %s\n", s->op, s->count, sup, s->on_device, s->where);
        }
        printf("\ndevice boundaries: %d per decode step, %d per prefill\n", g->boundaries_decode,
               g->boundaries_prefill);
        if (warning[0]) printf("warning: %s\n", warning);
        printf("\nweights:\n");
        for (int i = 0; i < n_place; i++)
            cli_print_placement(stdout, &place[i]);
    }
    free(g);
    return EXIT_OK;
}
