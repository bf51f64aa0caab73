#include "wire/gate.h"

void ro__gate_init(ro_gate_t *g, uint32_t slots, double hello_timeout_s)
{
    g->conns = (ro_ilist_t){0};
    g->waiting = 0;
    g->slots = slots < RO_GATE_MIN_SLOTS ? RO_GATE_MIN_SLOTS : slots;
    g->deadline_ns = hello_timeout_s > 0 ? (uint64_t)(hello_timeout_s * 1e9) : 0;
}

/* conn_of is the connection of a gate link, or NULL. */
static ro_conn_t *conn_of(const ro_ilink_t *l)
{
    return l ? ro__container_of(l, ro_conn_t, gate_link) : NULL;
}

ro_conn_t *ro__gate_first(const ro_gate_t *g)
{
    return conn_of(g->conns.first);
}

ro_conn_t *ro__gate_next(const ro_conn_t *c)
{
    return conn_of(c->gate_link.next);
}

void ro__gate_leave(ro_gate_t *g, ro_conn_t *c)
{
    if (!c->gated)
        return;
    ro__ilist_remove(&g->conns, &c->gate_link);
    c->gated = false;
    g->waiting--;
}

ro_conn_t *ro__gate_admit(ro_gate_t *g, ro_conn_t *c, uint64_t now_ns)
{
    ro__conn_set_max_frame(c, RO_HELLO_MAX_FRAME);
    c->gate_since_ns = now_ns;
    ro__ilist_append(&g->conns, &c->gate_link);
    c->gated = true;
    g->waiting++;
    /* Connections already closing are on their way out (on_closed comes
     * within a loop turn): they do not count, and the one to drop is the
     * oldest that is not closing. */
    uint32_t closing = 0;
    ro_conn_t *victim = NULL;
    for (ro_conn_t *o = ro__gate_first(g); o && o != c; o = ro__gate_next(o)) {
        if (o->closing)
            closing++;
        else if (!victim)
            victim = o;
    }
    if (g->waiting - closing <= g->slots)
        return NULL;
    return victim;
}

void ro__gate_pass(ro_gate_t *g, ro_conn_t *c, size_t max_frame)
{
    ro__gate_leave(g, c);
    ro__conn_set_max_frame(c, max_frame);
}

ro_conn_t *ro__gate_expired(const ro_gate_t *g, uint64_t now_ns)
{
    if (!g->deadline_ns)
        return NULL;
    /* In the order they came: the first one still within its deadline
     * ends the search. */
    for (ro_conn_t *c = ro__gate_first(g); c; c = ro__gate_next(c)) {
        if (c->closing)
            continue;
        return now_ns - c->gate_since_ns > g->deadline_ns ? c : NULL;
    }
    return NULL;
}
