/*
 * graph.h: the model sipp-train trains, held by sipp-train itself: a llama-architecture GGUF's
 * weights in a CPU backend buffer, and the forward pass over one window written with ggml
 * operations that all have a backward pass (docs/training.md says why llama.cpp's own graph is
 * not used).
 */
#ifndef SIPP_TRAIN_GRAPH_H
#define SIPP_TRAIN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"

struct net_hparams {
    int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_rot, n_ctx_train;
    float rms_eps, rope_freq_base;
};

struct net_layer {
    struct ggml_tensor *attn_norm, *wq, *wk, *wv, *wo;
    struct ggml_tensor *ffn_norm, *ffn_gate, *ffn_up, *ffn_down;
};

struct net {
    struct net_hparams hp;
    struct ggml_context *ctx; /* the weights' tensors, named as in the file */
    ggml_backend_buffer_t buf;
    struct ggml_tensor *tok_embd, *output_norm;
    struct ggml_tensor *output; /* == tok_embd when the file ties the output to the embeddings */
    struct net_layer *layers;
    int64_t n_params; /* weights, counted */
};

/* Loads the weights of the model whose header is meta (read from path) into a buffer of backend.
 * Every tensor must be f32 and belong to the llama architecture's dense layout (what sipp-synth
 * writes); anything else is refused with a message naming it. False after reporting why. */
bool net_load(struct net *n, const struct gguf_context *meta, const char *path, ggml_backend_t backend);
void net_free(struct net *n);

/* The logits [n_vocab, n_tokens] of tokens (I32 [n_tokens]) at positions pos (I32 [n_tokens]),
 * with causal attention over the window: the graph of llama.cpp's llama architecture for one
 * sequence, without a KV cache. Every weight is marked as a parameter to train. */
struct ggml_tensor *net_forward(const struct net *n, struct ggml_context *ctx, struct ggml_tensor *tokens,
                                struct ggml_tensor *pos);

/* The weights as they are now, under meta's key-values and in meta's tensor order, written to
 * path through a temporary file, so path appears complete or not at all. False after reporting. */
bool net_save(const struct net *n, const struct gguf_context *meta, const char *path);

#endif
