#include "runtime/grant_pool.h"

#include <stdio.h>
#include <stdlib.h>

#include "runtime/mutex.h"

void ro__grant_pool_init(ro_grant_pool_t *p)
{
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        abort();
    p->free_head = NULL;
    p->wait_head = NULL;
    p->wait_tail = &p->wait_head;
    p->nfree = p->nwaiting = 0;
}

void ro__grant_pool_destroy(ro_grant_pool_t *p)
{
    pthread_mutex_destroy(&p->mu);
}

ro_pool_item_t *ro__grant_pool_take(ro_grant_pool_t *p, ro_pool_waiter_t *w)
{
    ro__mutex_lock(&p->mu);
    ro_pool_item_t *it = p->free_head;
    if (it) {
        p->free_head = it->next;
        p->nfree--;
        it->next = NULL;
    } else if (w) {
        w->next = NULL;
        w->granted = NULL;
        *p->wait_tail = w;
        p->wait_tail = &w->next;
        p->nwaiting++;
    }
    ro__mutex_unlock(&p->mu);
    return it;
}

ro_pool_item_t *ro__grant_pool_claim(ro_grant_pool_t *p, ro_pool_waiter_t *w)
{
    ro__mutex_lock(&p->mu); /* acquire what the giver wrote into the item before granting it */
    ro_pool_item_t *it = w->granted;
    w->granted = NULL;
    ro__mutex_unlock(&p->mu);
    return it;
}

void ro__grant_pool_give(ro_grant_pool_t *p, ro_pool_item_t *list)
{
    ro_pool_waiter_t *wake = NULL, **wake_tail = &wake;
    ro__mutex_lock(&p->mu);
    while (list) {
        ro_pool_item_t *it = list;
        list = it->next;
        it->next = NULL;
        ro_pool_waiter_t *w = p->wait_head;
        if (w) {
            p->wait_head = w->next;
            if (!p->wait_head)
                p->wait_tail = &p->wait_head;
            p->nwaiting--;
            w->granted = it;
            w->next = NULL;
            *wake_tail = w;
            wake_tail = &w->next;
        } else {
            it->next = p->free_head;
            p->free_head = it;
            p->nfree++;
        }
    }
    ro__mutex_unlock(&p->mu);
    /* Outside the lock: the message may run the waiter at once. */
    while (wake) {
        ro_pool_waiter_t *w = wake;
        wake = w->next;
        ro__actor_send(w->to, w->msg);
    }
}

void ro__grant_pool_counts(ro_grant_pool_t *p, uint32_t *nfree, uint32_t *nwaiting)
{
    ro__mutex_lock(&p->mu);
    *nfree = p->nfree;
    *nwaiting = p->nwaiting;
    ro__mutex_unlock(&p->mu);
}
