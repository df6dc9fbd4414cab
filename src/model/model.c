/*
 * model.c: loading a GGUF model on the chosen backend, its tokenizer, and chat templates.
 *
 * A load first reads the GGUF header itself (store/gguf_header.c), so that the common mistakes get a
 * precise message: not a file, not GGUF, truncated, no architecture; and it checks the
 * hyperparameters llama.cpp would assert on (engine/model_check.c), since an assert aborts the
 * process. Only then does llama.cpp
 * load the weights, with the backend the policy chose. A CPU load gets an empty device list, so no
 * weight, KV cell or op can land on a GPU even when the artifact has one. An rpc load gets the
 * servers' devices and a split of the layers (rpc_split.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "backend/rpc.h"
#include "model/mmproj.h"
#include "model/model.h"
#include "model/model_check.h"
#include "store/gguf_header.h"
#include "util/util.h"

#define ALL_LAYERS 9999
#define SIPP_ARCH_MAX 64
#define DEFAULT_PARALLEL 4
#define DEFAULT_MAX_QUEUED 64

sipp_model_params sipp_model_default_params(void) {
    sipp_model_params p = {.backend = "auto", .gpu_layers = -1, .mmproj_offload = true};
    return p;
}

/* The engine's defaults live here, beside the model's, rather than in the engine: the memory estimate
 * (memory.c, this layer) sizes an engine from them, and a layer calls no function of a higher one. */
sipp_engine_params sipp_engine_default_params(void) {
    sipp_engine_params p = {.parallel = DEFAULT_PARALLEL, .max_queued = DEFAULT_MAX_QUEUED};
    return p;
}

sipp_status sipp_model_fail(sipp_model *m, sipp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sipp_last_error_setv(&m->error, st, fmt, ap);
    va_end(ap);
    return st;
}

const char *sipp_model_last_error(const sipp_model *m) { return m ? sipp_last_error_get(&m->error) : ""; }
const sipp_backend_decision *sipp_model_backend(const sipp_model *m) { return &m->decision; }
void sipp_model_get_info(const sipp_model *m, sipp_model_info *info) { *info = m->info; }
void sipp_free(void *p) { free(p); }

/* Checks the file and its GGUF header before llama.cpp sees it: a readable, whole GGUF file with an
 * architecture and, unless only the vocabulary is wanted, hyperparameters llama.cpp will not assert
 * on (model_check.c). */
static sipp_status precheck(const char *path, bool vocab_only, char *arch, size_t arch_len, uint64_t *size,
                            int *n_layer, char *errbuf) {
    sipp_gguf_header *h;
    sipp_status st = sipp_gguf_header_open(path, &h, errbuf);
    if (st != SIPP_OK) return st;
    const char *a;
    if (sipp_gguf_get_str(h, "general.architecture", &a, errbuf) != SIPP_OK || !*a) {
        sipp_gguf_header_close(h);
        return sipp_fail(errbuf, SIPP_ERR_MODEL,
                         "model '%s' has no general.architecture key; it is not a model", path);
    }
    sipp_strlcpy(arch, a, arch_len);
    *size = sipp_gguf_header_file_size(h);
    char key[96];
    snprintf(key, sizeof key, "%s.block_count", arch);
    int64_t layers = sipp_gguf_int_or(h, key, 0);
    *n_layer = layers > 0 && layers <= INT32_MAX ? (int)layers : 0;
    st = sipp_model_check_vocab(h, errbuf);
    if (st == SIPP_OK && !vocab_only) st = sipp_model_check_hparams(h, errbuf);
    sipp_gguf_header_close(h);
    return st;
}

sipp_status sipp_model_check(const char *path, char *errbuf) {
    char arch[SIPP_ARCH_MAX];
    uint64_t size;
    int n_layer;
    if (!path || !*path) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model path given");
    char resolved[PATH_MAX];
    sipp_status st = sipp_store_resolve(path, resolved, sizeof resolved, errbuf);
    return st == SIPP_OK ? precheck(resolved, false, arch, sizeof arch, &size, &n_layer, errbuf) : st;
}

