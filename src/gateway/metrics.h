/*
 * metrics.h: counters and histograms per target (metrics.c), and the Prometheus text helpers the
 * /metrics route renders its gauges with. Depends only on errors.h: a target is its index here.
 */
#ifndef SIPP_GATEWAY_METRICS_H
#define SIPP_GATEWAY_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/errors.h"
#include "util/util.h"

typedef struct gw_metrics gw_metrics;

gw_metrics *gw_metrics_new(size_t n_targets);
void gw_metrics_free(gw_metrics *m);
/* One finished HTTP request: target index (or -1), status, the error code when it failed (NULL
 * otherwise), and its duration. */
void gw_metrics_request(gw_metrics *m, int target, int status, const char *error_code, double seconds);
/* Tokens of one finished generation, and its time to first token (< 0: none). */
void gw_metrics_tokens(gw_metrics *m, int target, int prompt, int cached, int generated, double ttft_s);
/* Images and audio of one finished generation: their prompt positions, the items encoded (not
 * those whose KV was reused) and the encoding time (sipp_request_stats.media_tokens, ...). */
void gw_metrics_media(gw_metrics *m, int target, int tokens, int encoded, double encode_s);
void gw_metrics_active(gw_metrics *m, int target, int delta);
void gw_metrics_queued(gw_metrics *m, int target, int delta);

/* Renders the counters and histograms of the first n_names targets; names[i] is target i's name (the
 * table may have room for more: targets a models directory gains later). */
void gw_metrics_render(gw_metrics *m, const char *const *names, size_t n_names, sipp_buf *out);
/* "# HELP" and "# TYPE" lines, and one sample NAME{target="TARGET"} V (the label escaped). */
void gw_metrics_header(sipp_buf *out, const char *name, const char *type, const char *help);
void gw_metrics_line(sipp_buf *out, const char *name, const char *target, uint64_t v);

/* What an inference router reads of one target (the Gateway API Inference Extension's model-server
 * protocol): its engine's queue and busy slots and KV cells (sipp_engine_stats; zeros while the
 * target is not loaded), a remote target left out (loaded false). */
typedef struct gw_routing_row {
    const char *name;
    bool local;
    int engine_queued, running;
    int kv_cells, kv_cells_used;
    /* LoRA (vLLM's lora_requests_info): the adapters (their file names without .gguf, comma-separated)
     * that running and waiting requests apply, and how many the target has (max_lora). */
    sipp_buf lora_running, lora_waiting;
    int max_lora;
} gw_routing_row;

/* Renders the routing gauges of rows[i] = target i, under sipp's names and under vLLM's (the same
 * numbers), the waiting count adding the target's requests that wait for an admission permit when
 * any does (admission_waits; a request that finds a permit free passes through that count briefly). */
void gw_metrics_routing(gw_metrics *m, const gw_routing_row *rows, size_t n, bool admission_waits,
                        sipp_buf *out);

#endif
