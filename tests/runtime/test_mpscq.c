/* The intrusive MPSC queue: FIFO, detachment, and no loss under contention. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "runtime/actor.h"
#include "runtime/mpscq.h"

typedef struct item {
    ro_mpscq_node_t link;
    uint32_t producer;
    uint32_t seq;
} item_t;

static item_t *pop_item(ro_mpscq_t *q)
{
    ro_mpscq_node_t *n = ro__mpscq_pop(q);
    return n ? ro__container_of(n, item_t, link) : NULL;
}

static void test_empty(void **state)
{
    (void)state;
    ro_mpscq_t q;
    ro__mpscq_init(&q);
    assert_null(ro__mpscq_pop(&q));
    assert_null(ro__mpscq_pop(&q));
}

static void test_fifo_single_producer(void **state)
{
    (void)state;
    ro_mpscq_t q;
    ro__mpscq_init(&q);
    item_t items[100];
    for (uint32_t i = 0; i < 100; i++) {
        items[i].seq = i;
        ro__mpscq_push(&q, &items[i].link);
    }
    for (uint32_t i = 0; i < 100; i++) {
        item_t *it = pop_item(&q);
        assert_non_null(it);
        assert_int_equal(it->seq, i);
    }
    assert_null(ro__mpscq_pop(&q));
}

/* A popped node is detached: it can be pushed again at once, alone or with
 * others, including the very last node of the queue. */
static void test_reuse_after_pop(void **state)
{
    (void)state;
    ro_mpscq_t q;
    ro__mpscq_init(&q);
    item_t a = {.seq = 1}, b = {.seq = 2};
    for (int round = 0; round < 1000; round++) {
        ro__mpscq_push(&q, &a.link);
        item_t *x = pop_item(&q);
        assert_ptr_equal(x, &a);
        assert_null(ro__mpscq_pop(&q));
        ro__mpscq_push(&q, &a.link);
        ro__mpscq_push(&q, &b.link);
        assert_ptr_equal(pop_item(&q), &a);
        ro__mpscq_push(&q, &a.link); /* a again while b is still queued */
        assert_ptr_equal(pop_item(&q), &b);
        assert_ptr_equal(pop_item(&q), &a);
        assert_null(ro__mpscq_pop(&q));
    }
}

#define PRODUCERS 4
#define PER_PRODUCER 200000

typedef struct prod_arg {
    ro_mpscq_t *q;
    item_t *items;
    uint32_t id;
} prod_arg_t;

static void *producer(void *p)
{
    prod_arg_t *a = p;
    for (uint32_t i = 0; i < PER_PRODUCER; i++) {
        a->items[i].producer = a->id;
        a->items[i].seq = i;
        ro__mpscq_push(a->q, &a->items[i].link);
    }
    return NULL;
}

static void test_multi_producer_order_and_no_loss(void **state)
{
    (void)state;
    ro_mpscq_t q;
    ro__mpscq_init(&q);
    pthread_t th[PRODUCERS];
    prod_arg_t args[PRODUCERS];
    for (uint32_t p = 0; p < PRODUCERS; p++) {
        args[p].q = &q;
        args[p].id = p;
        args[p].items = calloc(PER_PRODUCER, sizeof(item_t));
        assert_non_null(args[p].items);
        assert_int_equal(pthread_create(&th[p], NULL, producer, &args[p]), 0);
    }
    uint32_t next[PRODUCERS] = {0};
    uint64_t got = 0;
    while (got < (uint64_t)PRODUCERS * PER_PRODUCER) {
        item_t *it = pop_item(&q);
        if (!it) {
            sched_yield(); /* producers still pushing, or a link in flight */
            continue;
        }
        assert_true(it->producer < PRODUCERS);
        /* Per-producer FIFO: exactly the next sequence number. */
        assert_int_equal(it->seq, next[it->producer]);
        next[it->producer]++;
        got++;
    }
    for (uint32_t p = 0; p < PRODUCERS; p++) {
        pthread_join(th[p], NULL);
        assert_int_equal(next[p], PER_PRODUCER);
        free(args[p].items);
    }
    assert_null(ro__mpscq_pop(&q));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_fifo_single_producer),
        cmocka_unit_test(test_reuse_after_pop),
        cmocka_unit_test(test_multi_producer_order_and_no_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