sipp_status sipp_flash_attn_check(const char *value, char *errbuf) {
    if (!value || !*value || strcmp(value, "auto") == 0 || strcmp(value, "on") == 0 ||
        strcmp(value, "off") == 0)
        return SIPP_OK;
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "flash_attn '%.32s' is not one of auto, on, off",
                     value);
}

/* The flash attention a load gets: an explicit "on" or "off", else (auto) llama.cpp's default except on
 * a load that asked for the CPU by name, which keeps the conservative path (no flash attention, as
 * no offload and no lease), and on an rpc split. *label says which, for backend_reason. */
sipp_status sipp_flash_attn_policy(const sipp_model_params *params, enum llama_flash_attn_type *out,
                                   const char **label, char *errbuf) {
    sipp_status st = sipp_flash_attn_check(params->flash_attn, errbuf);
    if (st != SIPP_OK) return st;
    const char *fa = params->flash_attn && *params->flash_attn ? params->flash_attn : "auto";
    if (strcmp(fa, "on") == 0) {
        *out = LLAMA_FLASH_ATTN_TYPE_ENABLED;
        *label = "flash attention on (asked)";
    } else if (strcmp(fa, "off") == 0) {
        *out = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        *label = "flash attention off (asked)";
    } else if (params->backend && strcasecmp(params->backend, "cpu") == 0) {
        *out = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        *label = "flash attention off (explicit cpu; --flash-attn on to use it)";
    } else if (params->backend && strcasecmp(params->backend, "rpc") == 0) {
        /* A split computes attention differently from the local run it must match (sipp verify
         * --backends cpu,rpc) with flash attention on, and greedy output drifts within tokens. */
        *out = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        *label = "flash attention off (rpc split; --flash-attn on to use it)";
    } else {
        *out = LLAMA_FLASH_ATTN_TYPE_AUTO;
        *label = "flash attention auto (llama.cpp's default)";
    }
    return SIPP_OK;
}

/* Sets reason to "BASE; SUFFIX", shortening BASE (never the suffix) to fit. */
static void reason_with(char *reason, size_t cap, const char *base, const char *suffix) {
    const char *sep = "; ", *cut = "...";
    size_t room = cap - 1 - strlen(sep) - strlen(suffix), len = strlen(base);
    size_t keep = len <= room ? len : room - strlen(cut);
    snprintf(reason, cap, "%.*s%s%s%s", (int)keep, base, keep < len ? cut : "", sep, suffix);
}

static void collect_eog(sipp_model *m) {
    int n_vocab = llama_vocab_n_tokens(m->vocab);
    for (int t = 0; t < n_vocab; t++)
        if (llama_vocab_is_eog(m->vocab, t)) m->n_eog++;
    m->eog = calloc((size_t)m->n_eog + 1, sizeof *m->eog);
    m->n_eog = 0;
    for (int t = 0; m->eog && t < n_vocab; t++)
        if (llama_vocab_is_eog(m->vocab, t)) m->eog[m->n_eog++] = t;
}

/* What a load decided before anything was allocated (plan_load): the file, the backend and how the
 * layers are placed. */
typedef struct load_plan {
    char path[PATH_MAX]; /* the resolved file (a store name works wherever a path does) */
    char arch[SIPP_ARCH_MAX];
    uint64_t file_size;
    int n_layer;
    enum llama_flash_attn_type flash_attn;
    const char *fa_label;
    bool rpc;
    sipp_host_view view;
    sipp_policy_result pick;
    sipp_rpc_plan rpc_plan;
} load_plan;

