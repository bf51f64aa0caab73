#include "runtime/loop_spin.h"

#include "runtime/clock.h"

#define MISS_STREAK 8u   /* spins in a row that run out: the answers are not coming soon */
#define QUIET_WAITS 256u /* waits then left without spinning before trying again */

static void stop(ro_loop_spin_t *s)
{
    if (s->spinning)
        uv_idle_stop(&s->idle);
    s->spinning = false;
}

/* Once per turn of the loop while spinning: the loop polls instead of
 * sleeping for as long as this handle is active. */
static void on_idle(uv_idle_t *h)
{
    ro_loop_spin_t *s = h->data;
    if (ro__now_ns() - s->armed_ns < s->cap_ns)
        return;
    stop(s);
    s->misses++;
    if (++s->streak >= MISS_STREAK) {
        s->streak = 0;
        s->quiet = QUIET_WAITS;
    }
}

void ro__loop_spin_init(ro_loop_spin_t *s, uv_loop_t *loop, uint32_t cap_us)
{
    uv_idle_init(loop, &s->idle); /* cannot fail */
    s->idle.data = s;
    s->cap_ns = (uint64_t)cap_us * 1000u;
    s->armed_ns = 0;
    s->spinning = false;
    s->streak = s->quiet = 0;
    s->hits = s->misses = 0;
}

void ro__loop_spin_arm(ro_loop_spin_t *s)
{
    if (s->cap_ns == 0 || s->armed_ns)
        return;
    s->armed_ns = ro__now_ns();
    if (s->quiet > 0) {
        s->quiet--;
        return;
    }
    s->spinning = true;
    uv_idle_start(&s->idle, on_idle);
}

void ro__loop_spin_answered(ro_loop_spin_t *s)
{
    if (!s->armed_ns)
        return;
    if (s->spinning) {
        s->hits++;
        s->streak = 0;
        stop(s);
    }
    s->armed_ns = 0;
}

void ro__loop_spin_close(ro_loop_spin_t *s)
{
    stop(s);
    if (!uv_is_closing((uv_handle_t *)&s->idle))
        uv_close((uv_handle_t *)&s->idle, NULL);
}
