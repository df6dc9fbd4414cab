/*
 * engine_stress.c: many threads against one engine, for real.
 *
 *   engine_stress MODEL [THREADS] [REQUESTS_PER_THREAD]
 *
 * Each thread submits requests and, at random, lets them finish, cancels them mid-generation, gives
 * them a deadline that passes, or closes early by returning false from the piece callback. Checks:
 *   - every request ends exactly once, with a finish reason that matches what was done to it;
 *   - greedy requests that ran to the end produce exactly the text of the same request run alone
 *     (batching does not change results on the CPU backend);
 *   - streamed pieces concatenate to the final text;
 *   - afterwards no slot is busy and nothing is queued (no slot leaks);
 *   - a full queue refuses at once with SIPP_ERR_BUSY instead of hanging;
 *   - a prompt sharing a prefix with another slot's KV reuses those cells without changing any output;
 *   - while requests run, other threads tokenize and render chats on the same model, failing on
 *     purpose, and each reads its own error message (the model's error path is [any thread], and a
 *     chat submit reads the model's message on the submitting thread).
 * Prints "engine_stress: N passed, M failed" and exits 1 on any failure. Bounded: every wait has a
 * timeout, and the number of requests is fixed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sipp.h"

#define DEFAULT_THREADS 6
#define DEFAULT_PER_THREAD 8
#define MAX_TOKENS 24
#define WAIT_LIMIT_MS 120000
#define N_PROMPTS 3
#define PIECES_CAP 4096
#define MODEL_WORKERS 2
#define MODEL_ROUNDS 40
#define TOKENS_CAP 256
#define BAD_TEMPLATE "no-such-chat-template"

static const char *const prompts[N_PROMPTS] = {"The quick brown fox", "Once upon a time in a land",
                                               "Numbers: one two three"};
static char *expected[N_PROMPTS];
static sipp_engine *engine;
static atomic_int passed, failed;

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (cond) {                                                                                          \
            atomic_fetch_add(&passed, 1);                                                                    \
        } else {                                                                                             \
            atomic_fetch_add(&failed, 1);                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                             \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
        }                                                                                                    \
    } while (0)

typedef struct stream {
    char text[PIECES_CAP];
    size_t len;
    int calls;
    int stop_after; /* return false after this many pieces; 0 = never */
    int finishes;   /* on_finish calls: exactly one per request */
    sipp_finish_reason finish_reason;
} stream;

static void on_finish(sipp_finish_reason reason, void *user) {
    stream *s = user;
    s->finishes++;
    s->finish_reason = reason;
}

static bool on_piece(const char *piece, size_t len, void *user) {
    stream *s = user;
    if (s->len + len < sizeof s->text) {
        memcpy(s->text + s->len, piece, len);
        s->len += len;
    }
    s->calls++;
    return !(s->stop_after && s->calls >= s->stop_after);
}

static sipp_request_params greedy(const char *prompt, stream *s) {
    sipp_request_params p = sipp_request_default_params();
    p.prompt = prompt;
    p.max_tokens = MAX_TOKENS;
    p.ignore_eos = true;
    p.sampling.temperature = 0;
    p.on_piece = on_piece;
    p.on_finish = s ? on_finish : NULL;
    p.user = s;
    return p;
}

typedef enum { ACT_FINISH, ACT_CANCEL, ACT_DEADLINE, ACT_CALLBACK_STOP, ACT_COUNT } action;

typedef struct worker_arg {
    unsigned seed;
    int per_thread;
} worker_arg;