/* Phase 1: every check that needs no allocation (the file, the flash attention, the backend). */
static sipp_status plan_load(const char *path, const sipp_model_params *params, load_plan *lp, char *errbuf) {
    sipp_status st = sipp_runtime_init(NULL, errbuf);
    if (st != SIPP_OK) return st;
    if ((st = sipp_store_resolve(path, lp->path, sizeof lp->path, errbuf)) != SIPP_OK) return st;
    if ((st = precheck(lp->path, params->vocab_only, lp->arch, sizeof lp->arch, &lp->file_size, &lp->n_layer,
                       errbuf)) != SIPP_OK)
        return st;
    lp->flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    lp->fa_label = "";
    if ((st = sipp_flash_attn_policy(params, &lp->flash_attn, &lp->fa_label, errbuf)) != SIPP_OK) return st;
    lp->rpc = !params->vocab_only && params->backend && strcmp(params->backend, "rpc") == 0;
    if (!lp->rpc &&
        ((params->rpc_servers && *params->rpc_servers) || (params->tensor_split && *params->tensor_split)))
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "%s is only used with backend 'rpc' (the backend is '%s'); add --backend rpc or drop it",
            params->rpc_servers && *params->rpc_servers ? "rpc servers (--rpc)" : "tensor_split",
            params->backend ? params->backend : "auto");
    sipp_host_discover(&lp->view);
    lp->pick = (sipp_policy_result){.backend = SIPP_BACKEND_RPC, .device = -1};
    if (!params->vocab_only && !lp->rpc &&
        (st = sipp_policy_decide(&lp->view, params->backend, params->backend_order, &lp->pick, errbuf)) !=
            SIPP_OK)
        return st;
    if (lp->rpc) return sipp_rpc_plan_load(params, lp->n_layer, &lp->rpc_plan, errbuf);
    return SIPP_OK;
}

/* Phase 2: llama.cpp's model parameters for the plan, and the GPU residency lease a GPU load takes
 * (held in m->lease, so sipp_model_free releases it). devices must outlive mp. */
static sipp_status place_load(sipp_model *m, const sipp_model_params *params, load_plan *lp,
                              struct llama_model_params *mp, ggml_backend_dev_t devices[2], char *errbuf) {
    *mp = llama_model_default_params();
    mp->progress_callback = params->progress;
    mp->progress_callback_user_data = params->progress_user;
    mp->vocab_only = params->vocab_only;
    mp->use_extra_bufts = !params->no_repack;
    mp->devices = devices; /* NULL-terminated: empty means no GPU device at all */
#ifdef __EMSCRIPTEN__
    /* In the browser runtime the file is a File or Blob the page mounted, which cannot be mapped. */
    mp->load_mode = LLAMA_LOAD_MODE_NONE;
    mp->lazy_mode = LLAMA_LAZY_MODE_OFF;
#endif
    if (lp->rpc) {
        m->rpc = true;
        mp->devices = lp->rpc_plan.devices;
        mp->split_mode = LLAMA_SPLIT_MODE_LAYER;
        mp->n_gpu_layers = lp->rpc_plan.gpu_layers;
        mp->tensor_split = lp->rpc_plan.split;
        snprintf(lp->pick.reason, sizeof lp->pick.reason, "rpc: %s", lp->rpc_plan.reason);
        return SIPP_OK;
    }
    if (params->vocab_only || lp->pick.backend == SIPP_BACKEND_CPU) {
        mp->n_gpu_layers = 0;
        m->cpu_only = true;
        return SIPP_OK;
    }
    const sipp_device_desc *dev = &lp->view.devices[lp->pick.device];
    devices[0] = ggml_backend_dev_get((size_t)dev->index);
    mp->n_gpu_layers = params->gpu_layers < 0 ? ALL_LAYERS : params->gpu_layers;
    if (!sipp_lease_enabled() || mp->n_gpu_layers <= 0) return SIPP_OK;
    sipp_status st = sipp_lease_check_memory(dev, lp->file_size, errbuf);
    if (st != SIPP_OK) return st;
    return sipp_lease_acquire(sipp_backend_name(lp->pick.backend), dev->name, m->lease, sizeof m->lease,
                              errbuf);
}

/* Phase 3: llama.cpp loads the weights, with its log and buffer allocations observed (placement.c,
 * memory.c); a failure names the file and llama.cpp's reason. */
static sipp_status read_weights(sipp_model *m, const sipp_model_params *params, const load_plan *lp,
                                struct llama_model_params mp, char *errbuf) {
    char llama_err[SIPP_ERROR_SIZE];
    double t0 = sipp_now_ms();
    sipp_log_capture(llama_err);
    sipp_placement_begin(m);
    sipp_buffers_capture(&m->mem);
    m->lm = llama_model_load_from_file(lp->path, mp);
    sipp_buffers_capture(NULL);
    sipp_placement_end(m);
    sipp_log_capture(NULL);
    m->info.load_ms = sipp_now_ms() - t0;
    if (m->lm) return SIPP_OK;
    bool aborted = params->progress && strstr(llama_err, "cancel");
    if (strstr(llama_err, "unknown model architecture"))
        return sipp_fail(
            errbuf, SIPP_ERR_MODEL,
            "model '%s' has architecture '%s', which llama.cpp %s does not support; sipp cannot run it",
            lp->path, lp->arch, sipp_llama_release());
    return sipp_fail(errbuf, aborted ? SIPP_ERR_CANCELLED : SIPP_ERR_MODEL, "model '%s' failed to load: %s",
                     lp->path, *llama_err ? llama_err : "llama.cpp gave no reason");
}

