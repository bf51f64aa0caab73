/*
 * The intrusive list (src/runtime/ilist.h): first in, first out; an item
 * taken out from the front, the back or the middle leaves the others
 * linked in order and itself unlinked; an emptied list is empty at both
 * ends; ro__container_of finds the item of a link.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runtime/ilist.h"

typedef struct item {
    int value;
    ro_ilink_t link; /* not first: container_of must subtract */
} item_t;

/* expect checks l holds want[0..n) in order, both ways. */
static void expect(const ro_ilist_t *l, item_t *items, const int *want, int n)
{
    int k = 0;
    for (ro_ilink_t *e = l->first; e; e = e->next, k++) {
        assert_true(k < n);
        assert_int_equal(ro__container_of(e, item_t, link)->value, want[k]);
        assert_ptr_equal(e->prev, k ? &items[want[k - 1]].link : NULL);
    }
    assert_int_equal(k, n);
    assert_ptr_equal(l->last, n ? &items[want[n - 1]].link : NULL);
}

static void test_fifo_and_removal(void **state)
{
    (void)state;
    item_t items[5];
    ro_ilist_t l = {0};
    for (int i = 0; i < 5; i++) {
        items[i].value = i;
        ro__ilist_append(&l, &items[i].link);
    }
    expect(&l, items, (const int[]){0, 1, 2, 3, 4}, 5);
    ro__ilist_remove(&l, &items[2].link); /* the middle */
    assert_null(items[2].link.prev);
    assert_null(items[2].link.next);
    expect(&l, items, (const int[]){0, 1, 3, 4}, 4);
    ro__ilist_remove(&l, &items[4].link); /* the back */
    expect(&l, items, (const int[]){0, 1, 3}, 3);
    assert_ptr_equal(ro__ilist_take(&l), &items[0].link); /* the front */
    expect(&l, items, (const int[]){1, 3}, 2);
    ro__ilist_append(&l, &items[2].link); /* a removed item goes back in */
    expect(&l, items, (const int[]){1, 3, 2}, 3);
    assert_ptr_equal(ro__ilist_take(&l), &items[1].link);
    assert_ptr_equal(ro__ilist_take(&l), &items[3].link);
    assert_ptr_equal(ro__ilist_take(&l), &items[2].link);
    assert_null(ro__ilist_take(&l));
    assert_null(l.first);
    assert_null(l.last);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_and_removal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
