/*
 * model.h: the inside of a sipp_model (internal). The engine needs the llama handles and the
 * decisions the load made (CPU-only loads turn off every kind of offload in the context too).
 */
#ifndef SIPP_ENGINE_MODEL_H
#define SIPP_ENGINE_MODEL_H

#include <limits.h>
#include <pthread.h>

#include "llama.h"
#include "sipp.h"
#include "util/last_error.h"

#define SIPP_MAX_PLACEMENT 20

/* The model's LoRA adapters (sipp_model_params.lora, lora.c): ids are the indices. */
typedef struct sipp_model_lora {
    struct llama_adapter_lora **adapters;
    char **paths;
    float *scales; /* the defaults given at load */
    size_t n;
} sipp_model_lora;

struct sipp_model {
    struct llama_model *lm;
    const struct llama_vocab *vocab;
    char path[PATH_MAX];
    sipp_backend_decision decision;
    sipp_model_info info;
    bool cpu_only;
    enum llama_flash_attn_type flash_attn; /* what every context of the model gets (flash_attn_policy) */
    const char *flash_attn_label;          /* why, in words (static) */
    bool rpc;                              /* split across rpc servers (backend "rpc") */
    char lease[96];                        /* the GPU residency lease this model holds, "" for none */
    llama_token *eog;                      /* every end-of-generation token, for ignore_eos */
    int n_eog;
    sipp_placement placement[SIPP_MAX_PLACEMENT]; /* where the weights went (placement.c) */
    int n_placement;
    sipp_last_error error; /* per thread: tokenize and chat render are [any thread] */
    /* What the chat layer (src/chat) keeps of this model, its parsed templates: made by that layer
     * on first use under chat_mu, freed here through chat_free. The model layer is below chat and
     * knows nothing of what it holds. */
    pthread_mutex_t chat_mu;
    void *chat;
    void (*chat_free)(void *chat);
    sipp_memory mem;            /* the weight buffers llama.cpp allocated (memory.c) */
    struct sipp_mmproj *mmproj; /* the multimodal projector, NULL for none (mmproj.h) */
    sipp_model_lora lora;
};

/* lora.c: loads the adapters for m (their buffers count in m->mem); frees them; applies scales (NULL:
 * the defaults) to a context of m, leaving out the adapters at 0. */
sipp_status sipp_model_lora_load(sipp_model *m, const sipp_lora_adapter *list, size_t n, char *err);
void sipp_model_lora_free(sipp_model *m);
void sipp_model_lora_apply(const sipp_model *m, struct llama_context *ctx, const float *scales);

/* How a model's own chats are rendered (sipp_model_info.chat_template): with its template ("model"),
 * or with the chat library's fallback when it has none. llama.cpp's common library renders ChatML;
 * the browser runtime, which has no chat library, renders none. */
const char *sipp_model_template_kind(const struct llama_model *lm);

/* The flash attention a load with params gets, and why in words (*label, static). */
sipp_status sipp_flash_attn_policy(const sipp_model_params *params, enum llama_flash_attn_type *out,
                                   const char **label, char *errbuf);

/* Sets the calling thread's last error on the model and returns status. */
sipp_status sipp_model_fail(sipp_model *m, sipp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* llama.cpp's context defaults with the load's backend policy applied: a CPU load keeps the KV cache,
 * every op and attention on the CPU (no KV or op offload), and flash attention is what the load
 * decided (sipp_model_params.flash_attn). Every context sipp makes of a model (generation,
 * embeddings, inspection) starts from here. */
struct llama_context_params sipp_model_context_params(const sipp_model *m);

/* Tokenizes into a malloc'ed array; *n_out tokens. */
sipp_status sipp_model_tokenize_alloc(sipp_model *m, const char *text, bool add_special, bool parse_special,
                                      llama_token **out, int *n_out, char *errbuf);

/* The text of one token (special tokens rendered only when render_special). Appends to buf. */
int sipp_model_token_piece(const sipp_model *m, llama_token t, bool render_special, char *buf, int cap);

/* A load on backend "rpc" (rpc_split.c): the devices in llama.cpp's order (NULL-terminated), the
 * layers offloaded past the local device, and the split among the remote devices. */
typedef struct sipp_rpc_plan {
    ggml_backend_dev_t devices[SIPP_MAX_PLACEMENT + 1];
    float split[SIPP_MAX_PLACEMENT];
    int n_devices;
    int gpu_layers;
    char reason[200];
} sipp_rpc_plan;

/* Connects to the servers (params->rpc_servers, else $SIPP_RPC_SERVERS) and decides the split of
 * n_layer layers: params->tensor_split, else each device's free memory. */
sipp_status sipp_rpc_plan_load(const sipp_model_params *params, int n_layer, sipp_rpc_plan *plan,
                               char *errbuf);
/* Fills the decision's devices and gpu_layers from the model's placement. */
void sipp_rpc_plan_describe(const sipp_model *m, sipp_backend_decision *d);

/* Records the placement llama.cpp logs while the calling thread loads m (begin ... end). */
void sipp_placement_begin(sipp_model *m);
void sipp_placement_end(sipp_model *m);

/* Records where libmtmd puts the projector m loads from path (begin ... end around the load): an
 * entry marked mmproj with the projector's weight bytes on the device libmtmd logged it chose. */
#define SIPP_CLIP_DEVICE_MAX 64
void sipp_placement_projector_begin(char device[SIPP_CLIP_DEVICE_MAX]);
void sipp_placement_projector_end(sipp_model *m, const char *device, const char *path);

#endif
