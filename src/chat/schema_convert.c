/*
 * schema_convert.c: a schema's conversion to a grammar, bounded in time and off the caller's thread.
 *
 * json_schema_to_grammar cannot be interrupted, and the caller is usually a gateway connection
 * thread: a small stack and a client waiting. So each conversion runs on a worker thread of its own
 * with a generous stack, and the caller waits on a condition variable until the request's deadline
 * (one budget for all the schemas of a request). If the deadline passes first, the caller returns
 * a refusal that names the budget, and marks the job abandoned; the worker, when it finishes,
 * frees the job and what it made. The worker cannot be stopped, so the limits checked before
 * (util/schema_limits.c: properties per object, depth, bytes) are what bound its work: the budget
 * turns a slow conversion into a prompt answer, the limits keep the work behind it finite.
 *
 * The job is shared by two threads; whichever of them is last (done and abandoned, or done and
 * collected) frees it, decided under its mutex.
 */
#include "chat/schema_convert.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_bridge.h"
#include "util/util.h"

#define CONVERT_STACK_BYTES ((size_t)64 << 20) /* the converter recurses per nesting level */

typedef struct convert_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, abandoned;
    char *schema;
    char *grammar;
    sipp_status st;
    char err[SIPP_ERROR_SIZE];
} convert_job;

static void job_free(convert_job *j) {
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->schema);
    free(j->grammar);
    free(j);
}

static void *convert_main(void *arg) {
    convert_job *j = arg;
    char *grammar = NULL;
    char err[SIPP_ERROR_SIZE] = "";
    sipp_status st = chat_schema_to_grammar(j->schema, &grammar, err);
    pthread_mutex_lock(&j->mu);
    j->st = st;
    j->grammar = grammar;
    memcpy(j->err, err, sizeof err);
    j->done = true;
    bool abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) job_free(j);
    return NULL;
}

sipp_status chat_schema_convert_until(const char *schema_json, const char *field, double deadline_ms,
                                      int budget_ms, char **grammar, char *err) {
    *grammar = NULL;
    convert_job *j = calloc(1, sizeof *j);
    if (!j || !(j->schema = strdup(schema_json))) {
        free(j);
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setstacksize(&ta, CONVERT_STACK_BYTES);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int rc = pthread_create(&th, &ta, convert_main, j);
    pthread_attr_destroy(&ta);
    if (rc != 0) {
        job_free(j);
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "'%s': cannot start a thread to convert the schema", field);
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        int left = (int)(deadline_ms - sipp_now_ms());
        if (left <= 0) break;
        struct timespec ts;
        sipp_deadline_in(&ts, CLOCK_MONOTONIC, left);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    if (!j->done) {
        j->abandoned = true; /* the worker frees the job */
        pthread_mutex_unlock(&j->mu);
        return sipp_fail(err, SIPP_ERR_TIMEOUT,
                         "'%s': converting the request's schemas to a grammar took over %d ms ([limits] "
                         "schema_convert_ms); simplify the schema (fewer optional properties per object) or "
                         "raise the limit in the gateway's config",
                         field, budget_ms);
    }
    pthread_mutex_unlock(&j->mu);
    sipp_status st = j->st;
    if (st == SIPP_OK) {
        *grammar = j->grammar;
        j->grammar = NULL;
    } else {
        sipp_strlcpy(err, j->err, SIPP_ERROR_SIZE);
    }
    job_free(j);
    return st;
}
