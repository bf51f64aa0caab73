#include "runtime/actor.h"

void ro__actor_init(ro_actor_t *a, const char *name, ro_behaviour_fn fn, uint32_t batch,
                    ro_schedule_fn schedule, void *home)
{
    a->behaviour = fn;
    a->name = name;
    a->schedule = schedule;
    a->home = home;
    a->batch = batch ? batch : 1;
    a->runq_next = NULL;
    ro__mpscq_init(&a->mailbox);
    atomic_init(&a->pending, 0);
}

/* A loop actor's home is a uv_async_t: sends coalesce, the callback drains. */
static void schedule_on_loop(ro_actor_t *a)
{
    uv_async_send(a->home);
}

void ro__actor_init_loop(ro_actor_t *a, const char *name, ro_behaviour_fn fn, uv_async_t *async)
{
    ro__actor_init(a, name, fn, 64, schedule_on_loop, async);
}

bool ro__actor_send(ro_actor_t *to, ro_msg_t *msg)
{
    ro__mpscq_push(&to->mailbox, &msg->link);
    /*
     * acq_rel: the release half hands our writes (and, through the RMW chain,
     * the previous holder's writes to the actor) to whoever schedules next;
     * the acquire half makes the thread that sees 0 -> 1 see the previous
     * holder's release of the actor.
     */
    int_fast64_t old = atomic_fetch_add_explicit(&to->pending, 1, memory_order_acq_rel);
    if (old != 0)
        return false; /* already runnable, or the count catches up a handled message */
    to->schedule(to);
    return true;
}

bool ro__actor_run(ro_actor_t *a)
{
    int_fast64_t handled = 0;
    while (handled < (int_fast64_t)a->batch) {
        ro_mpscq_node_t *n = ro__mpscq_pop(&a->mailbox);
        if (n == NULL)
            break; /* empty, or a sender is between its push and its link */
        handled++;
        a->behaviour(a, ro__container_of(n, ro_msg_t, link));
    }
    /*
     * Give up the actor only when every counted message has been handled.
     * A message can be popped before its sender's fetch_add lands; the count
     * then dips to or below zero here, and that late increment brings it back
     * towards zero without scheduling. Any message still queued was counted
     * or will be, so its count makes exactly one 0 -> 1 transition, and that
     * sender schedules the actor again.
     * acq_rel: release our writes to the actor's state to its next holder.
     */
    int_fast64_t old = atomic_fetch_sub_explicit(&a->pending, handled, memory_order_acq_rel);
    return old - handled > 0;
}

void ro__actor_async_cb(uv_async_t *handle)
{
    ro_actor_t *a = handle->data;
    while (ro__actor_run(a)) {
    }
}
