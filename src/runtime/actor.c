#include "runtime/actor.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

void ro__actor_init(ro_actor_t *a, const char *name, ro_behaviour_fn fn, uint32_t batch,
                    ro_schedule_fn schedule, void *home)
{
    a->behaviour = fn;
    a->name = name;
    a->schedule = schedule;
    a->home = home;
    a->batch = batch ? batch : 1;
    a->runq_link = (ro_ilink_t){0};
    ro__mpscq_init(&a->mailbox);
    atomic_init(&a->pending, 0);
}

static void on_idle(uv_idle_t *h)
{
    ro_loop_home_t *home = h->data;
    uv_idle_stop(h);
    while (ro__actor_run(home->actor)) {
    }
}

/* Ring a loop actor's home. Any thread. From the loop thread: its idle
 * handle, run on the loop's next turn. From another: the eventfd (EAGAIN
 * means the counter is saturated: the loop is due to wake anyway). */
static void schedule_on_loop(ro_actor_t *a)
{
    ro_loop_home_t *home = a->home;
    if (pthread_equal(pthread_self(), home->thread)) {
        uv_idle_start(&home->idle, on_idle);
        return;
    }
    uint64_t one = 1;
    while (write(home->fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

static void on_ring(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    ro_loop_home_t *home = p->data;
    uint64_t rings;
    /* Reset first: a ring after this read wakes the loop again. EAGAIN: a
     * spurious wake-up, nothing to reset. */
    (void)!read(home->fd, &rings, sizeof rings);
    while (ro__actor_run(home->actor)) {
    }
}

static void on_home_closed(uv_handle_t *h)
{
    ro_loop_home_t *home = h->data;
    if (--home->open_handles > 0)
        return;
    close(home->fd);
    home->fd = -1;
}

int ro__actor_init_loop(ro_actor_t *a, const char *name, ro_behaviour_fn fn, uv_loop_t *loop,
                        ro_loop_home_t *home)
{
    home->actor = a;
    home->thread = pthread_self();
    home->open_handles = 0;
    home->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (home->fd < 0)
        return -errno;
    int rc = uv_poll_init(loop, &home->poll, home->fd);
    if (rc) {
        close(home->fd);
        home->fd = -1;
        return rc;
    }
    home->poll.data = home;
    home->open_handles = 1;
    uv_idle_init(loop, &home->idle); /* cannot fail */
    home->idle.data = home;
    home->open_handles = 2;
    if ((rc = uv_poll_start(&home->poll, UV_READABLE, on_ring)) != 0) {
        ro__actor_close_loop(home);
        return rc;
    }
    ro__actor_init(a, name, fn, 64, schedule_on_loop, home);
    return 0;
}

void ro__actor_close_loop(ro_loop_home_t *home)
{
    if (home->fd < 0 || uv_is_closing((uv_handle_t *)&home->poll))
        return;
    uv_close((uv_handle_t *)&home->poll, on_home_closed);
    uv_close((uv_handle_t *)&home->idle, on_home_closed);
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
