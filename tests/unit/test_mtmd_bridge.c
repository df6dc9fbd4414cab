/*
 * test_mtmd_bridge.c: no C++ exception from libmtmd crosses into sipp's C (src/model/mtmd_bridge.cpp),
 * and the media budget's bookkeeping (src/model/media_budget.c).
 *
 * The exceptions are real C++ exceptions, thrown by libstdc++ through each call of the bridge as
 * libmtmd's would be (without the bridge, terminate ends the process); each must come back as a
 * status naming what failed. The chat library's bridge is checked the same way.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "model/media_budget.h"
#include "model/mtmd_bridge.h"

static void *libmtmd(void) {
    void *h = dlopen("libmtmd.so", RTLD_NOW | RTLD_LOCAL); /* the artifact beside the test (its rpath) */
    cr_assert_not_null(h, "cannot open the artifact's libmtmd.so: %s", dlerror());
    return h;
}

/* libstdc++'s own entry points that throw (the ones the compiler calls for a failed typeid and a bad
 * array length): they stand for any libmtmd function that throws, at every call of the bridge. */
typedef void (*thrower)(void);

static thrower cxa(const char *name) {
    thrower t = (thrower)dlsym(RTLD_DEFAULT, name);
    if (!t) t = (thrower)dlsym(dlopen("libstdc++.so.6", RTLD_NOW), name);
    cr_assert_not_null(t, "no %s", name);
    return t;
}

static void expect(sipp_status st, sipp_status want, const char *err, const char *what) {
    cr_assert_eq(st, want, "%s: status %d: %s", what, st, err);
    cr_assert(strstr(err, what) != NULL, "'%s' not in '%s'", what, err);
}

Test(mtmd_bridge, every_call_turns_an_exception_into_a_status) {
    struct mtmd_context_params params;
    memset(&params, 0, sizeof params);
    char err[SIPP_ERROR_SIZE];
    mtmd_context *ctx = NULL;
    mtmd_bitmap *bm = NULL;
    mtmd_input_chunks *chunks = NULL;
    int32_t rc = 0;
    llama_pos pos = 0;
    const char *names[] = {"__cxa_bad_typeid", "__cxa_throw_bad_array_new_length"};
    const sipp_status want[] = {SIPP_ERR_INTERNAL,
                                SIPP_ERR_NO_MEMORY}; /* bad_array_new_length is a bad_alloc */
    for (int k = 0; k < 2; k++) {
        thrower t = cxa(names[k]);
        expect(sipp_mtmd_init((sipp_mtmd_init_fn)t, "x", NULL, params, &ctx, err), want[k], err,
               "load the projector");
        expect(sipp_mtmd_image((sipp_mtmd_image_fn)t, (sipp_mtmd_opt_fn)t, NULL, NULL, 0, &bm, err), want[k],
               err, "decode the image");
        expect(sipp_mtmd_audio((sipp_mtmd_audio_fn)t, 1, NULL, &bm, err), want[k], err,
               "take the audio samples");
        expect(sipp_mtmd_chunks((sipp_mtmd_chunks_fn)t, &chunks, err), want[k], err, "start a prompt");
        expect(sipp_mtmd_tokenize((sipp_mtmd_tokenize_fn)t, NULL, NULL, NULL, NULL, 0, &rc, err), want[k],
               err, "prepare the media");
        expect(sipp_mtmd_eval((sipp_mtmd_eval_fn)t, NULL, NULL, NULL, 0, 0, 1, &pos, &rc, err), want[k], err,
               "encode the media");
        cr_assert(ctx == NULL && bm == NULL && chunks == NULL && rc == -1);
    }
}

/* The chat library's bridge (src/chat/chat_bridge.cpp) too: a template that raises an exception in
 * llama.cpp's Jinja engine is a status naming the template's message. */
Test(chat_bridge, an_exception_from_the_chat_library_becomes_a_status) {
    char err[SIPP_ERROR_SIZE] = "", *prompt = NULL;
    sipp_status st =
        sipp_chat_render_json("{{ raise_exception('the template refuses') }}",
                              "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &prompt, err);
    cr_assert_eq(st, SIPP_ERR_INVALID_ARGUMENT, "status %d: %s", st, err);
    cr_assert(strstr(err, "the template refuses") != NULL, "%s", err);
    cr_assert_null(prompt);
}

Test(mtmd_bridge, a_call_that_does_not_throw_gives_its_result) {
    void *h = libmtmd();
    sipp_mtmd_audio_fn fn = (sipp_mtmd_audio_fn)dlsym(h, "mtmd_bitmap_init_from_audio");
    void (*bitmap_free)(mtmd_bitmap *) = (void (*)(mtmd_bitmap *))dlsym(h, "mtmd_bitmap_free");
    float samples[16] = {0.5f};
    char err[SIPP_ERROR_SIZE] = "";
    mtmd_bitmap *bm = NULL;
    cr_assert_eq(sipp_mtmd_audio(fn, 16, samples, &bm, err), SIPP_OK, "%s", err);
    cr_assert_not_null(bm);
    bitmap_free(bm);
}

Test(media_budget, takes_all_or_nothing_and_gives_back) {
    sipp_media_budget *b = sipp_media_budget_new(100);
    cr_assert(sipp_media_budget_take(b, 60));
    cr_assert_not(sipp_media_budget_take(b, 41), "41 more than the 40 left");
    cr_assert_eq(sipp_media_budget_in_use(b), 60);
    cr_assert(sipp_media_budget_take(b, 40));
    sipp_media_budget_give(b, 60);
    sipp_media_budget_give(b, 40);
    cr_assert_eq(sipp_media_budget_in_use(b), 0);
    sipp_media_budget_give(b, 5); /* more than held: never below 0 */
    cr_assert_eq(sipp_media_budget_in_use(b), 0);
    cr_assert(sipp_media_budget_take(NULL, SIZE_MAX), "no budget: everything fits");
    sipp_media_budget_free(b);
}
