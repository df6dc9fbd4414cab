/*
 * engine_stepped.c: a stepped engine (sipp_engine_new_stepped, driven by sipp_engine_step) against a
 * threaded one on the same model. The browser runtime runs only stepped engines.
 *
 *   engine_stepped MODEL
 *
 * Checks:
 *   - greedy requests give the same text on both, alone and two at once (continuous batching);
 *   - sipp_request_wait and sipp_request_read on a stepped engine's request run its steps;
 *   - a cancel between two steps ends the request as cancelled at the next step, and the engine
 *     serves the next request;
 *   - sipp_engine_step refuses an engine with its own thread; stepping an idle engine returns at once;
 *   - freeing a stepped engine ends what is still queued or running as closed;
 *   - (threaded) sipp_request_read_piece gives a finished request's text in the pieces the engine
 *     published, where sipp_request_read gives it at once; sipp_engine_count_prompt counts a prompt
 *     longer than the context, which submit refuses.
 * Prints "engine_stepped: N passed, M failed" and exits 1 on any failure. Every loop is bounded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"

#define MAX_TOKENS 16
#define MAX_STEPS 10000
#define CTX_SIZE 512
#define CANCEL_AFTER_STEPS 4

static int passed, failed;

static void check(bool ok, const char *what) {
    if (ok)
        passed++;
    else
        failed++;
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
}

static sipp_request_params greedy(const char *prompt) {
    sipp_request_params p = sipp_request_default_params();
    p.prompt = prompt;
    p.max_tokens = MAX_TOKENS;
    p.ignore_eos = true;
    p.sampling.temperature = 0;
    return p;
}

static sipp_engine *engine(sipp_model *m, bool stepped) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.threads = 1;
    ep.parallel = 2;
    ep.ctx_size = CTX_SIZE;
    sipp_engine *e = NULL;
    char err[SIPP_ERROR_SIZE];
    sipp_status st = stepped ? sipp_engine_new_stepped(m, &ep, &e, err) : sipp_engine_new(m, &ep, &e, err);
    if (st != SIPP_OK) {
        fprintf(stderr, "engine_stepped: cannot start an engine: %s\n", err);
        exit(1);
    }
    return e;
}

/* The text of one greedy request run to its end. */
static char *run_one(sipp_engine *e, const char *prompt) {
    sipp_request_params p = greedy(prompt);
    sipp_request *r = NULL;
    if (sipp_engine_submit(e, &p, &r) != SIPP_OK) return NULL;
    sipp_request_wait(r, -1);
    char *text = strdup(sipp_request_text(r));
    sipp_request_free(r);
    return text;
}

/* A reader that comes late (the request has ended) still gets the engine's pieces, one per read. */
static void check_pieces(sipp_engine *e, const char *prompt) {
    sipp_request_params p = greedy(prompt);
    sipp_request *r = NULL, *whole = NULL;
    if (sipp_engine_submit(e, &p, &r) != SIPP_OK || sipp_engine_submit(e, &p, &whole) != SIPP_OK) {
        check(false, "submit for the piece reads");
        return;
    }
    sipp_request_wait(r, -1);
    sipp_request_wait(whole, -1);
    char buf[4096], text[4096] = "";
    int pieces = 0, reads = 0;
    bool finished = false;
    for (int i = 0; i < MAX_STEPS && !finished; i++) {
        size_t n = sipp_request_read_piece(r, buf, sizeof buf - 1, 0, &finished);
        buf[n] = '\0';
        pieces += n > 0;
        strncat(text, buf, sizeof text - strlen(text) - 1);
    }
    finished = false;
    for (int i = 0; i < MAX_STEPS && !finished; i++)
        reads += sipp_request_read(whole, buf, sizeof buf, 0, &finished) > 0;
    printf("# %d pieces read one by one, %d read at once\n", pieces, reads);
    check(strcmp(text, sipp_request_text(r)) == 0 && pieces > 1 && pieces <= MAX_TOKENS && reads == 1,
          "a late reader gets the engine's pieces with sipp_request_read_piece, all at once with "
          "sipp_request_read");
    sipp_request_free(r);
    sipp_request_free(whole);
}

