/*
 * metrics.c: the gateway's counters, gauges and histograms, rendered as Prometheus text for
 * GET /metrics.
 *
 *   sipp_requests_total{target,code}          HTTP requests by target ("" for none) and status
 *   sipp_errors_total{code}                   error replies by error code (queue_full, timeout, ...)
 *   sipp_active_requests{target}              generations holding an admission permit
 *   sipp_queued_requests{target}              generations waiting for one
 *   sipp_engine_running_requests{target}      requests in an engine slot (engine stats)
 *   sipp_engine_queued_requests{target}       requests in an engine's queue
 *   sipp_engine_slots{target}
 *   sipp_prompt_tokens_total{target}, sipp_cached_tokens_total{target}, sipp_generated_tokens_total{target}
 *   sipp_media_tokens_total{target}, sipp_media_encoded_total{target},
 * sipp_media_encode_seconds_total{target} images and audio: their prompt positions, the items the projector
 * encoded, and its time (sipp_request_stats) sipp_ttft_seconds{target}                 histogram: time to
 * first token sipp_request_duration_seconds{target}     histogram: whole HTTP request
 *   sipp_target_ready{target}                 1 when loaded
 *   sipp_upstream_healthy{target,url}         1 when a replica is not ejected
 *   sipp_open_connections, sipp_buffered_request_bytes   connections and incoming bodies held
 *
 * The routing gauges (gw_metrics_routing), per local target: what an inference router (the Gateway API
 * Inference Extension's endpoint picker: llm-d, Envoy AI Gateway, KServe) reads to pick a replica.
 *   sipp_waiting_requests{target}             waiting for an admission permit or for an engine slot
 *   sipp_kv_cache_cells{target}, sipp_kv_cache_cells_used{target}, sipp_kv_cache_usage_ratio{target}
 * and the same numbers under vLLM's names, so an endpoint picker set up for vLLM routes sipp as is:
 *   vllm:num_requests_waiting{model_name}     = sipp_waiting_requests
 *   vllm:num_requests_running{model_name}     = sipp_engine_running_requests (busy slots)
 *   vllm:kv_cache_usage_perc{model_name}      = sipp_kv_cache_usage_ratio (0-1, as vLLM's)
 *   vllm:lora_requests_info{model_name,running_lora_adapters,waiting_lora_adapters,max_lora}
 *                                             the time (vLLM's convention); the adapters (file names
 *                                             without .gguf) running and waiting requests apply,
 *                                             max_lora the target's adapters
 *
 * This file keeps the counters and histograms; the gauges that read other modules' state (targets,
 * engines, upstreams) are rendered by the /metrics route (api/ops.c) with the helpers here.
 *
 * Everything is counted under one mutex: the updates are a few additions per request, far below
 * anything an engine step costs. Status codes index a fixed array, so a new code needs no setup.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>

#include "gateway/metrics.h"

#define GW_CODE_MIN 100
#define GW_CODE_MAX 599
#define GW_N_CODES (GW_CODE_MAX - GW_CODE_MIN + 1)

static const double ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double duration_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
#define N_TTFT (sizeof ttft_bounds / sizeof ttft_bounds[0])
#define N_DURATION (sizeof duration_bounds / sizeof duration_bounds[0])

typedef struct histogram {
    uint64_t counts[N_DURATION + 1]; /* per bucket (not cumulative); the last is +Inf */
    uint64_t n;
    double sum;
} histogram;

typedef struct target_metrics {
    uint64_t codes[GW_N_CODES];
    int active, queued;
    uint64_t prompt, cached, generated;
    uint64_t media_tokens, media_encoded;
    double encode_s;
    histogram ttft, duration;
} target_metrics;

/* The per-target token counters, rendered in this order. */
static const struct {
    const char *name, *help;
    size_t offset; /* of a uint64_t in target_metrics */
} COUNTERS[] = {
    {"sipp_prompt_tokens_total", "Prompt tokens of finished generations.", offsetof(target_metrics, prompt)},
    {"sipp_cached_tokens_total", "Prompt tokens reused from a slot's KV cache.",
     offsetof(target_metrics, cached)},
    {"sipp_generated_tokens_total", "Generated tokens.", offsetof(target_metrics, generated)},
    {"sipp_media_tokens_total", "Prompt positions that came from images and audio.",
     offsetof(target_metrics, media_tokens)},
    {"sipp_media_encoded_total", "Images and audio clips the projector encoded.",
     offsetof(target_metrics, media_encoded)},
};