static void *worker(void *arg) {
    worker_arg *wa = arg;
    unsigned seed = wa->seed;
    int per_thread = wa->per_thread;
    for (int i = 0; i < per_thread; i++) {
        int k = rand_r(&seed) % N_PROMPTS;
        action act = (action)(rand_r(&seed) % ACT_COUNT);
        stream s = {0};
        sipp_request_params p = greedy(prompts[k], &s);
        if (act == ACT_DEADLINE) p.timeout_ms = 1 + rand_r(&seed) % 20;
        if (act == ACT_CALLBACK_STOP) s.stop_after = 1 + rand_r(&seed) % 3;
        sipp_request *r = NULL;
        sipp_status st = sipp_engine_submit(engine, &p, &r);
        if (st == SIPP_ERR_BUSY) continue; /* allowed under load; the queue test checks it */
        CHECK(st == SIPP_OK, "submit: %s", sipp_engine_last_error(engine));
        if (st != SIPP_OK) continue;
        if (act == ACT_CANCEL) sipp_request_cancel(r);
        CHECK(sipp_request_wait(r, WAIT_LIMIT_MS) == SIPP_OK, "request did not finish in time");
        sipp_finish_reason fr = sipp_request_finish_reason(r);
        CHECK(fr != SIPP_FINISH_NONE && fr != SIPP_FINISH_ERROR, "finish reason %s: %s",
              sipp_finish_reason_name(fr), sipp_request_error(r));
        const char *text = sipp_request_text(r);
        CHECK(strlen(text) == s.len && memcmp(text, s.text, s.len) == 0,
              "streamed pieces differ from the text");
        if (fr == SIPP_FINISH_LENGTH) {
            CHECK(act == ACT_FINISH || act == ACT_DEADLINE || act == ACT_CANCEL, "length after %d", act);
            CHECK(strcmp(text, expected[k]) == 0,
                  "batched greedy output differs from the single-request output:\n"
                  "  got      '%s'\n  expected '%s'",
                  text, expected[k]);
        } else {
            CHECK(fr == SIPP_FINISH_CANCELLED, "unexpected finish %s", sipp_finish_reason_name(fr));
            CHECK(act != ACT_FINISH, "a request left alone was cancelled");
            CHECK(strncmp(expected[k], text, strlen(text)) == 0,
                  "a cancelled request's text is not a prefix");
        }
        CHECK(s.finishes == 1 && s.finish_reason == fr,
              "on_finish called %d times, last with %s (finished as %s)", s.finishes,
              sipp_finish_reason_name(s.finish_reason), sipp_finish_reason_name(fr));
        /* Ended exactly once: waiting again returns at once and nothing changes. */
        CHECK(sipp_request_wait(r, 0) == SIPP_OK && sipp_request_finish_reason(r) == fr, "finish changed");
        sipp_request_free(r);
    }
    return NULL;
}

/* The model's [any thread] calls, failing and succeeding, beside the request workers: every failure's
 * message is the one this thread caused, never another thread's. */
static void *model_worker(void *arg) {
    sipp_model *m = arg;
    static const char text[] = "a sentence of several words that needs more than one token";
    const sipp_message msgs[] = {{"system", "be brief"}, {"user", "hello there"}};
    const size_t n_msgs = sizeof msgs / sizeof *msgs;
    int32_t tokens[TOKENS_CAP];
    for (int i = 0; i < MODEL_ROUNDS; i++) {
        size_t need = 0;
        sipp_status st = sipp_tokenize(m, text, strlen(text), true, false, tokens, 1, &need);
        CHECK(st == SIPP_ERR_INVALID_ARGUMENT && strstr(sipp_model_last_error(m), "too small"),
              "tokenize into 1 slot: %s: %s", sipp_status_name(st), sipp_model_last_error(m));
        st = sipp_tokenize(m, text, strlen(text), true, false, tokens, TOKENS_CAP, &need);
        CHECK(st == SIPP_OK && need > 1, "tokenize: %s: %s", sipp_status_name(st), sipp_model_last_error(m));

        char *out = NULL;
        st = sipp_chat_render(m, "chatml", msgs, n_msgs, true, &out);
        CHECK(st == SIPP_OK && out && strstr(out, "hello there"), "render: %s", sipp_model_last_error(m));
        sipp_free(out);
        out = NULL;
        st = sipp_chat_render(m, BAD_TEMPLATE, msgs, n_msgs, true, &out);
        CHECK(st == SIPP_ERR_INVALID_ARGUMENT && strstr(sipp_model_last_error(m), BAD_TEMPLATE),
              "render with a bad template: %s: %s", sipp_status_name(st), sipp_model_last_error(m));

        /* A chat submit renders on this thread and reports the model's message as the engine's. */
        sipp_request_params p = greedy(NULL, NULL);
        p.messages = msgs;
        p.n_messages = n_msgs;
        p.chat_template = BAD_TEMPLATE;
        sipp_request *r = NULL;
        st = sipp_engine_submit(engine, &p, &r);
        CHECK(st == SIPP_ERR_INVALID_ARGUMENT && !r && strstr(sipp_engine_last_error(engine), BAD_TEMPLATE),
              "chat submit with a bad template: %s: %s", sipp_status_name(st),
              sipp_engine_last_error(engine));
    }
    return NULL;
}

