#include "learner/frame_ring.h"

#include "runtime/error.h"

int ro__learner_ring_map(node_t *n, const Rollout__V1__SeedMemory *m, bool asked, char *err,
                         size_t errlen)
{
    ro__shared_mem_release(&n->ring_mem);
    n->rings = NULL;
    n->ring_tail = 0;
    n->ring_asleep = false;
    if (!m || m->ring_bytes == 0)
        return 0;
    if (!asked)
        return ro__errorf(err, errlen, RO_EPROTO, "offered frame rings we did not ask for");
    if (m->ring_bytes != RO_SEED_RING_BYTES)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "offered frame rings of %llu bytes; this learner's are %zu",
                          (unsigned long long)m->ring_bytes, RO_SEED_RING_BYTES);
    char why[300];
    if (ro__shared_mem_map_peer(&n->ring_mem, n->link.fds, n->link.nfds, m->ring_fd, m->ring_bytes,
                                true, "frame rings", why, sizeof why) != 0)
        return ro__errorf(err, errlen, RO_EPROTO, "%s", why);
    n->rings = n->ring_mem.base;
    return 0;
}

bool ro__learner_ring_live(const node_t *n)
{
    return n->rings && n->link.welcomed && n->link.conn.open && !n->link.conn.closing;
}

int ro__learner_ring_next(node_t *n, Rollout__V1__Observations *o, ro_seed_ring_slot_t *slot,
                          char *err, size_t errlen)
{
    int rc = ro__seed_ring_take(&n->rings->frames, "frame", &n->ring_tail, slot, err, errlen);
    if (rc <= 0)
        return rc;
    *o = (Rollout__V1__Observations)ROLLOUT__V1__OBSERVATIONS__INIT;
    o->seq = slot->seq;
    o->in_memory = true;
    o->n_ranges = slot->nvalues;
    o->ranges = slot->values;
    n->frames_in_ring++;
    return 1;
}

bool ro__learner_rings_sleep(learner_t *L)
{
    bool all = true;
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        node_t *n = &L->nodes[i];
        if (!ro__learner_ring_live(n) || n->ring_asleep)
            continue;
        n->ring_asleep = ro__seed_ring_sleep(&n->rings->frames, n->ring_tail);
        all = all && n->ring_asleep;
    }
    return all;
}

void ro__learner_rings_wake(learner_t *L)
{
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        node_t *n = &L->nodes[i];
        if (n->ring_asleep && ro__learner_ring_live(n))
            ro__seed_ring_wake(&n->rings->frames);
        n->ring_asleep = false;
    }
}

bool ro__learner_ring_answer(node_t *n, uint64_t seq)
{
    if (!ro__learner_ring_live(n) ||
        ro__seed_ring_post(&n->rings->answers, seq, NULL, 0) != RO_SEED_RING_POSTED)
        return false;
    n->answers_in_ring++;
    return true;
}