struct gw_metrics {
    pthread_mutex_t mu;
    size_t n_targets;
    target_metrics *t; /* n_targets + 1: the last is for requests that name no target */
    uint64_t errors[GW_E_COUNT];
};

gw_metrics *gw_metrics_new(size_t n_targets) {
    gw_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->t = calloc(n_targets + 1, sizeof *m->t);
    if (!m->t) {
        free(m);
        return NULL;
    }
    m->n_targets = n_targets;
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void gw_metrics_free(gw_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m->t);
    free(m);
}

static target_metrics *of(gw_metrics *m, int target) {
    return target >= 0 && (size_t)target < m->n_targets ? &m->t[target] : &m->t[m->n_targets];
}

static void observe(histogram *h, const double *bounds, size_t n, double v) {
    size_t i = 0;
    while (i < n && v > bounds[i])
        i++;
    h->counts[i]++;
    h->n++;
    h->sum += v;
}

void gw_metrics_request(gw_metrics *m, int target, int status, const char *error_code, double seconds) {
    pthread_mutex_lock(&m->mu);
    target_metrics *t = of(m, target);
    if (status >= GW_CODE_MIN && status <= GW_CODE_MAX) t->codes[status - GW_CODE_MIN]++;
    observe(&t->duration, duration_bounds, N_DURATION, seconds);
    if (error_code)
        for (int k = 0; k < GW_E_COUNT; k++)
            if (strcmp(gw_error_code((gw_error_kind)k), error_code) == 0) {
                m->errors[k]++;
                break;
            }
    pthread_mutex_unlock(&m->mu);
}

void gw_metrics_tokens(gw_metrics *m, int target, int prompt, int cached, int generated, double ttft_s) {
    pthread_mutex_lock(&m->mu);
    target_metrics *t = of(m, target);
    t->prompt += (uint64_t)(prompt > 0 ? prompt : 0);
    t->cached += (uint64_t)(cached > 0 ? cached : 0);
    t->generated += (uint64_t)(generated > 0 ? generated : 0);
    if (ttft_s >= 0) observe(&t->ttft, ttft_bounds, N_TTFT, ttft_s);
    pthread_mutex_unlock(&m->mu);
}

void gw_metrics_media(gw_metrics *m, int target, int tokens, int encoded, double encode_s) {
    if (tokens <= 0 && encoded <= 0) return;
    pthread_mutex_lock(&m->mu);
    target_metrics *t = of(m, target);
    t->media_tokens += (uint64_t)(tokens > 0 ? tokens : 0);
    t->media_encoded += (uint64_t)(encoded > 0 ? encoded : 0);
    if (encode_s > 0) t->encode_s += encode_s;
    pthread_mutex_unlock(&m->mu);
}

void gw_metrics_active(gw_metrics *m, int target, int delta) {
    pthread_mutex_lock(&m->mu);
    of(m, target)->active += delta;
    pthread_mutex_unlock(&m->mu);
}