static void check_queue_full(sipp_model *m) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 1;
    ep.max_queued = 2;
    ep.threads = 1;
    sipp_engine *e;
    char err[SIPP_ERROR_SIZE];
    CHECK(sipp_engine_new(m, &ep, &e, err) == SIPP_OK, "engine: %s", err);
    sipp_request *rs[8] = {0};
    int busy = 0, ok = 0;
    for (int i = 0; i < 8; i++) {
        sipp_request_params p = greedy(prompts[0], NULL);
        p.on_piece = NULL;
        p.max_tokens = 200;
        sipp_status st = sipp_engine_submit(e, &p, &rs[i]);
        if (st == SIPP_ERR_BUSY)
            busy++;
        else if (st == SIPP_OK)
            ok++;
    }
    CHECK(busy > 0, "a full queue never refused (accepted %d)", ok);
    CHECK(strstr(sipp_engine_last_error(e), "queue is full") != NULL, "busy message: %s",
          sipp_engine_last_error(e));
    sipp_engine_free(e); /* cancels what runs and what waits */
    for (int i = 0; i < 8; i++) {
        if (!rs[i]) continue;
        CHECK(sipp_request_wait(rs[i], 0) == SIPP_OK, "engine_free left a request unfinished");
        sipp_request_free(rs[i]);
    }
}

typedef struct timeline {
    double first, last;
} timeline;

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool on_piece_time(const char *piece, size_t len, void *user) {
    timeline *t = user;
    double now = mono_ms();
    if (!t->first) t->first = now;
    t->last = now;
    return true;
}

/* Two requests with one context_key never run at once, and the next turn of a conversation finds its
 * history in the slot. */
static void check_context_key(sipp_model *m) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 2;
    ep.threads = 1;
    sipp_engine *e;
    char err[SIPP_ERROR_SIZE];
    CHECK(sipp_engine_new(m, &ep, &e, err) == SIPP_OK, "engine: %s", err);
    timeline ta = {0}, tb = {0};
    sipp_request_params pa = greedy(prompts[0], NULL), pb = greedy(prompts[2], NULL);
    pa.on_piece = pb.on_piece = on_piece_time;
    pa.user = &ta;
    pb.user = &tb;
    pa.context_key = pb.context_key = "conversation-1";
    sipp_request *a = NULL, *b = NULL;
    CHECK(sipp_engine_submit(e, &pa, &a) == SIPP_OK && sipp_engine_submit(e, &pb, &b) == SIPP_OK, "submit");
    sipp_request_wait(a, WAIT_LIMIT_MS);
    sipp_request_wait(b, WAIT_LIMIT_MS);
    CHECK(tb.first >= ta.last, "the second request of a key ran while the first was running");
    /* The next turn: the first request's prompt and answer, then more. */
    char next[PIECES_CAP];
    snprintf(next, sizeof next, "%s%s and then", prompts[2], sipp_request_text(b));
    sipp_request_params pc = greedy(next, NULL);
    pc.on_piece = NULL;
    pc.context_key = "conversation-1";
    sipp_request *c = NULL;
    sipp_engine_submit(e, &pc, &c);
    sipp_request_wait(c, WAIT_LIMIT_MS);
    sipp_request_stats sa, sc;
    sipp_request_get_stats(b, &sa);
    sipp_request_get_stats(c, &sc);
    /* All of the first turn's prompt but perhaps its last token, which the answer's first characters
     * may merge with when the whole conversation is tokenized again. Another slot would share only BOS. */
    CHECK(sc.cached_tokens >= sa.prompt_tokens - 1 && sc.cached_tokens > 1,
          "next turn reused %d tokens, the first turn's prompt had %d", sc.cached_tokens, sa.prompt_tokens);
    sipp_request_free(a);
    sipp_request_free(b);
    sipp_request_free(c);
    sipp_engine_free(e);
}

