/* Unit tests of src/vecenv/vec_pool.c: every index of every job runs
 * exactly once, on the owner and the helpers, through run() and through
 * post() and wait() apart; each thread starts on its home range and takes
 * what a busy thread's range has left; a stop joins every helper; the
 * chunk rule (RO_VEC_POOL_CHUNKS per thread, one costly item a chunk, never
 * more chunks than a range word holds) and the pool's jobs following it. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

/* The rule: RO_VEC_POOL_CHUNKS chunks per thread while an item's cost is
 * unknown or small; chunks worth RO_VEC_POOL_CHUNK_NS of costly items (one
 * item each past that cost); never more than RO_VEC_POOL_MAX_CHUNKS. */
static void chunk_rule(void **state)
{
    (void)state;
    /* Unknown cost: n / (threads x 8), rounded up. */
    assert_int_equal(ro__vec_pool_chunk(8, 2, 0), 1);
    assert_int_equal(ro__vec_pool_chunk(64, 2, 0), 4);
    assert_int_equal(ro__vec_pool_chunk(1024, 2, 0), 64);
    assert_int_equal(ro__vec_pool_chunk(1000, 3, 0), 42);
    assert_int_equal(ro__vec_pool_chunk(1, 2, 0), 1);
    /* Cheap items (a CartPole's tens of ns): the same chunks. */
    assert_int_equal(ro__vec_pool_chunk(1024, 2, 30.0), 64);
    assert_int_equal(ro__vec_pool_chunk(64, 2, 30.0), 4);
    /* Items worth a chunk's least work or more (a MuJoCo step, 20-50 us):
     * one each, whatever n. */
    for (uint32_t n = 1; n <= 4096; n *= 2) {
        assert_int_equal(ro__vec_pool_chunk(n, 2, RO_VEC_POOL_CHUNK_NS), 1);
        assert_int_equal(ro__vec_pool_chunk(n, 2, 40000.0), 1);
    }
    /* In between: as many items as RO_VEC_POOL_CHUNK_NS pays for. */
    assert_int_equal(ro__vec_pool_chunk(1024, 2, RO_VEC_POOL_CHUNK_NS / 10), 10);
    assert_int_equal(ro__vec_pool_chunk(64, 2, RO_VEC_POOL_CHUNK_NS / 10), 4);
    /* Never more chunks than a range word holds, nor an empty chunk. */
    const uint32_t big = 1u << 20;
    for (uint32_t threads = 1; threads <= RO_VEC_POOL_MAX + 1; threads += 64) {
        for (double ns = 0; ns <= 1e6; ns = ns ? ns * 10 : 1) {
            const uint32_t c = ro__vec_pool_chunk(big, threads, ns);
            assert_true(c >= 1);
            assert_true((big + c - 1) / c <= RO_VEC_POOL_MAX_CHUNKS);
        }
    }
    assert_int_equal(ro__vec_pool_chunk(big, 2, 1e6),
                     (big + RO_VEC_POOL_MAX_CHUNKS - 1) / RO_VEC_POOL_MAX_CHUNKS);
}

typedef struct sized {
    _Atomic uint32_t *hits;
    _Atomic uint32_t widest, calls;
} sized_t;

static void mark_sized(void *ctx, uint32_t b, uint32_t e)
{
    sized_t *s = ctx;
    /* Relaxed: counts the pool's done publishes to the owner. */
    for (uint32_t i = b; i < e; i++)
        atomic_fetch_add_explicit(&s->hits[i], 1, memory_order_relaxed);
    uint32_t w = atomic_load_explicit(&s->widest, memory_order_relaxed);
    while (e - b > w && !atomic_compare_exchange_weak_explicit(
                            &s->widest, &w, e - b, memory_order_relaxed, memory_order_relaxed))
        ;
    atomic_fetch_add_explicit(&s->calls, 1, memory_order_relaxed);
}

/* run_sized runs one job over n on p and checks every index ran once; the
 * widest chunk the job's function saw is returned, its calls in *calls. */
static uint32_t run_sized(ro_vec_pool_t *p, uint32_t n, uint32_t *calls)
{
    sized_t s = {.hits = calloc(n, sizeof *s.hits)};
    assert_non_null(s.hits);
    ro__vec_pool_run(p, mark_sized, &s, n);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(atomic_load_explicit(&s.hits[i], memory_order_relaxed), 1);
    free(s.hits);
    *calls = atomic_load_explicit(&s.calls, memory_order_relaxed);
    return atomic_load_explicit(&s.widest, memory_order_relaxed);
}

/* A pool told its items are costly runs them one to a chunk; told nothing,
 * in RO_VEC_POOL_CHUNKS chunks per thread; and a job of more items than a
 * range word has chunk indices still runs each once. */
static void pool_follows_the_chunk_rule(void **state)
{
    (void)state;
    ro_vec_pool_t p;
    char err[128];
    assert_int_equal(ro__vec_pool_start(&p, 1, err, sizeof err), 0);
    uint32_t calls;
    assert_int_equal(run_sized(&p, 64, &calls), 4); /* cost unknown: 64 / (2 x 8) */
    assert_int_equal(calls, 16);
    ro__vec_pool_set_cost(&p, 40000.0); /* a MuJoCo step */
    for (int r = 0; r < 20; r++) {
        assert_int_equal(run_sized(&p, 64, &calls), 1);
        assert_int_equal(calls, 64);
        assert_int_equal(run_sized(&p, 8, &calls), 1);
        assert_int_equal(calls, 8);
    }
    const uint32_t big = 3 * RO_VEC_POOL_MAX_CHUNKS + 5; /* 4 items a chunk */
    assert_int_equal(run_sized(&p, big, &calls), 4);
    assert_int_equal(calls, (big + 3) / 4);
    ro__vec_pool_set_cost(&p, 0); /* unknown again */
    assert_int_equal(run_sized(&p, 64, &calls), 4);
    ro__vec_pool_stop(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_marks_every_index_once),  cmocka_unit_test(post_then_wait),
        cmocka_unit_test(homes_first_then_leftovers),  cmocka_unit_test(chunk_rule),
        cmocka_unit_test(pool_follows_the_chunk_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
