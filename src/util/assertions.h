/*
 * assertions.h: the debug checks of sipp's rules, for every layer (SQLite's
 * `assert( sqlite3_mutex_held(db->mutex) )` is the model).
 *
 * SIPP_ASSERT(cond) states a rule the code relies on: a slot is free, a call is replied to once.
 * SIPP_ASSERT_HELD(mutex) states that the calling thread holds a pthread mutex, where a comment used
 * to say "called with the lock held". Both are compiled in by `make DEBUG=1` (SIPP_DEBUG; the
 * sanitizer builds of make test turn it on) and out of a release build, which pays nothing for them.
 * A failed check aborts with the file, line and condition (assert's report), so a test under a
 * debug build fails where the rule was broken, not later where the damage shows.
 *
 * Which thread holds a mutex: glibc records the owner's thread id in every mutex it locks, the
 * default type included (pthread_mutex_t's __data.__owner, part of its ABI since NPTL), and
 * sipp_mutex_held compares it with the caller's. Elsewhere (the browser build's libc) it can only
 * tell that some thread holds the mutex: a trylock that fails.
 */
#ifndef SIPP_UTIL_ASSERTIONS_H
#define SIPP_UTIL_ASSERTIONS_H

#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

/* Whether the calling thread holds m (elsewhere than glibc: whether some thread does). */
static inline bool sipp_mutex_held(pthread_mutex_t *m) {
#ifdef __GLIBC__
    return m->__data.__owner == gettid();
#else
    if (pthread_mutex_trylock(m) != 0) return true;
    pthread_mutex_unlock(m);
    return false;
#endif
}

#ifdef SIPP_DEBUG
#include <assert.h>
#define SIPP_ASSERT(cond) assert(cond)
#else
#define SIPP_ASSERT(cond) ((void)0)
#endif
#define SIPP_ASSERT_HELD(mutex) SIPP_ASSERT(sipp_mutex_held(mutex))

#endif