/* Runs one greedy request to its end on `e`; returns its text (malloc'd) and its stats. */
static char *run_alone(sipp_engine *e, const char *prompt, int max_tokens, sipp_request_stats *stats) {
    sipp_request_params p = greedy(prompt, NULL);
    p.on_piece = NULL;
    p.max_tokens = max_tokens;
    sipp_request *r = NULL;
    if (sipp_engine_submit(e, &p, &r) != SIPP_OK) return NULL;
    sipp_request_wait(r, WAIT_LIMIT_MS);
    char *text = strdup(sipp_request_text(r));
    if (stats) sipp_request_get_stats(r, stats);
    sipp_request_free(r);
    return text;
}

/* A prompt that shares a long prefix with what another slot holds takes those cells instead of
 * evaluating them, whether that slot is busy or idle, and the output stays exactly what it is
 * without sharing; the donor's own output is not disturbed, nor is the borrower's when the donor's
 * slot is later reused for something else. */
static void check_shared_prefix(sipp_model *m) {
    static const char prefix[] = "You are a careful assistant. Answer in one short sentence, and never "
                                 "repeat the question back. Here is the question:";
    char pa[256], pb[256], pc[256];
    snprintf(pa, sizeof pa, "%s what is a lighthouse?", prefix);
    snprintf(pb, sizeof pb, "%s why is the sea salty?", prefix);
    snprintf(pc, sizeof pc, "%s", "Numbers: seven eight nine ten eleven twelve");
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 2;
    ep.threads = 1;
    sipp_engine *ref, *e;
    char err[SIPP_ERROR_SIZE];
    if (sipp_engine_new(m, &ep, &ref, err) != SIPP_OK) {
        CHECK(false, "engine: %s", err);
        return;
    }
    sipp_request_stats st;
    char *want_a = run_alone(ref, pa, 40, NULL);
    sipp_engine_free(ref); /* a fresh engine each, so nothing is shared in the references */
    sipp_engine_new(m, &ep, &ref, err);
    char *want_b = run_alone(ref, pb, 12, &st);
    int n_prompt_b = st.prompt_tokens;
    sipp_engine_free(ref);
    CHECK(sipp_engine_new(m, &ep, &e, err) == SIPP_OK, "engine: %s", err);

    /* B arrives while A is generating in the other slot. */
    sipp_request_params p = greedy(pa, NULL);
    p.on_piece = NULL;
    p.max_tokens = 40;
    sipp_request *a = NULL;
    CHECK(sipp_engine_submit(e, &p, &a) == SIPP_OK, "submit A");
    while (sipp_request_wait(a, 1) != SIPP_OK && !*sipp_request_text(a))
        continue; /* A is generating */
    char *got_b = run_alone(e, pb, 12, &st);
    sipp_request_wait(a, WAIT_LIMIT_MS);
    CHECK(st.cached_tokens >= n_prompt_b / 2, "B took %d of its %d prompt tokens from A's slot",
          st.cached_tokens, n_prompt_b);
    CHECK(got_b && strcmp(got_b, want_b) == 0,
          "a shared prefix changed B's output:\n  got      '%s'\n  expected '%s'", got_b ? got_b : "(none)",
          want_b);
    CHECK(strcmp(sipp_request_text(a), want_a) == 0, "sharing A's prefix changed A's output");
    sipp_request_free(a);
    free(got_b);

    /* Both slots are idle now. Another prompt takes one of them over and drops what it held, which
     * for one of them means cells the other still shares; B's prompt again must still find its
     * prefix in whichever slot kept it, and give the same output. */
    free(run_alone(e, pc, 4, NULL));
    got_b = run_alone(e, pb, 12, &st);
    CHECK(got_b && strcmp(got_b, want_b) == 0 && st.cached_tokens >= n_prompt_b / 2,
          "B again: cached %d of %d, output %s", st.cached_tokens, n_prompt_b,
          got_b && strcmp(got_b, want_b) == 0 ? "unchanged" : "changed");
    free(got_b);
    free(want_a);
    free(want_b);
    sipp_engine_free(e);
}

