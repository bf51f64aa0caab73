/*
 * An intrusive doubly-linked list, first in first out: an item embeds a
 * ro_ilink_t and is in at most one list through it; the list allocates
 * nothing. Appending, taking the first and removing any item are O(1).
 * The scheduler's run queues (actors) and the gate's waiting connections
 * (wire/gate.h) are such lists.
 *
 * No locking: a list is its owner's (a thread, or whoever holds its lock).
 */
#ifndef RO_ILIST_H
#define RO_ILIST_H

#include <stddef.h>

typedef struct ro_ilink {
    struct ro_ilink *prev, *next; /* NULL at the ends, and out of any list */
} ro_ilink_t;

typedef struct ro_ilist {
    ro_ilink_t *first, *last; /* NULL when empty */
} ro_ilist_t;

/* ro__container_of is the item of type whose member ptr points at (a
 * list's link, a queue's node). */
#define ro__container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ro__ilist_append puts e (in no list) last. */
static inline void ro__ilist_append(ro_ilist_t *l, ro_ilink_t *e)
{
    e->prev = l->last;
    e->next = NULL;
    if (l->last)
        l->last->next = e;
    else
        l->first = e;
    l->last = e;
}

/* ro__ilist_remove takes e (in l) out of l. */
static inline void ro__ilist_remove(ro_ilist_t *l, ro_ilink_t *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        l->first = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        l->last = e->prev;
    e->prev = e->next = NULL;
}

/* ro__ilist_take takes the first item's link out of l: NULL when empty. */
static inline ro_ilink_t *ro__ilist_take(ro_ilist_t *l)
{
    ro_ilink_t *e = l->first;
    if (e)
        ro__ilist_remove(l, e);
    return e;
}

#endif
