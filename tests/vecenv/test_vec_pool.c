/* Unit tests of src/vecenv/vec_pool.c: every index of every job runs
 * exactly once, on the owner and the helpers, through run() and through
 * post() and wait() apart; each thread starts on its home range and takes
 * what a busy thread's range has left; a stop joins every helper. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "vecenv/vec_pool.h"

#define N 1000

typedef struct job {
    _Atomic uint32_t hits[N];
    uint32_t round;
} job_t;

static void mark(void *ctx, uint32_t b, uint32_t e)
{
    job_t *j = ctx;
    for (uint32_t i = b; i < e; i++)
        /* Relaxed: the pool's own ordering publishes the counts to the
         * owner (what the test checks). */
        atomic_fetch_add_explicit(&j->hits[i], 1, memory_order_relaxed);
}

static void check_once_each(job_t *j, uint32_t n, uint32_t times)
{
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(atomic_load_explicit(&j->hits[i], memory_order_relaxed), times);
}

static void run_marks_every_index_once(void **state)
{
    (void)state;
    for (uint32_t helpers = 0; helpers <= 3; helpers++) {
        ro_vec_pool_t p;
        char err[128];
        assert_int_equal(ro__vec_pool_start(&p, helpers, err, sizeof err), 0);
        static job_t j;
        memset(&j, 0, sizeof j);
        for (uint32_t r = 1; r <= 300; r++) {
            uint32_t n = 1 + (r * 37) % N; /* jobs of many sizes, 1 included */
            ro__vec_pool_run(&p, mark, &j, n);
            for (uint32_t i = 0; i < n; i++)
                atomic_fetch_sub_explicit(&j.hits[i], 1, memory_order_relaxed);
            check_once_each(&j, N, 0);
        }
        ro__vec_pool_stop(&p);
    }
}

static void post_then_wait(void **state)
{
    (void)state;
    ro_vec_pool_t p;
    char err[128];
    assert_int_equal(ro__vec_pool_start(&p, 2, err, sizeof err), 0);
    static job_t j;
    memset(&j, 0, sizeof j);
    for (uint32_t r = 1; r <= 200; r++) {
        ro__vec_pool_post(&p, mark, &j, N);
        ro__vec_pool_wait(&p);
        assert_false(ro__vec_pool_busy(&p));
        check_once_each(&j, N, r);
    }
    /* A post after a post waits for the first: still once each. */
    ro__vec_pool_post(&p, mark, &j, N);
    ro__vec_pool_post(&p, mark, &j, N);
    ro__vec_pool_wait(&p);
    check_once_each(&j, N, 202);
    ro__vec_pool_wait(&p); /* nothing open: returns at once */
    ro__vec_pool_stop(&p);
    ro__vec_pool_stop(&p); /* a stopped (zeroed) pool: fine */
}

/* One job of 2 threads x RO_VEC_POOL_CHUNKS indices (a chunk each): the
 * owner's home is the first half, the helper's the second. */
#define HALF RO_VEC_POOL_CHUNKS
typedef struct homes {
    pthread_t owner;
    _Atomic int runner[2 * HALF]; /* 1 owner, 2 helper, 0 not run */
    _Atomic bool timed_out;
} homes_t;

/* wait_until waits for index i to have begun (a hang guard of 60 s: then
 * timed_out, which the test reports). */
static void wait_until(homes_t *h, uint32_t i)
{
    const time_t t0 = time(NULL);
    /* Relaxed: a flag to wait on; the pool's done orders the rest. */
    while (!atomic_load_explicit(&h->runner[i], memory_order_relaxed)) {
        if (time(NULL) - t0 > 60) {
            atomic_store_explicit(&h->timed_out, true, memory_order_relaxed);
            return;
        }
        sched_yield();
    }
}

static void homes_fn(void *ctx, uint32_t b, uint32_t e)
{
    homes_t *h = ctx;
    const bool owner = pthread_equal(pthread_self(), h->owner);
    for (uint32_t i = b; i < e; i++) {
        /* Relaxed: read back by this test after the job (the pool orders). */
        atomic_store_explicit(&h->runner[i], owner ? 1 : 2, memory_order_relaxed);
        if (i == 0 && owner) /* the owner holds its first chunk until the helper begins */
            wait_until(h, HALF);
        if (i == HALF && !owner) /* the helper holds its first until the rest of its range ran */
            for (uint32_t k = HALF + 1; k < 2 * HALF; k++)
                wait_until(h, k);
    }
}

/* The owner begins on index 0 and cannot go on until index HALF has begun,
 * which only the helper can begin, from its home; the helper then holds
 * HALF until the rest of its range has run, which only the owner can do,
 * after its own range: a helper starts at home, and the owner takes what a
 * busy helper's range has left. Whatever the scheduling, so ten times. */
static void homes_first_then_leftovers(void **state)
{
    (void)state;
    ro_vec_pool_t p;
    char err[128];
    assert_int_equal(ro__vec_pool_start(&p, 1, err, sizeof err), 0);
    static homes_t h;
    for (int r = 0; r < 10; r++) {
        memset(&h, 0, sizeof h);
        h.owner = pthread_self();
        ro__vec_pool_run(&p, homes_fn, &h, 2 * HALF);
        if (atomic_load_explicit(&h.timed_out, memory_order_relaxed))
            fail_msg("round %d: an index the other thread had to run never ran (60 s)", r);
        for (uint32_t i = 0; i < 2 * HALF; i++)
            assert_int_equal(atomic_load_explicit(&h.runner[i], memory_order_relaxed),
                             i == HALF ? 2 : 1);
    }
    ro__vec_pool_stop(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_marks_every_index_once),
        cmocka_unit_test(post_then_wait),
        cmocka_unit_test(homes_first_then_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
