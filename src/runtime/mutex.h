/*
 * Locking a mutex where a failure is a programmer error (a mutex not
 * initialised, already destroyed, or unlocked by a thread that does not
 * hold it): it aborts, there is nothing to recover (STYLE.md). Any thread.
 */
#ifndef RO_MUTEX_H
#define RO_MUTEX_H

#include <pthread.h>
#include <stdlib.h>

/* ro__mutex_lock locks mu, or aborts. */
static inline void ro__mutex_lock(pthread_mutex_t *mu)
{
    if (pthread_mutex_lock(mu) != 0)
        abort();
}

/* ro__mutex_unlock unlocks mu, or aborts. */
static inline void ro__mutex_unlock(pthread_mutex_t *mu)
{
    if (pthread_mutex_unlock(mu) != 0)
        abort();
}

#endif
