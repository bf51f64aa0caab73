/* The logger's metrics ring: order, full -> drop and count, no loss or
 * duplication with concurrent producers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/metrics_ring.h"

static void test_capacity_must_be_power_of_two(void **state)
{
    (void)state;
    ro_metrics_ring_t r;
    assert_int_not_equal(ro__metrics_ring_init(&r, 0), 0);
    assert_int_not_equal(ro__metrics_ring_init(&r, 1), 0);
    assert_int_not_equal(ro__metrics_ring_init(&r, 100), 0);
    assert_int_equal(ro__metrics_ring_init(&r, 128), 0);
    ro__metrics_ring_free(&r);
}

static void test_fifo_full_drops_and_counts(void **state)
{
    (void)state;
    ro_metrics_ring_t r;
    assert_int_equal(ro__metrics_ring_init(&r, 8), 0);
    ro_metric_t m, out;
    memset(&m, 0, sizeof m);
    for (uint32_t i = 0; i < 8; i++) {
        m.env = i;
        assert_true(ro__metrics_ring_push(&r, &m));
    }
    m.env = 99;
    assert_false(ro__metrics_ring_push(&r, &m)); /* full: dropped */
    assert_false(ro__metrics_ring_push(&r, &m));
    assert_int_equal(ro__metrics_ring_dropped(&r), 2);
    for (uint32_t i = 0; i < 8; i++) {
        assert_true(ro__metrics_ring_pop(&r, &out));
        assert_int_equal(out.env, i);
    }
    assert_false(ro__metrics_ring_pop(&r, &out));
    /* Space again after draining; wraps around correctly. */
    for (uint32_t lap = 0; lap < 5; lap++) {
        for (uint32_t i = 0; i < 6; i++) {
            m.env = lap * 10 + i;
            assert_true(ro__metrics_ring_push(&r, &m));
        }
        for (uint32_t i = 0; i < 6; i++) {
            assert_true(ro__metrics_ring_pop(&r, &out));
            assert_int_equal(out.env, lap * 10 + i);
        }
    }
    assert_int_equal(ro__metrics_ring_dropped(&r), 2);
    ro__metrics_ring_free(&r);
}

#define PRODUCERS 4
#define PER_PRODUCER 100000

static atomic_int producers_done;

typedef struct arg {
    ro_metrics_ring_t *r;
    uint32_t id;
    uint64_t pushed; /* accepted by the ring */
} arg_t;

static void *producer(void *p)
{
    arg_t *a = p;
    ro_metric_t m;
    memset(&m, 0, sizeof m);
    m.env = a->id;
    for (uint32_t i = 0; i < PER_PRODUCER; i++) {
        m.episode = i;
        m.value = (double)i * 0.5; /* the consumer checks the record is whole */
        if (ro__metrics_ring_push(a->r, &m))
            a->pushed++;
    }
    /* Release: publishes this producer's pushes to the consumer. */
    atomic_fetch_add_explicit(&producers_done, 1, memory_order_release);
    return NULL;
}

static void test_concurrent_no_loss_no_dup(void **state)
{
    (void)state;
    ro_metrics_ring_t r;
    assert_int_equal(ro__metrics_ring_init(&r, 1024), 0);
    pthread_t th[PRODUCERS];
    arg_t args[PRODUCERS];
    atomic_store(&producers_done, 0); /* before any producer can finish */
    for (uint32_t p = 0; p < PRODUCERS; p++) {
        args[p] = (arg_t){.r = &r, .id = p};
        assert_int_equal(pthread_create(&th[p], NULL, producer, &args[p]), 0);
    }
    int64_t last[PRODUCERS];
    uint64_t got[PRODUCERS] = {0};
    for (int p = 0; p < PRODUCERS; p++)
        last[p] = -1;
    ro_metric_t out;
    for (;;) {
        /* Acquire: a finished producer's pushes are all visible after this. */
        int finished = atomic_load_explicit(&producers_done, memory_order_acquire);
        while (ro__metrics_ring_pop(&r, &out)) {
            assert_true(out.env < PRODUCERS);
            /* Increasing per producer (drops leave gaps, never reorder). */
            assert_true((int64_t)out.episode > last[out.env]);
            assert_true(out.value == (double)out.episode * 0.5);
            last[out.env] = (int64_t)out.episode;
            got[out.env]++;
        }
        if (finished == PRODUCERS)
            break;
        sched_yield(); /* let producers run on a small machine */
    }
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(th[p], NULL);
    while (ro__metrics_ring_pop(&r, &out))
        got[out.env]++;
    uint64_t accepted = 0, received = 0;
    for (int p = 0; p < PRODUCERS; p++) {
        accepted += args[p].pushed;
        received += got[p];
        assert_int_equal(got[p], args[p].pushed);
    }
    assert_int_equal(accepted + ro__metrics_ring_dropped(&r), (uint64_t)PRODUCERS * PER_PRODUCER);
    assert_int_equal(received, accepted);
    ro__metrics_ring_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity_must_be_power_of_two),
        cmocka_unit_test(test_fifo_full_drops_and_counts),
        cmocka_unit_test(test_concurrent_no_loss_no_dup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
