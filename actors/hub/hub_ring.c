#include "actors/hub/hub_ring.h"

#include "wire/seed_ring.h"

/* Rounds of taking answers before the loop may block (on_prepare): a
 * learner that keeps answering gets one more turn without blocking. */
#define SLEEP_ROUNDS 16

static bool ring_live(const ro_session_t *s)
{
    return s->listed && s->flow.rings && s->conn.open && !s->conn.closing;
}

/* The answers s's learner posted, to the hub as if they came on the
 * socket. A session may be failed (unlisted) by what one answer does. */
static void drain(ro_hub_t *h, ro_session_t *s)
{
    ro_seed_ring_slot_t slot;
    char err[256];
    while (ring_live(s)) {
        int rc = ro__seed_ring_take(&s->flow.rings->answers, "answer", &s->answers_tail, &slot, err,
                                    sizeof err);
        if (rc < 0)
            h->on_answer(s, NULL, err);
        if (rc <= 0)
            return;
        Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
        a.seq = slot.seq;
        a.in_memory = true;
        h->on_answer(s, &a, NULL);
    }
}

/* Every session, each taken once: what an answer does may unlist one (its
 * memory stays until its handle closes, a later turn). */
static void drain_all(ro_hub_t *h)
{
    for (ro_session_t *s = h->sessions, *next; s; s = next) {
        next = s->next;
        drain(h, s);
    }
}

static void on_check(uv_check_t *c)
{
    ro_hub_t *h = c->data;
    for (ro_session_t *s = h->sessions; s; s = s->next) {
        if (s->answers_asleep && ring_live(s))
            ro__seed_ring_wake(&s->flow.rings->answers);
        s->answers_asleep = false;
    }
    drain_all(h);
}

static void on_kick(uv_idle_t *k)
{
    uv_idle_stop(k);
}

/* Before the loop may block (no idle handle: no spin, no env actor
 * ready): every ring asleep, or its answers taken first. */
static void on_prepare(uv_prepare_t *p)
{
    ro_hub_t *h = p->data;
    for (int round = 0; round < SLEEP_ROUNDS; round++) {
        if (uv_backend_timeout(h->loop) == 0)
            return;
        bool all = true;
        for (ro_session_t *s = h->sessions; s; s = s->next) {
            if (!ring_live(s) || s->answers_asleep)
                continue;
            s->answers_asleep = ro__seed_ring_sleep(&s->flow.rings->answers, s->answers_tail);
            all = all && s->answers_asleep;
        }
        if (all)
            return;
        drain_all(h);
    }
    uv_idle_start(&h->ring_kick, on_kick);
}

void ro__hub_ring_start(ro_hub_t *h, ro_hub_answer_fn on_answer)
{
    h->on_answer = on_answer;
    uv_prepare_init(h->loop, &h->ring_prepare); /* these cannot fail */
    uv_check_init(h->loop, &h->ring_check);
    uv_idle_init(h->loop, &h->ring_kick);
    h->ring_prepare.data = h->ring_check.data = h->ring_kick.data = h;
    uv_prepare_start(&h->ring_prepare, on_prepare);
    uv_check_start(&h->ring_check, on_check);
}

void ro__hub_ring_close(ro_hub_t *h)
{
    uv_close((uv_handle_t *)&h->ring_prepare, NULL);
    uv_close((uv_handle_t *)&h->ring_check, NULL);
    uv_close((uv_handle_t *)&h->ring_kick, NULL);
}
