/*
 * mtmd_probe.c: shows that llama.cpp's mtmd accepts a projector (sipp-synth --projector) beside a
 * text model, by the path llama.cpp's own tools take, with no sipp code in between.
 *
 *   build/tests/mtmd_probe MODEL.gguf MMPROJ.gguf MEDIA [PROMPT]
 *
 * Loads MODEL with libllama and MMPROJ with mtmd_init_from_file, reads MEDIA (an image: PNG, JPEG,
 * ...; or audio: WAV, MP3, FLAC) with mtmd_helper_bitmap_init_from_file, tokenizes PROMPT (default
 * "<__media__> what is this?") with mtmd_tokenize and evaluates every chunk into a llama_context with
 * mtmd_helper_eval_chunks.  Prints one "key value" line each for what a test checks:
 *
 *   modality vision|audio     what the projector encodes
 *   embd_width N              the width of its embeddings (mtmd refuses a projector whose output
 *                             width is not the text model's input width, so it is that width)
 *   chunks N                  text and media chunks of the prompt
 *   media_tokens N            the embeddings the media became
 *   text_tokens N             the prompt's text tokens
 *   n_past N                  positions after evaluation
 *
 * With MTMD_PROBE_DUMP=FILE the media's bitmap (RGB bytes of an image, or the float samples of audio
 * as libmtmd's helper decoded them) is written to FILE, to compare with sipp's own decoding.
 *
 * Exit status: 0 when everything evaluated; 1 when mtmd_init_from_file refused the projector; 2 when
 * the media could not be read; 3 when mtmd_tokenize failed; 4 when evaluation failed; 5 when the
 * model or a context could not be made; 64 on bad usage.  llama.cpp's errors are printed to stderr.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

/* Writes the bitmap's bytes where MTMD_PROBE_DUMP says, if it says. */
static void dump_media(const mtmd_bitmap *bm) {
    const char *path = getenv("MTMD_PROBE_DUMP");
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (!f) return;
    fwrite(mtmd_bitmap_get_data(bm), 1, mtmd_bitmap_get_n_bytes(bm), f);
    fclose(f);
}

enum {
    EXIT_INIT = 1,
    EXIT_MEDIA = 2,
    EXIT_TOKENIZE = 3,
    EXIT_EVAL = 4,
    EXIT_MODEL = 5,
    EXIT_USAGE = 64,
};

#define DEFAULT_PROMPT "<__media__> what is this?"
#define N_CTX 4096 /* a 30 s audio chunk is 750 embeddings; room for a few */
#define N_BATCH 512
#define N_THREADS 2

/* Errors and warnings only: the load logs of a tiny model say nothing a test reads. */
static void log_errors(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

/* The artifact's backends are modules (GGML_BACKEND_DL) beside libllama.so: load them from there,
 * wherever the probe runs from (ggml_backend_load_all() looks only beside the executable). */
static void load_backends(void) {
    Dl_info info;
    char dir[PATH_MAX];
    if (dladdr((void *)llama_backend_init, &info) && info.dli_fname &&
        snprintf(dir, sizeof(dir), "%s", info.dli_fname) < (int)sizeof(dir) && strrchr(dir, '/')) {
        *strrchr(dir, '/') = '\0';
        ggml_backend_load_all_from_path(dir);
    } else {
        ggml_backend_load_all();
    }
}

/* The text model on the CPU and a context for the prompt; NULL after saying why. */
static struct llama_model *load_text_model(const char *path, struct llama_context **lctx) {
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_BATCH;
    cp.n_threads = cp.n_threads_batch = N_THREADS;
    *lctx = model ? llama_init_from_model(model, cp) : NULL;
    if (!*lctx) {
        fprintf(stderr, "mtmd_probe: cannot load the text model %s or make a context for it\n", path);
        if (model) llama_model_free(model);
        return NULL;
    }
    return model;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: mtmd_probe MODEL.gguf MMPROJ.gguf MEDIA [PROMPT]\n");
        return EXIT_USAGE;
    }
    const char *prompt = argc == 5 ? argv[4] : DEFAULT_PROMPT;
    llama_log_set(log_errors, NULL);
    mtmd_helper_log_set(log_errors, NULL);
    llama_backend_init();
    load_backends();

    int rc = EXIT_MODEL;
    struct llama_model *model = NULL;
    struct llama_context *lctx = NULL;
    mtmd_context *mctx = NULL;
    struct mtmd_helper_bitmap_wrapper media = {0};
    mtmd_input_chunks *chunks = NULL;

    model = load_text_model(argv[1], &lctx);
    if (!model) goto done;

    struct mtmd_context_params mparams = mtmd_context_params_default();
    mparams.use_gpu = false;
    mparams.n_threads = N_THREADS;
    mparams.print_timings = false;
    mctx = mtmd_init_from_file(argv[2], model, mparams);
    if (!mctx) {
        fprintf(stderr, "mtmd_probe: mtmd_init_from_file refused %s\n", argv[2]);
        rc = EXIT_INIT;
        goto done;
    }
    const bool vision = mtmd_support_vision(mctx), audio = mtmd_support_audio(mctx);
    printf("modality %s\n", vision && audio ? "vision+audio" : vision ? "vision" : audio ? "audio" : "none");
    printf("embd_width %d\n", llama_model_n_embd_inp(model));
    fflush(stdout);

    media = mtmd_helper_bitmap_init_from_file(mctx, argv[3], false, mtmd_helper_init_opt_default());
    if (!media.bitmap) {
        fprintf(stderr, "mtmd_probe: cannot read the media file %s\n", argv[3]);
        rc = EXIT_MEDIA;
        goto done;
    }
    dump_media(media.bitmap);

    chunks = mtmd_input_chunks_init();
    const mtmd_input_text text = {
        .text = prompt,
        .text_len = strlen(prompt),
        .add_special = true,
        .parse_special = true,
    };
    const mtmd_bitmap *bitmaps[] = {media.bitmap};
    const int32_t trc = mtmd_tokenize(mctx, chunks, &text, bitmaps, 1);
    if (trc != 0) {
        fprintf(stderr, "mtmd_probe: mtmd_tokenize returned %d\n", trc);
        rc = EXIT_TOKENIZE;
        goto done;
    }
    size_t media_tokens = 0, text_tokens = 0;
    const size_t n_chunks = mtmd_input_chunks_size(chunks);
    for (size_t i = 0; i < n_chunks; i++) {
        const mtmd_input_chunk *chunk = mtmd_input_chunks_get(chunks, i);
        const size_t n = mtmd_input_chunk_get_n_tokens(chunk);
        if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            text_tokens += n;
        } else {
            media_tokens += n;
        }
    }
    printf("chunks %zu\nmedia_tokens %zu\ntext_tokens %zu\n", n_chunks, media_tokens, text_tokens);
    fflush(stdout);

    llama_pos n_past = 0;
    if (mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, N_BATCH, true, &n_past) != 0) {
        fprintf(stderr, "mtmd_probe: mtmd_helper_eval_chunks failed\n");
        rc = EXIT_EVAL;
        goto done;
    }
    printf("n_past %d\n", (int)n_past);
    rc = 0;

done:
    if (chunks) mtmd_input_chunks_free(chunks);
    if (media.bitmap) mtmd_bitmap_free(media.bitmap);
    if (mctx) mtmd_free(mctx);
    if (lctx) llama_free(lctx);
    if (model) llama_model_free(model);
    llama_backend_free();
    return rc;
}
