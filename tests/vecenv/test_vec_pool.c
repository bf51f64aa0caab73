/* Unit tests of src/vecenv/vec_pool.c: every index of every job runs
 * exactly once, on the owner and the helpers, through run() and through
 * post() and wait() apart; a stop joins every helper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_marks_every_index_once),
        cmocka_unit_test(post_then_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