/* Phase 4: what the loaded model is (info) and where it runs and why (decision). */
static void describe_load(sipp_model *m, const sipp_model_params *params, const load_plan *lp,
                          const struct llama_model_params *mp) {
    m->vocab = llama_model_get_vocab(m->lm);
    collect_eog(m);
    sipp_model_info *in = &m->info;
    sipp_strlcpy(in->architecture, lp->arch, sizeof in->architecture);
    llama_model_desc(m->lm, in->description, sizeof in->description);
    if (!params->vocab_only) { /* a vocabulary-only model has no layers to ask about */
        in->n_params = llama_model_n_params(m->lm);
        in->size_bytes = llama_model_size(m->lm);
        in->n_ctx_train = llama_model_n_ctx_train(m->lm);
        in->n_embd = llama_model_n_embd(m->lm);
        in->n_layer = llama_model_n_layer(m->lm);
        in->n_head = llama_model_n_head(m->lm);
        in->n_head_kv = llama_model_n_head_kv(m->lm);
    }
    in->n_vocab = llama_vocab_n_tokens(m->vocab);
    in->has_chat_template = llama_model_chat_template(m->lm, NULL) != NULL;
    sipp_strlcpy(in->chat_template, sipp_model_template_kind(m->lm), sizeof in->chat_template);

    sipp_backend_decision *d = &m->decision;
    if (params->vocab_only) {
        sipp_strlcpy(d->backend, "none", sizeof d->backend);
        sipp_strlcpy(d->reason, "vocabulary only", sizeof d->reason);
        return;
    }
    sipp_strlcpy(d->backend, sipp_backend_name(lp->pick.backend), sizeof d->backend);
    reason_with(d->reason, sizeof d->reason, lp->pick.reason, lp->fa_label);
    if (m->cpu_only) {
        sipp_strlcpy(d->devices, "CPU", sizeof d->devices);
    } else if (lp->rpc) {
        sipp_rpc_plan_describe(m, d);
    } else {
        int layers = mp->n_gpu_layers > in->n_layer ? in->n_layer : mp->n_gpu_layers;
        d->gpu_layers = layers;
        snprintf(d->devices, sizeof d->devices, "%s%s", lp->view.devices[lp->pick.device].name,
                 layers < in->n_layer ? ",CPU" : "");
    }
}

/* Phase 5, when asked: the multimodal projector (mmproj.h), on the model's GPU unless the load is
 * CPU-only or mmproj_offload is off. */
static sipp_status load_projector(sipp_model *m, const sipp_model_params *params, char *errbuf) {
    char device[SIPP_CLIP_DEVICE_MAX];
    sipp_placement_projector_begin(device);
    sipp_status st = sipp_mmproj_load(params->mmproj, m->lm, m->path, params->mmproj_offload && !m->cpu_only,
                                      m->flash_attn, 0, &m->mem, &m->mmproj, errbuf);
    sipp_placement_projector_end(m, st == SIPP_OK ? device : "", params->mmproj);
    if (st != SIPP_OK) return st;
    m->info.vision = sipp_mmproj_vision(m->mmproj);
    m->info.audio = sipp_mmproj_audio(m->mmproj);
    sipp_strlcpy(m->info.mmproj, params->mmproj, sizeof m->info.mmproj);
    return SIPP_OK;
}

/* A load in phases: plan (no allocation), allocate, place (and lease), read the weights, describe.
 * Past the allocation every failure leaves by the one fail: label, which frees what was made
 * (sipp_model_free takes a half-built model: no weights, no lease, no chat cache are all fine). */