void gw_metrics_queued(gw_metrics *m, int target, int delta) {
    pthread_mutex_lock(&m->mu);
    of(m, target)->queued += delta;
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ---------------------------------------------------------------------------------- */

void gw_metrics_header(sipp_buf *o, const char *name, const char *type, const char *help) {
    sipp_buf_appendf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values are target names from the config; quotes and backslashes are escaped anyway. */
static void label(sipp_buf *o, const char *v) {
    for (; *v; v++) {
        if (*v == '"' || *v == '\\') sipp_buf_append(o, "\\", 1);
        if (*v == '\n')
            sipp_buf_append(o, "\\n", 2);
        else
            sipp_buf_append(o, v, 1);
    }
}

void gw_metrics_line(sipp_buf *o, const char *name, const char *target, uint64_t v) {
    sipp_buf_appendf(o, "%s{target=\"", name);
    label(o, target);
    sipp_buf_appendf(o, "\"} %llu\n", (unsigned long long)v);
}

static void render_histogram(sipp_buf *o, const char *name, const char *target, const histogram *h,
                             const double *bounds, size_t n) {
    uint64_t cum = 0;
    for (size_t i = 0; i <= n; i++) {
        cum += h->counts[i];
        sipp_buf_appendf(o, "%s_bucket{target=\"", name);
        label(o, target);
        if (i < n)
            sipp_buf_appendf(o, "\",le=\"%g\"} %llu\n", bounds[i], (unsigned long long)cum);
        else
            sipp_buf_appendf(o, "\",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    sipp_buf_appendf(o, "%s_sum{target=\"", name);
    label(o, target);
    sipp_buf_appendf(o, "\"} %.6f\n%s_count{target=\"", h->sum, name);
    label(o, target);
    sipp_buf_appendf(o, "\"} %llu\n", (unsigned long long)h->n);
}

/* names[i] for the n targets listed so far; "" for the row of requests without a target (i == n). */
static const char *name_of(size_t n, const char *const *names, size_t i) { return i < n ? names[i] : ""; }

/* Row i of the n targets listed so far, the row of requests without a target for i == n (the table
 * has room for targets a models directory may still gain). */
static target_metrics *row(gw_metrics *m, size_t n, size_t i) {
    return i < n ? &m->t[i] : &m->t[m->n_targets];
}

void gw_metrics_render(gw_metrics *m, const char *const *names, size_t n_names, sipp_buf *o) {
    size_t n = n_names < m->n_targets ? n_names : m->n_targets;
    pthread_mutex_lock(&m->mu);
    gw_metrics_header(o, "sipp_requests_total", "counter", "HTTP requests by target and status code.");
    for (size_t i = 0; i <= n; i++)
        for (int c = 0; c < GW_N_CODES; c++) {
            if (!row(m, n, i)->codes[c]) continue;
            sipp_buf_appendf(o, "sipp_requests_total{target=\"");
            label(o, name_of(n, names, i));
            sipp_buf_appendf(o, "\",code=\"%d\"} %llu\n", c + GW_CODE_MIN,
                             (unsigned long long)row(m, n, i)->codes[c]);
        }
    gw_metrics_header(o, "sipp_errors_total", "counter", "Error replies by error code.");
    for (int k = 0; k < GW_E_COUNT; k++)
        sipp_buf_appendf(o, "sipp_errors_total{code=\"%s\"} %llu\n", gw_error_code((gw_error_kind)k),
                         (unsigned long long)m->errors[k]);
    gw_metrics_header(o, "sipp_active_requests", "gauge", "Generations holding an admission permit.");
    for (size_t i = 0; i < n; i++)
        gw_metrics_line(o, "sipp_active_requests", name_of(n, names, i), (uint64_t)m->t[i].active);
    gw_metrics_header(o, "sipp_queued_requests", "gauge", "Generations waiting for an admission permit.");
    for (size_t i = 0; i < n; i++)
        gw_metrics_line(o, "sipp_queued_requests", name_of(n, names, i), (uint64_t)m->t[i].queued);
    for (size_t c = 0; c < sizeof COUNTERS / sizeof *COUNTERS; c++) {
        gw_metrics_header(o, COUNTERS[c].name, "counter", COUNTERS[c].help);
        for (size_t i = 0; i < n; i++)
            gw_metrics_line(o, COUNTERS[c].name, name_of(n, names, i),
                            *(const uint64_t *)((const char *)&m->t[i] + COUNTERS[c].offset));
    }
    gw_metrics_header(o, "sipp_media_encode_seconds_total", "counter", "Time the projector spent encoding.");
    for (size_t i = 0; i < n; i++) {
        sipp_buf_appendf(o, "sipp_media_encode_seconds_total{target=\"");
        label(o, name_of(n, names, i));
        sipp_buf_appendf(o, "\"} %.6f\n", m->t[i].encode_s);
    }
    gw_metrics_header(o, "sipp_ttft_seconds", "histogram", "Time to first token.");
    for (size_t i = 0; i < n; i++)
        render_histogram(o, "sipp_ttft_seconds", name_of(n, names, i), &m->t[i].ttft, ttft_bounds, N_TTFT);
    gw_metrics_header(o, "sipp_request_duration_seconds", "histogram", "HTTP request duration.");
    for (size_t i = 0; i <= n; i++)
        render_histogram(o, "sipp_request_duration_seconds", name_of(n, names, i), &row(m, n, i)->duration,
                         duration_bounds, N_DURATION);
    pthread_mutex_unlock(&m->mu);
}

/* ---- the routing gauges ------------------------------------------------------------------------- */

/* NAME{KEY="TARGET"EXTRA}, EXTRA being more labels (",a=\"b\"") or "". */
static void routing_sample(sipp_buf *o, const char *name, const char *key, const char *target,
                           const char *extra) {
    sipp_buf_appendf(o, "%s{%s=\"", name, key);
    label(o, target);
    sipp_buf_appendf(o, "\"%s}", extra);
}

static double kv_ratio(const gw_routing_row *r) {
    return r->kv_cells > 0 ? (double)r->kv_cells_used / (double)r->kv_cells : 0;
}

/* What a routing gauge shows of a row. */
typedef enum { RV_WAITING, RV_RUNNING, RV_KV_RATIO, RV_KV_CELLS, RV_KV_USED } routing_value;

/* The routing gauges, sipp's names (label target) then vLLM's (label model_name); running has its
 * sipp name among the engine gauges (sipp_engine_running_requests, api/ops.c). */
static const struct {
    const char *name, *key, *help;
    routing_value value;
} ROUTING[] = {
    {"sipp_waiting_requests", "target", "Requests waiting for an admission permit or an engine slot.",
     RV_WAITING},
    {"sipp_kv_cache_usage_ratio", "target", "KV cells the slots hold over the context's cells (0-1).",
     RV_KV_RATIO},
    {"sipp_kv_cache_cells", "target", "KV cells of the context (ctx_size, shared by the slots).",
     RV_KV_CELLS},
    {"sipp_kv_cache_cells_used", "target", "KV cells the slots hold, busy or idle.", RV_KV_USED},
    {"vllm:num_requests_waiting", "model_name", "Requests waiting to be processed (sipp_waiting_requests).",
     RV_WAITING},
    {"vllm:num_requests_running", "model_name", "Requests in an engine slot (sipp_engine_running_requests).",
     RV_RUNNING},
    {"vllm:kv_cache_usage_perc", "model_name", "KV-cache usage, 0-1 (sipp_kv_cache_usage_ratio).",
     RV_KV_RATIO},
};

static void routing_value_text(sipp_buf *o, const gw_routing_row *r, int waiting, routing_value v) {
    if (v == RV_KV_RATIO) {
        sipp_buf_appendf(o, " %.6f\n", kv_ratio(r));
        return;
    }
    sipp_buf_appendf(o, " %d\n",
                     v == RV_WAITING    ? waiting
                     : v == RV_RUNNING  ? r->running
                     : v == RV_KV_CELLS ? r->kv_cells
                                        : r->kv_cells_used);
}

void gw_metrics_routing(gw_metrics *m, const gw_routing_row *rows, size_t n, bool admission_waits,
                        sipp_buf *o) {
    int *waiting = calloc(n + 1, sizeof *waiting);
    if (!waiting) return;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++)
        waiting[i] = rows[i].engine_queued + (admission_waits && i < m->n_targets ? m->t[i].queued : 0);
    pthread_mutex_unlock(&m->mu);
    for (size_t g = 0; g < sizeof ROUTING / sizeof *ROUTING; g++) {
        gw_metrics_header(o, ROUTING[g].name, "gauge", ROUTING[g].help);
        for (size_t i = 0; i < n; i++) {
            if (!rows[i].local) continue;
            routing_sample(o, ROUTING[g].name, ROUTING[g].key, rows[i].name, "");
            routing_value_text(o, &rows[i], waiting[i], ROUTING[g].value);
        }
    }
    free(waiting);
    gw_metrics_header(o, "vllm:lora_requests_info", "gauge",
                      "The LoRA adapters running and waiting requests apply, and the target's adapters "
                      "(max_lora); the value is the time, as vLLM's.");
    for (size_t i = 0; i < n; i++) {
        const gw_routing_row *r = &rows[i];
        if (!r->local) continue;
        sipp_buf_appendf(o, "vllm:lora_requests_info{model_name=\"");
        label(o, r->name);
        sipp_buf_appendf(o, "\",running_lora_adapters=\"");
        label(o, r->lora_running.data ? r->lora_running.data : "");
        sipp_buf_appendf(o, "\",waiting_lora_adapters=\"");
        label(o, r->lora_waiting.data ? r->lora_waiting.data : "");
        sipp_buf_appendf(o, "\",max_lora=\"%d\"} %lld\n", r->max_lora, (long long)time(NULL));
    }
}