/* A prompt past the context is counted, and refused by submit. */
static void check_count(sipp_engine *e) {
    enum { WORDS = 600 };
    static char prompt[WORDS * 8];
    for (int i = 0; i < WORDS; i++)
        strcat(prompt, "words, ");
    sipp_request_params p = greedy(prompt);
    int n = 0, ctx = 0;
    sipp_status st = sipp_engine_count_prompt(e, &p, &n, &ctx);
    sipp_request *r = NULL;
    sipp_status sub = sipp_engine_submit(e, &p, &r);
    printf("# a prompt of %d tokens, a context of %d\n", n, ctx);
    check(st == SIPP_OK && ctx == CTX_SIZE && n > ctx && sub == SIPP_ERR_CONTEXT_FULL && !r,
          "sipp_engine_count_prompt counts a prompt longer than the context; submit refuses it");
    p.prompt = "short";
    check(sipp_engine_count_prompt(e, &p, &n, NULL) == SIPP_OK && n > 0 && n < 8, "and counts a short one");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: engine_stepped MODEL\n");
        return 2;
    }
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = "cpu";
    sipp_model *m = NULL;
    char err[SIPP_ERROR_SIZE];
    if (sipp_model_load(argv[1], &mp, &m, err) != SIPP_OK) {
        fprintf(stderr, "engine_stepped: %s\n", err);
        return 1;
    }
    const char *prompts[2] = {"The first prompt", "A second, different prompt"};
    sipp_engine *threaded = engine(m, false);
    char *want[2] = {run_one(threaded, prompts[0]), run_one(threaded, prompts[1])};
    bool stepped_refused = sipp_engine_step(threaded, NULL) == SIPP_ERR_INVALID_ARGUMENT;
    check(stepped_refused, "sipp_engine_step refuses an engine with its own thread");
    check_pieces(threaded, prompts[1]);
    check_count(threaded);
    sipp_engine_free(threaded);

    sipp_engine *e = engine(m, true);
    bool busy = true;
    check(sipp_engine_step(e, &busy) == SIPP_OK && !busy,
          "stepping an idle engine returns at once, not busy");

    /* wait runs the steps */
    char *alone = run_one(e, prompts[0]);
    check(want[0] && alone && strcmp(alone, want[0]) == 0,
          "a stepped engine's greedy text equals the threaded one's");
    free(alone);

    /* two at once, driven by explicit steps and read as they go */
    sipp_request *r[2] = {NULL, NULL};
    sipp_request_params p0 = greedy(prompts[0]), p1 = greedy(prompts[1]);
    sipp_engine_submit(e, &p0, &r[0]);
    sipp_engine_submit(e, &p1, &r[1]);
    char got[2][4096] = {{0}};
    size_t len[2] = {0, 0};
    int steps = 0;
    bool both_done = false;
    for (; steps < MAX_STEPS && !both_done; steps++) {
        sipp_engine_step(e, &busy);
        both_done = true;
        for (int i = 0; i < 2; i++) {
            bool fin = false;
            len[i] += sipp_request_read(r[i], got[i] + len[i], sizeof got[i] - 1 - len[i], 0, &fin);
            both_done = both_done && fin;
        }
    }
    check(both_done && strcmp(got[0], want[0]) == 0 && strcmp(got[1], want[1]) == 0,
          "two requests batched in a stepped engine give each one's own text");
    check(sipp_request_finish_reason(r[0]) == SIPP_FINISH_LENGTH, "they end by length");
    sipp_request_free(r[0]);
    sipp_request_free(r[1]);

    /* a cancel between steps */
    sipp_request_params pc = greedy(prompts[1]);
    pc.max_tokens = MAX_TOKENS * 8;
    sipp_request *c = NULL;
    sipp_engine_submit(e, &pc, &c);
    for (int i = 0; i < CANCEL_AFTER_STEPS; i++)
        sipp_engine_step(e, NULL);
    sipp_request_stats before;
    sipp_request_cancel(c);
    sipp_engine_step(e, &busy);
    sipp_request_get_stats(c, &before);
    check(sipp_request_finish_reason(c) == SIPP_FINISH_CANCELLED && !busy,
          "a cancel between two steps ends the request at the next step");
    check(before.generated_tokens <= CANCEL_AFTER_STEPS, "no token is generated after the cancel");
    sipp_request_free(c);
    char *after = run_one(e, prompts[0]);
    check(after && strcmp(after, want[0]) == 0, "the next request after a cancel works");
    free(after);

    /* free with work left */
    sipp_request *q = NULL;
    sipp_request_params pq = greedy(prompts[0]);
    sipp_engine_submit(e, &pq, &q);
    sipp_engine_free(e);
    check(sipp_request_finish_reason(q) == SIPP_FINISH_CANCELLED && sipp_request_status(q) == SIPP_ERR_CLOSED,
          "freeing a stepped engine ends a queued request as closed");
    sipp_request_free(q);

    free(want[0]);
    free(want[1]);
    sipp_model_free(m);
    printf("engine_stepped: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