sipp_status sipp_model_load(const char *path, const sipp_model_params *params, sipp_model **out,
                            char *errbuf) {
    *out = NULL;
    sipp_model_params def = sipp_model_default_params();
    if (!params) params = &def;
    if (!path || !*path) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model path given");

    load_plan *lp = calloc(1, sizeof *lp);
    if (!lp) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory loading '%s'", path);
    sipp_model *m = NULL;
    sipp_status st = plan_load(path, params, lp, errbuf);
    if (st != SIPP_OK) goto fail;

    if (!(m = calloc(1, sizeof *m))) {
        st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory loading '%s'", path);
        goto fail;
    }
    sipp_last_error_init(&m->error);
    pthread_mutex_init(&m->chat_mu, NULL);
    sipp_strlcpy(m->path, lp->path, sizeof m->path);
    m->flash_attn = lp->flash_attn;
    m->flash_attn_label = lp->fa_label;
    m->info.n_layer = lp->n_layer; /* placement.c needs it while llama.cpp loads */

    ggml_backend_dev_t devices[2] = {NULL, NULL};
    struct llama_model_params mp;
    if ((st = place_load(m, params, lp, &mp, devices, errbuf)) != SIPP_OK) goto fail;
    if ((st = read_weights(m, params, lp, mp, errbuf)) != SIPP_OK) goto fail;
    describe_load(m, params, lp, &mp);
    if (params->mmproj && *params->mmproj && !params->vocab_only &&
        (st = load_projector(m, params, errbuf)) != SIPP_OK)
        goto fail;
    free(lp);
    *out = m;
    return SIPP_OK;

fail:
    sipp_model_free(m);
    free(lp);
    return st;
}

struct llama_context_params sipp_model_context_params(const sipp_model *m) {
    struct llama_context_params cp = llama_context_default_params();
    cp.no_perf = true;
    if (m->cpu_only) {
        cp.offload_kqv = false;
        cp.op_offload = false;
    }
    cp.flash_attn_type = m->flash_attn;
    return cp;
}

const char *sipp_model_template_kind(const struct llama_model *lm) {
#ifdef __EMSCRIPTEN__
    return llama_model_chat_template(lm, NULL) ? "model" : "none";
#else
    return llama_model_chat_template(lm, NULL) || llama_model_chat_template(lm, "tool_use")
               ? "model"
               : "chatml (fallback)";
#endif
}

void sipp_model_free(sipp_model *m) {
    if (!m) return;
    sipp_mmproj_free(m->mmproj);
    llama_model_free(m->lm);
    sipp_lease_release(m->lease);
    free(m->eog);
    if (m->chat_free) m->chat_free(m->chat);
    pthread_mutex_destroy(&m->chat_mu);
    sipp_last_error_destroy(&m->error);
    free(m);
}

sipp_status sipp_tokenize(sipp_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                          int32_t *tokens, size_t cap, size_t *n_out) {
    if (!m || (!text && len)) return SIPP_ERR_INVALID_ARGUMENT;
    if (len > INT32_MAX) return sipp_model_fail(m, SIPP_ERR_INVALID_ARGUMENT, "text too long to tokenize");
    size_t cap32 = cap > INT32_MAX ? INT32_MAX : cap;
    int32_t n = llama_tokenize(m->vocab, text ? text : "", (int32_t)len, tokens, (int32_t)cap32, add_special,
                               parse_special);
    if (n == INT32_MIN) return sipp_model_fail(m, SIPP_ERR_INVALID_ARGUMENT, "tokenization overflowed int32");
    if (n_out) *n_out = (size_t)(n < 0 ? -n : n);
    if (n < 0)
        return sipp_model_fail(m, SIPP_ERR_INVALID_ARGUMENT, "token buffer of %zu too small, need %d", cap,
                               -n);
    return SIPP_OK;
}

sipp_status sipp_model_tokenize_alloc(sipp_model *m, const char *text, bool add_special, bool parse_special,
                                      llama_token **out, int *n_out, char *errbuf) {
    size_t len = strlen(text), need = 0;
    sipp_tokenize(m, text, len, add_special, parse_special, NULL, 0, &need);
    llama_token *toks = malloc((need + 1) * sizeof *toks);
    if (!toks) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory tokenizing %zu bytes", len);
    size_t got = 0;
    sipp_status st = sipp_tokenize(m, text, len, add_special, parse_special, toks, need + 1, &got);
    if (st != SIPP_OK) {
        free(toks);
        return sipp_fail(errbuf, st, "%s", sipp_model_last_error(m));
    }
    *out = toks;
    *n_out = (int)got;
    return SIPP_OK;
}

