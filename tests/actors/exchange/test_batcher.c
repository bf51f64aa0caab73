/*
 * The one batcher (actors/exchange/batcher.c) of the local learner, the remote hub
 * and rollout-learner: a full batch is due; a partial one when every row
 * is waiting or max-wait has passed (max-wait 0: at once); a batch is whole
 * items in arrival order that passes `batch` by less than one item. The
 * only clock read is to wait until the batcher's own deadline has passed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "actors/exchange/batcher.h"
#include "runtime/clock.h"

/* A max-wait no test outlives: only the rules other than time decide. */
#define FOREVER_NS (UINT64_MAX / 4)

static void items_init(ro_batch_item_t *it, const uint32_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        it[i].next = (ro_batch_item_t *)&it[i]; /* garbage the batcher must overwrite */
        it[i].rows = rows[i];
    }
}

/* check_taken wants the list to be exactly items[first .. first+n). */
static void check_taken(ro_batch_item_t *got, ro_batch_item_t *items, size_t first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(got, &items[first + i]);
        got = got->next;
    }
    assert_null(got);
}

static void test_full_batch(void **state)
{
    (void)state;
    ro_batcher_t b;
    ro__batcher_init(&b, 4, FOREVER_NS);
    ro_batch_item_t it[4];
    items_init(it, (const uint32_t[]){1, 1, 1, 1}, 4);
    for (int i = 0; i < 3; i++) {
        ro__batcher_push(&b, &it[i]);
        assert_false(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));
        assert_false(ro__batcher_due(&b, 10));
    }
    assert_int_equal(b.rows, 3);
    ro__batcher_push(&b, &it[3]);
    assert_true(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));
    uint32_t rows = 0;
    check_taken(ro__batcher_take(&b, &rows), it, 0, 4);
    assert_int_equal(rows, 4);
    assert_int_equal(b.rows, 0);
    assert_false(ro__batcher_due(&b, 0));
}

/* more == 0: nothing else can come, so waiting longer gains nothing. */
static void test_every_row_waiting(void **state)
{
    (void)state;
    ro_batcher_t b;
    ro__batcher_init(&b, 10, FOREVER_NS);
    ro_batch_item_t it[2];
    items_init(it, (const uint32_t[]){2, 3}, 2);
    ro__batcher_push(&b, &it[0]);
    ro__batcher_push(&b, &it[1]);
    assert_false(ro__batcher_due(&b, 5));
    assert_false(ro__batcher_due(&b, 1));
    assert_false(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));
    assert_true(ro__batcher_due(&b, 0));
    uint32_t rows = 0;
    check_taken(ro__batcher_take(&b, &rows), it, 0, 2);
    assert_int_equal(rows, 5);
}

static void test_max_wait_zero(void **state)
{
    (void)state;
    ro_batcher_t b;
    ro__batcher_init(&b, 100, 0);
    assert_false(ro__batcher_due(&b, RO_BATCHER_UNKNOWN)); /* nothing queued */
    ro_batch_item_t it[1];
    items_init(it, (const uint32_t[]){1}, 1);
    ro__batcher_push(&b, &it[0]);
    assert_true(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));
    assert_true(ro__batcher_due(&b, 99));
}

/* A tiny max-wait: due once the clock has passed the deadline the batcher
 * gives for its timer. */
static void test_max_wait_deadline(void **state)
{
    (void)state;
    const uint64_t wait_ns = 1000;
    ro_batcher_t b;
    ro__batcher_init(&b, 100, wait_ns);
    ro_batch_item_t it[3];
    items_init(it, (const uint32_t[]){1, 1, 1}, 3);
    uint64_t before = ro__now_ns();
    ro__batcher_push(&b, &it[0]);
    uint64_t after = ro__now_ns();
    uint64_t deadline = ro__batcher_deadline(&b);
    assert_true(deadline >= before + wait_ns && deadline <= after + wait_ns);
    ro__batcher_push(&b, &it[1]); /* a later item does not move the deadline */
    assert_int_equal(ro__batcher_deadline(&b), deadline);
    while (ro__now_ns() <= deadline) {
    }
    assert_true(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));

    /* What is left after a take starts its wait again. */
    ro__batcher_init(&b, 1, wait_ns);
    ro__batcher_push(&b, &it[0]);
    ro__batcher_push(&b, &it[1]);
    ro__batcher_push(&b, &it[2]);
    before = ro__now_ns();
    uint32_t rows;
    check_taken(ro__batcher_take(&b, &rows), it, 0, 1);
    assert_true(ro__batcher_deadline(&b) >= before + wait_ns);
}

