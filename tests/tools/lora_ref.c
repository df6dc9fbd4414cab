/*
 * lora_ref.c: greedy text of a model with one LoRA adapter, decoded by llama.cpp's C API alone, the
 * way llama-server's common_init loads and applies an adapter (llama_adapter_lora_init,
 * llama_set_adapters_lora) and its greedy sampler picks: one sequence, the prompt in one batch,
 * then one token at a time, the argmax of the logits. No sipp code runs: this is the reference
 * tests/integration/test_lora.py compares sipp's engine with (as well as llama-server itself,
 * when its build is there).
 *
 *   build/tests/lora_ref MODEL ADAPTER SCALE N PROMPT     prints the N tokens' text (stops at EOG)
 *
 * The backend modules are loaded from $SIPP_ARTIFACT, else build/artifact (run from the repository).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

#define MAX_PROMPT 4096
#define PIECE 256

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static llama_token argmax(const float *logits, int n) {
    llama_token best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static int decode(struct llama_context *ctx, const struct llama_vocab *vocab, llama_token *toks, int n_prompt,
                  int n_gen) {
    if (llama_decode(ctx, llama_batch_get_one(toks, n_prompt)) != 0) return 1;
    for (int i = 0; i < n_gen; i++) {
        llama_token t = argmax(llama_get_logits_ith(ctx, -1), llama_vocab_n_tokens(vocab));
        if (llama_vocab_is_eog(vocab, t)) break;
        char piece[PIECE];
        int n = llama_token_to_piece(vocab, t, piece, sizeof piece, 0, false);
        if (n > 0) fwrite(piece, 1, (size_t)n, stdout);
        if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: lora_ref MODEL ADAPTER SCALE N PROMPT\n");
        return 64;
    }
    llama_log_set(quiet, NULL);
    const char *art = getenv("SIPP_ARTIFACT"); /* the backend modules: build/artifact by default */
    ggml_backend_load_all_from_path(art ? art : "build/artifact");
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    struct llama_adapter_lora *a = model ? llama_adapter_lora_init(model, argv[2]) : NULL;
    if (!a) {
        fprintf(stderr, "lora_ref: cannot load %s with %s\n", argv[1], argv[2]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    float scale = strtof(argv[3], NULL);
    llama_set_adapters_lora(ctx, &a, 1, &scale);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    llama_token toks[MAX_PROMPT];
    int n = llama_tokenize(vocab, argv[5], (int)strlen(argv[5]), toks, MAX_PROMPT, true, true);
    int rc = n > 0 ? decode(ctx, vocab, toks, n, (int)strtol(argv[4], NULL, 10)) : 1;
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}