/* Out of KV space: one request fails with a clear message, the other runs to its end. */
static void check_kv_full(sipp_model *m) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 2;
    ep.threads = 1;
    ep.ctx_size = 256; /* shared by the slots: two requests of 200 tokens overflow it, one alone fits */
    sipp_engine *e;
    char err[SIPP_ERROR_SIZE];
    CHECK(sipp_engine_new(m, &ep, &e, err) == SIPP_OK, "engine: %s", err);
    sipp_request *r[2];
    for (int i = 0; i < 2; i++) {
        sipp_request_params p = greedy(prompts[i], NULL);
        p.on_piece = NULL;
        p.max_tokens = 200;
        CHECK(sipp_engine_submit(e, &p, &r[i]) == SIPP_OK, "submit: %s", sipp_engine_last_error(e));
    }
    int errors = 0, lengths = 0;
    for (int i = 0; i < 2; i++) {
        sipp_request_wait(r[i], WAIT_LIMIT_MS);
        sipp_finish_reason fr = sipp_request_finish_reason(r[i]);
        if (fr == SIPP_FINISH_ERROR) {
            errors++;
            CHECK(sipp_request_status(r[i]) == SIPP_ERR_CONTEXT_FULL &&
                      strstr(sipp_request_error(r[i]), "context is full"),
                  "kv-full error: %s", sipp_request_error(r[i]));
        }
        lengths += fr == SIPP_FINISH_LENGTH;
        sipp_request_free(r[i]);
    }
    CHECK(errors == 1 && lengths == 1, "out of KV space: %d errors, %d finished (want 1 and 1)", errors,
          lengths);
    sipp_engine_free(e);
}

/* Runs n requests at once (prompts[0..n), max_tokens each) to their end; each one's finish reason and
 * generated-token count land in fr[] and gen[]; an error's message goes to stderr. */
static void run_together(sipp_engine *e, int n, int max_tokens, sipp_finish_reason *fr, int *gen) {
    sipp_request *r[N_PROMPTS];
    for (int i = 0; i < n; i++) {
        sipp_request_params p = greedy(prompts[i], NULL);
        p.on_piece = NULL;
        p.max_tokens = max_tokens;
        CHECK(sipp_engine_submit(e, &p, &r[i]) == SIPP_OK, "submit: %s", sipp_engine_last_error(e));
    }
    for (int i = 0; i < n; i++) {
        sipp_request_wait(r[i], WAIT_LIMIT_MS);
        fr[i] = sipp_request_finish_reason(r[i]);
        sipp_request_stats st;
        sipp_request_get_stats(r[i], &st);
        gen[i] = st.generated_tokens;
        if (fr[i] == SIPP_FINISH_ERROR)
            fprintf(stderr, "engine_stress: request %d: %s\n", i, sipp_request_error(r[i]));
        sipp_request_free(r[i]);
    }
}

/* Idle slots' KV is a cache, not a claim (issue 21, item 2): after three requests have finished and
 * left their cells, one request that needs most of the context runs to its max_tokens, the idle
 * slots giving up their cells (least recently used first) instead of the live request failing. */