/* Whole items, from the front, until at least `batch` rows. */
static void test_whole_items_in_order(void **state)
{
    (void)state;
    ro_batcher_t b;
    ro_batch_item_t it[4];
    uint32_t rows;

    /* 3 + 3 = 6 rows for a batch of 5: past it by 1, less than an item. */
    ro__batcher_init(&b, 5, FOREVER_NS);
    items_init(it, (const uint32_t[]){3, 3, 3}, 3);
    for (int i = 0; i < 3; i++)
        ro__batcher_push(&b, &it[i]);
    assert_true(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));
    check_taken(ro__batcher_take(&b, &rows), it, 0, 2);
    assert_int_equal(rows, 6);
    assert_int_equal(b.rows, 3);
    assert_false(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));
    check_taken(ro__batcher_take(&b, &rows), it, 2, 1); /* taken anyway: a partial batch */
    assert_int_equal(rows, 3);

    /* An item as big as the batch goes alone. */
    ro__batcher_init(&b, 5, FOREVER_NS);
    items_init(it, (const uint32_t[]){5, 1}, 2);
    ro__batcher_push(&b, &it[0]);
    ro__batcher_push(&b, &it[1]);
    check_taken(ro__batcher_take(&b, &rows), it, 0, 1);
    assert_int_equal(rows, 5);

    /* An item bigger than the batch: a batch of its own. */
    ro__batcher_init(&b, 5, FOREVER_NS);
    items_init(it, (const uint32_t[]){9, 2}, 2);
    ro__batcher_push(&b, &it[0]);
    ro__batcher_push(&b, &it[1]);
    check_taken(ro__batcher_take(&b, &rows), it, 0, 1);
    assert_int_equal(rows, 9);
    check_taken(ro__batcher_take(&b, &rows), it, 1, 1);
    assert_int_equal(rows, 2);

    /* Exactly the batch from small items; the rest stays in order. */
    ro__batcher_init(&b, 4, FOREVER_NS);
    items_init(it, (const uint32_t[]){2, 2, 1, 1}, 4);
    for (int i = 0; i < 4; i++)
        ro__batcher_push(&b, &it[i]);
    check_taken(ro__batcher_take(&b, &rows), it, 0, 2);
    assert_int_equal(rows, 4);
    check_taken(ro__batcher_take(&b, &rows), it, 2, 2);
    assert_int_equal(rows, 2);
    /* Emptied, the queue takes new items from scratch. */
    ro__batcher_push(&b, &it[1]);
    check_taken(ro__batcher_take(&b, &rows), it, 1, 1);
}

static void test_take_all(void **state)
{
    (void)state;
    ro_batcher_t b;
    ro__batcher_init(&b, 2, FOREVER_NS);
    ro_batch_item_t it[4];
    items_init(it, (const uint32_t[]){1, 4, 2, 3}, 4);
    for (int i = 0; i < 4; i++)
        ro__batcher_push(&b, &it[i]);
    uint32_t rows = 0;
    check_taken(ro__batcher_take_all(&b, &rows), it, 0, 4);
    assert_int_equal(rows, 10);
    assert_int_equal(b.rows, 0);
    assert_false(ro__batcher_due(&b, 0));
    /* Reusable at once. */
    ro__batcher_push(&b, &it[2]);
    check_taken(ro__batcher_take_all(&b, &rows), it, 2, 1);
    assert_int_equal(rows, 2);
}

static void test_empty(void **state)
{
    (void)state;
    ro_batcher_t b;
    ro__batcher_init(&b, 0, 0); /* a batch of 0 means 1 */
    assert_int_equal(b.batch, 1);
    assert_false(ro__batcher_due(&b, 0));
    assert_false(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));
    uint32_t rows = 77;
    assert_null(ro__batcher_take(&b, &rows));
    assert_int_equal(rows, 0);
    rows = 77;
    assert_null(ro__batcher_take_all(&b, &rows));
    assert_int_equal(rows, 0);
    ro_batch_item_t it[1];
    items_init(it, (const uint32_t[]){1}, 1);
    ro__batcher_push(&b, &it[0]);
    assert_true(ro__batcher_due(&b, RO_BATCHER_UNKNOWN));
    check_taken(ro__batcher_take(&b, &rows), it, 0, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_batch),
        cmocka_unit_test(test_every_row_waiting),
        cmocka_unit_test(test_max_wait_zero),
        cmocka_unit_test(test_max_wait_deadline),
        cmocka_unit_test(test_whole_items_in_order),
        cmocka_unit_test(test_take_all),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
