/*
 * test_assertions.c: the shared debug checks (src/util/assertions.h). sipp_mutex_held tells the
 * thread that holds a mutex from one that does not, also across a condition wait (which lets the
 * mutex go and takes it back), and SIPP_ASSERT and SIPP_ASSERT_HELD abort a debug build when their
 * rule is broken. This file is a debug build whatever make's DEBUG says.
 */
#ifndef SIPP_DEBUG
#define SIPP_DEBUG 1
#endif
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "util/assertions.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t holding_now = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER; /* waited on, never signalled */
static bool holding, release;

/* Another thread: takes mu, says so, and keeps it until told to let go. */
static void *hold_mu(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    pthread_mutex_lock(&holding_now);
    holding = true;
    pthread_cond_broadcast(&changed);
    while (!release)
        pthread_cond_wait(&changed, &holding_now);
    pthread_mutex_unlock(&holding_now);
    pthread_mutex_unlock(&mu);
    return NULL;
}

Test(assertions, the_holder_is_the_calling_thread) {
    cr_assert_not(sipp_mutex_held(&mu));
    pthread_mutex_lock(&mu);
    cr_assert(sipp_mutex_held(&mu));
    SIPP_ASSERT_HELD(&mu);
    pthread_mutex_unlock(&mu);
    cr_assert_not(sipp_mutex_held(&mu));
}

Test(assertions, a_condition_wait_gives_the_mutex_back_and_takes_it_again) {
    pthread_mutex_lock(&mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 1000 * 1000;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&never, &mu, &until);
    cr_assert(sipp_mutex_held(&mu));
    pthread_mutex_unlock(&mu);
}

#ifdef __GLIBC__
Test(assertions, another_threads_hold_is_not_ours) {
    pthread_t t;
    holding = release = false;
    cr_assert_eq(pthread_create(&t, NULL, hold_mu, NULL), 0);
    pthread_mutex_lock(&holding_now);
    while (!holding)
        pthread_cond_wait(&changed, &holding_now);
    cr_assert_not(sipp_mutex_held(&mu), "mu is held, by the other thread");
    release = true;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&holding_now);
    pthread_join(t, NULL);
}
#endif

Test(assertions, a_broken_rule_aborts, .signal = SIGABRT) {
    int replies = 2;
    SIPP_ASSERT(replies == 1);
}

Test(assertions, a_mutex_not_held_aborts, .signal = SIGABRT) { SIPP_ASSERT_HELD(&mu); }