static void check_idle_kv_yields(sipp_model *m) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 4;
    ep.threads = 1;
    ep.ctx_size = 256; /* three idle slots of ~65 cells leave too little for one of ~205 */
    sipp_engine *e;
    char err[SIPP_ERROR_SIZE];
    CHECK(sipp_engine_new(m, &ep, &e, err) == SIPP_OK, "engine: %s", err);
    sipp_finish_reason fr[N_PROMPTS];
    int gen[N_PROMPTS];
    run_together(e, 3, 60, fr, gen);
    for (int i = 0; i < 3; i++)
        CHECK(fr[i] == SIPP_FINISH_LENGTH, "warm-up request %d: %s", i, sipp_finish_reason_name(fr[i]));
    sipp_request_params p = greedy("A fourth prompt, unlike the other three", NULL);
    p.on_piece = NULL;
    p.max_tokens = 200;
    sipp_request *r;
    CHECK(sipp_engine_submit(e, &p, &r) == SIPP_OK, "submit: %s", sipp_engine_last_error(e));
    sipp_request_wait(r, WAIT_LIMIT_MS);
    sipp_request_stats st;
    sipp_request_get_stats(r, &st);
    CHECK(sipp_request_finish_reason(r) == SIPP_FINISH_LENGTH && st.generated_tokens == 200,
          "a lone request beside idle slots: %s after %d tokens: %s",
          sipp_finish_reason_name(sipp_request_finish_reason(r)), st.generated_tokens,
          sipp_request_error(r) ? sipp_request_error(r) : "");
    sipp_request_free(r);
    sipp_engine_free(e);
}

/* No max_tokens means "until the context is full" (issue 21, item 3): two such requests that fill
 * the shared context both end with "length" and their output, none with an error. */
static void check_until_full(sipp_model *m) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 2;
    ep.threads = 1;
    ep.ctx_size = 256;
    sipp_engine *e;
    char err[SIPP_ERROR_SIZE];
    CHECK(sipp_engine_new(m, &ep, &e, err) == SIPP_OK, "engine: %s", err);
    sipp_finish_reason fr[N_PROMPTS];
    int gen[N_PROMPTS];
    run_together(e, 2, -1, fr, gen);
    for (int i = 0; i < 2; i++)
        CHECK(fr[i] == SIPP_FINISH_LENGTH && gen[i] > 0, "until full, request %d: %s after %d tokens", i,
              sipp_finish_reason_name(fr[i]), gen[i]);
    sipp_engine_free(e);
}

static bool stop_after_three(void *user) { return ++*(int *)user <= 3; }

/* An embedding call stops between inputs (issue 21, item 7): should_continue answering false after
 * three inputs ends it with SIPP_ERR_CANCELLED saying how far it got, and the embedder is free for
 * the next call. */
