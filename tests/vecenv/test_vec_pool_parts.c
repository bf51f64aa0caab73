/* Unit tests of src/vecenv/vec_pool.c's jobs in parts
 * (ro__vec_pool_run_parts): every part of every item runs exactly once, in
 * order, whatever the threads (the per-item counters are plain memory, so
 * under TSan the pool's hand-over from one part's thread to the next is
 * checked too); a job larger than the reserve runs whole items; a thread
 * whose range is done runs the parts of an item another thread has started
 * and is not running. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "runtime/error.h"
#include "vecenv/vec_pool.h"

#define ITEMS 300

typedef struct chain {
    uint32_t parts[ITEMS]; /* each item's parts this job */
    uint32_t next[ITEMS];  /* the part each item expects next: plain, the pool orders it */
    uint32_t out_of_order; /* parts that came out of order (written under the item's turn) */
} chain_t;

static bool chain_fn(void *ctx, uint32_t i, uint32_t part)
{
    chain_t *c = ctx;
    if (part != c->next[i])
        c->out_of_order++; /* racy only if the pool ran two parts of i at once */
    c->next[i] = part + 1;
    return part + 1 < c->parts[i];
}

static void count_fn(void *ctx, uint32_t b, uint32_t e)
{
    /* Relaxed: the pool's done orders the total before the owner reads it. */
    atomic_fetch_add_explicit((_Atomic uint32_t *)ctx, e - b, memory_order_relaxed);
}

/* run_chains runs `rounds` jobs of many sizes, items of 1 to 6 parts, and
 * checks each item ran each of its parts once, in order. */
static void run_chains(ro_vec_pool_t *p, chain_t *c, uint32_t rounds, uint32_t max_n)
{
    for (uint32_t r = 1; r <= rounds; r++) {
        const uint32_t n = 1 + (r * 37) % max_n;
        for (uint32_t i = 0; i < n; i++) {
            c->parts[i] = 1 + (i * 7 + r) % 6;
            c->next[i] = 0;
        }
        c->out_of_order = 0;
        ro__vec_pool_run_parts(p, chain_fn, c, n);
        assert_int_equal(c->out_of_order, 0);
        for (uint32_t i = 0; i < n; i++)
            assert_int_equal(c->next[i], c->parts[i]);
    }
}

static void every_part_once_in_order(void **state)
{
    (void)state;
    static chain_t c;
    for (uint32_t helpers = 0; helpers <= 3; helpers++) {
        ro_vec_pool_t p;
        char err[128];
        assert_int_equal(ro__vec_pool_start(&p, helpers, err, sizeof err), 0);
        assert_int_equal(ro__vec_pool_reserve_parts(&p, ITEMS, err, sizeof err), 0);
        assert_int_equal(p.items_cap, ITEMS);
        run_chains(&p, &c, 300, ITEMS);
        /* Chunk jobs and jobs in parts in turns: one pool, both kinds. */
        for (uint32_t r = 0; r < 20; r++) {
            static _Atomic uint32_t hits;
            atomic_store_explicit(&hits, 0, memory_order_relaxed);
            ro__vec_pool_run(&p, count_fn, &hits, ITEMS);
            assert_int_equal(atomic_load_explicit(&hits, memory_order_relaxed), ITEMS);
            run_chains(&p, &c, 1 + r % 3, ITEMS);
        }
        ro__vec_pool_stop(&p);
    }
}

/* A job over more items than the reserve holds runs each item's parts in a
 * row, on the owner: still once each, in order. The reserve is made once,
 * and capped at RO_VEC_POOL_MAX_ITEMS. */
static void beyond_the_reserve(void **state)
{
    (void)state;
    static chain_t c;
    ro_vec_pool_t p;
    char err[128];
    assert_int_equal(ro__vec_pool_start(&p, 2, err, sizeof err), 0);
    assert_int_equal(ro__vec_pool_reserve_parts(&p, 50, err, sizeof err), 0);
    run_chains(&p, &c, 40, ITEMS);
    /* Once: a second reserve is refused by name and changes nothing. */
    assert_int_equal(ro__vec_pool_reserve_parts(&p, ITEMS, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "already reserved"));
    assert_int_equal(p.items_cap, 50);
    run_chains(&p, &c, 40, ITEMS);
    ro__vec_pool_stop(&p);
    /* Past the most, the reserve is capped. */
    assert_int_equal(ro__vec_pool_start(&p, 1, err, sizeof err), 0);
    assert_int_equal(ro__vec_pool_reserve_parts(&p, RO_VEC_POOL_MAX_ITEMS + 9, err, sizeof err), 0);
    assert_int_equal(p.items_cap, RO_VEC_POOL_MAX_ITEMS);
    run_chains(&p, &c, 20, ITEMS);
    ro__vec_pool_stop(&p);
}

/* Four items of 3 parts, one helper: the owner's home is items 0 and 1,
 * the helper's 2 and 3. */
typedef struct steal {
    pthread_t owner;
    _Atomic int helper_holds_2; /* the helper is inside item 2's first part */
    _Atomic int owner_ran_3;    /* the owner has run a part of item 3 */
    _Atomic int timed_out;
} steal_t;

/* wait_flag waits for *f (a hang guard of 60 s: then timed_out). */
static void wait_flag(steal_t *s, _Atomic int *f)
{
    const time_t t0 = time(NULL);
    /* Relaxed: flags to wait on; the pool's done orders the rest. */
    while (!atomic_load_explicit(f, memory_order_relaxed)) {
        if (time(NULL) - t0 > 60) {
            atomic_store_explicit(&s->timed_out, 1, memory_order_relaxed);
            return;
        }
        sched_yield();
    }
}

static bool steal_fn(void *ctx, uint32_t i, uint32_t part)
{
    steal_t *s = ctx;
    const bool owner = pthread_equal(pthread_self(), s->owner);
    if (owner && i == 3)
        atomic_store_explicit(&s->owner_ran_3, 1, memory_order_relaxed);
    if (owner && i == 0 && part == 0) /* until the helper has both its items */
        wait_flag(s, &s->helper_holds_2);
    if (!owner && i == 2 && part == 0) {
        atomic_store_explicit(&s->helper_holds_2, 1, memory_order_relaxed);
        wait_flag(s, &s->owner_ran_3);
    }
    return part + 1 < 3;
}

/* The helper takes items 2 and 3 into its window before it runs a part,
 * then holds item 2's first part until the owner has run a part of item 3,
 * which only a thread that takes a started (taken) item from another can
 * do: the owner, once its own items are done. Ten times. */
static void idle_thread_runs_others_items(void **state)
{
    (void)state;
    ro_vec_pool_t p;
    char err[128];
    assert_int_equal(ro__vec_pool_start(&p, 1, err, sizeof err), 0);
    assert_int_equal(ro__vec_pool_reserve_parts(&p, 4, err, sizeof err), 0);
    static steal_t s;
    for (int r = 0; r < 10; r++) {
        memset(&s, 0, sizeof s);
        s.owner = pthread_self();
        ro__vec_pool_run_parts(&p, steal_fn, &s, 4);
        if (atomic_load_explicit(&s.timed_out, memory_order_relaxed))
            fail_msg("round %d: the owner never ran a part of the helper's item 3 while the "
                     "helper held item 2 (60 s)",
                     r);
        assert_true(atomic_load_explicit(&s.owner_ran_3, memory_order_relaxed));
    }
    ro__vec_pool_stop(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_part_once_in_order),
        cmocka_unit_test(beyond_the_reserve),
        cmocka_unit_test(idle_thread_runs_others_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