sipp_status sipp_detokenize(sipp_model *m, const int32_t *tokens, size_t n_tokens, bool render_special,
                            char *buf, size_t cap, size_t *len_out) {
    if (!m || (!tokens && n_tokens) || n_tokens > INT32_MAX) return SIPP_ERR_INVALID_ARGUMENT;
    size_t cap32 = cap > INT32_MAX ? INT32_MAX : cap;
    int32_t n =
        llama_detokenize(m->vocab, tokens, (int32_t)n_tokens, buf, (int32_t)cap32, false, render_special);
    size_t need = (size_t)(n < 0 ? -(int64_t)n : n);
    if (len_out) *len_out = need;
    if (n < 0 || need >= cap) {
        if (buf && cap) buf[0] = '\0';
        return sipp_model_fail(m, SIPP_ERR_INVALID_ARGUMENT, "text buffer of %zu too small, need %zu", cap,
                               need + 1);
    }
    buf[need] = '\0';
    return SIPP_OK;
}

int sipp_model_token_piece(const sipp_model *m, llama_token t, bool render_special, char *buf, int cap) {
    int n = llama_token_to_piece(m->vocab, t, buf, cap, 0, render_special);
    return n < 0 ? 0 : n;
}

sipp_status sipp_chat_render(sipp_model *m, const char *tmpl, const sipp_message *messages, size_t n_messages,
                             bool add_assistant, char **out) {
    *out = NULL;
    const char *user_tmpl = tmpl && *tmpl ? tmpl : NULL;
    if (!user_tmpl) tmpl = llama_model_chat_template(m->lm, NULL);
    if (!tmpl)
        return sipp_model_fail(
            m, SIPP_ERR_MODEL,
            "model '%s' has no chat template (tokenizer.chat_template); pass one (e.g. --chat-template "
            "chatml) or send a plain prompt instead of a chat",
            m->path);
    struct llama_chat_message *msgs = calloc(n_messages ? n_messages : 1, sizeof *msgs);
    if (!msgs) return sipp_model_fail(m, SIPP_ERR_NO_MEMORY, "out of memory");
    size_t total = 0;
    for (size_t i = 0; i < n_messages; i++) {
        if (!messages[i].role || !messages[i].content) {
            free(msgs);
            return sipp_model_fail(m, SIPP_ERR_INVALID_ARGUMENT, "message %zu has no %s", i,
                                   messages[i].role ? "content" : "role");
        }
        msgs[i].role = messages[i].role;
        msgs[i].content = messages[i].content;
        total += strlen(messages[i].role) + strlen(messages[i].content);
    }
    /* A template adds a few dozen bytes per message; start there and grow once if needed. */
    int32_t cap = (int32_t)(total * 2 + 256 * (n_messages + 1));
    char *buf = malloc((size_t)cap);
    int32_t n = buf ? llama_chat_apply_template(tmpl, msgs, n_messages, add_assistant, buf, cap) : -1;
    if (buf && n > cap) {
        char *bigger = realloc(buf, (size_t)n + 1);
        if (bigger) {
            buf = bigger;
            n = llama_chat_apply_template(tmpl, msgs, n_messages, add_assistant, buf, n + 1);
        }
    }
    free(msgs);
    if (!buf || n < 0) {
        free(buf);
        if (user_tmpl)
            return sipp_model_fail(
                m, SIPP_ERR_INVALID_ARGUMENT,
                "chat template '%.64s' is not one llama.cpp knows; use a known name (chatml, llama3, "
                "mistral-v7, phi3, gemma, ...) or the model's own",
                user_tmpl);
        return sipp_model_fail(
            m, SIPP_ERR_MODEL,
            "the chat template of '%s' is not one llama.cpp can apply; pass a known template name "
            "(chatml, llama3, ...)",
            m->path);
    }
    buf[n] = '\0';
    *out = buf;
    return SIPP_OK;
}