static void check_embed_cancel(sipp_model *m) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.threads = 1;
    ep.ctx_size = 256;
    sipp_engine *e;
    char err[SIPP_ERROR_SIZE];
    CHECK(sipp_engine_new(m, &ep, &e, err) == SIPP_OK, "engine: %s", err);
    enum { N_INPUTS = 8 };
    const char *texts[N_INPUTS];
    for (int i = 0; i < N_INPUTS; i++)
        texts[i] = prompts[i % N_PROMPTS];
    float *out = NULL;
    int n_embd = 0, calls = 0;
    sipp_embed_options o = sipp_embed_default_options();
    o.should_continue = stop_after_three;
    o.user = &calls;
    sipp_status st = sipp_engine_embed_with(e, texts, N_INPUTS, &o, &out, &n_embd, NULL);
    CHECK(st == SIPP_ERR_CANCELLED && !out && strstr(sipp_engine_last_error(e), "after 3 of 8"),
          "cancelled embedding: %s: %s", sipp_status_name(st), sipp_engine_last_error(e));
    st = sipp_engine_embed_with(e, texts, N_INPUTS, NULL, &out, &n_embd, NULL);
    CHECK(st == SIPP_OK && out && n_embd > 0, "embedding after a cancel: %s", sipp_engine_last_error(e));
    free(out);
    sipp_engine_free(e);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: engine_stress MODEL [THREADS] [REQUESTS_PER_THREAD]\n");
        return 2;
    }
    int n_threads = argc > 2 ? atoi(argv[2]) : DEFAULT_THREADS;
    int per_thread = argc > 3 ? atoi(argv[3]) : DEFAULT_PER_THREAD;
    char err[SIPP_ERROR_SIZE];
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = "cpu";
    sipp_model *m;
    if (sipp_model_load(argv[1], &mp, &m, err) != SIPP_OK) {
        fprintf(stderr, "engine_stress: %s\n", err);
        return 1;
    }
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 4;
    ep.threads = 1;
    ep.ctx_size = 1024;
    if (sipp_engine_new(m, &ep, &engine, err) != SIPP_OK) {
        fprintf(stderr, "engine_stress: %s\n", err);
        return 1;
    }
    /* The reference: each prompt alone. */
    for (int k = 0; k < N_PROMPTS; k++) {
        stream s = {0};
        sipp_request_params p = greedy(prompts[k], &s);
        sipp_request *r;
        if (sipp_engine_submit(engine, &p, &r) != SIPP_OK || sipp_request_wait(r, WAIT_LIMIT_MS) != SIPP_OK)
            return 1;
        expected[k] = strdup(sipp_request_text(r));
        CHECK(sipp_request_finish_reason(r) == SIPP_FINISH_LENGTH, "reference did not run to length");
        sipp_request_free(r);
    }
    pthread_t *th = calloc((size_t)n_threads, sizeof *th);
    worker_arg *args = calloc((size_t)n_threads, sizeof *args);
    pthread_t model_th[MODEL_WORKERS];
    for (int i = 0; i < MODEL_WORKERS; i++)
        pthread_create(&model_th[i], NULL, model_worker, m);
    for (int i = 0; i < n_threads; i++) {
        args[i] = (worker_arg){.seed = (unsigned)(i * 7919 + 17), .per_thread = per_thread};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < n_threads; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < MODEL_WORKERS; i++)
        pthread_join(model_th[i], NULL);
    sipp_engine_stats st;
    sipp_engine_get_stats(engine, &st);
    CHECK(st.running == 0 && st.queued == 0, "slots leak: %d running, %d queued after all ended", st.running,
          st.queued);
    CHECK(st.decode_steps > 0 && st.mean_busy_slots >= 1.0, "stats: %llu steps, %.2f busy",
          (unsigned long long)st.decode_steps, st.mean_busy_slots);
    /* Prefix reuse: the same prompt again evaluates only its last token. The load above may have
     * evicted it from every slot (more callers than slots), so it runs once first. */
    sipp_request *r;
    sipp_request_stats rs;
    stream s;
    for (int round = 0; round < 2; round++) {
        s = (stream){0};
        sipp_request_params p = greedy(prompts[1], &s);
        sipp_engine_submit(engine, &p, &r);
        sipp_request_wait(r, WAIT_LIMIT_MS);
        sipp_request_get_stats(r, &rs);
        if (round == 0) sipp_request_free(r);
    }
    CHECK(rs.cached_tokens == rs.prompt_tokens - 1, "cached %d of %d", rs.cached_tokens, rs.prompt_tokens);
    CHECK(strcmp(sipp_request_text(r), expected[1]) == 0, "reused prefix changed the output");
    sipp_request_free(r);
    sipp_engine_free(engine);
    check_queue_full(m);
    check_context_key(m);
    check_shared_prefix(m);
    check_kv_full(m);
    check_idle_kv_yields(m);
    check_until_full(m);
    check_embed_cancel(m);
    sipp_model_free(m);
    for (int k = 0; k < N_PROMPTS; k++)
        free(expected[k]);
    free(th);
    free(args);
    int f = atomic_load(&failed);
    printf("engine_stress: %d passed, %d failed\n", atomic_load(&passed), f);
    return f ? 1 : 0;
}
