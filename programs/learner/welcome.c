/*
 * rollout-learner's welcomes: a node's spec or layout adopted (the policy
 * built on the first), a stream node's rules, a SEED node's shared memory
 * and frame ring mapped, and the per-env state of a first welcome or a
 * reconnect. This is where an env ABI 1 node's spaces are adapted to a
 * layout (docs/protocol.md "SEED mode and env ABI 2"), and its memory's
 * columns seen as that layout's: past it, frame_rows.c and serve.c have
 * one path. Called by serve.c; calls nothing of it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learner/frame_ring.h"
#include "learner/learner.h"
#include "policy/policy_flags.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/thread_guard.h"
#include "trajectory/abi2_format.h"
#include "wire/checks.h"
#include "wire/typed_checks.h"

/* A copy of a checked box space's bounds, owned by the learner. */
static int copy_bounds(ro_space_t *sp, float **low, float **high)
{
    if (sp->kind != RO_SPACE_BOX)
        return 0;
    size_t size = ro_space_size(sp);
    *low = malloc(size * sizeof(float));
    *high = malloc(size * sizeof(float));
    if (!*low || !*high)
        return RO_ENOMEM;
    memcpy(*low, sp->low, size * sizeof(float));
    memcpy(*high, sp->high, size * sizeof(float));
    sp->low = *low;
    sp->high = *high;
    return 0;
}

/* The first welcome fixes the spaces and builds the policy (*misfit: it
 * does not fit them); every later one must have the same spaces. */
static int adopt_spec(learner_t *L, const Rollout__V1__Welcome *w, bool *misfit, char *err,
                      size_t errlen)
{
    ro_space_t os, as;
    int rc = ro__check_welcome(w, MAX_NUM_ENVS, &os, &as, err, errlen);
    if (rc)
        return rc;
    uint32_t od = (uint32_t)ro_space_size(&os), ad = (uint32_t)ro_space_size(&as);
    if (L->have_spec) {
        if (L->abi2 || od != L->obs_dim || (as.kind == RO_SPACE_DISCRETE) != L->discrete ||
            (L->discrete ? as.n != L->act_n : ad != L->act_dim))
            return ro__errorf(err, errlen, RO_EPROTO,
                              "its env spaces differ from the first node's");
        return 0;
    }
    if (copy_bounds(&os, &L->bounds[0], &L->bounds[1]) ||
        copy_bounds(&as, &L->bounds[2], &L->bounds[3]))
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for the env spaces");
    if (ro__layout_from_abi1(&L->lay, &os, &as, "the node's env", err, errlen) != 0)
        return RO_EPROTO;
    L->have_spec = true;
    L->obs_dim = od;
    L->act_dim = ad;
    L->act_n = as.n;
    L->act_ndisc = 1;
    L->discrete = as.kind == RO_SPACE_DISCRETE;
    L->obs_space = os;
    L->act_space = as;
    char perr[256] = "";
    if (ro__policy_new(&L->policy, &L->cfg.policy, &L->obs_space, &L->act_space, perr,
                       sizeof perr) != 0) {
        snprintf(L->err, sizeof L->err, "%s", perr);
        L->exit_code = 2;
        *misfit = true;
        return RO_EINVAL;
    }
    L->fw.policy = L->policy;
    L->fw.obs_dim = L->obs_dim;
    return 0;
}

/* same_layout: what a reconnecting (or second) node must share with the
 * first one's layout. */
static bool same_layout(const ro_space_layout_t *a, const ro_space_layout_t *b)
{
    if (a->agents != b->agents || a->ntensors != b->ntensors || a->obs_width != b->obs_width ||
        a->ndisc != b->ndisc || a->nbox != b->nbox || a->mask_width != b->mask_width ||
        a->head_width != b->head_width || a->nparts != b->nparts)
        return false;
    for (uint32_t k = 0; k < a->ntensors; k++)
        if (strcmp(a->t[k].name, b->t[k].name) != 0 || a->t[k].dtype != b->t[k].dtype ||
            a->t[k].size != b->t[k].size)
            return false;
    for (uint32_t e = 0; e < a->ndisc; e++)
        if (a->disc_n[e] != b->disc_n[e])
            return false;
    for (uint32_t j = 0; j < a->nbox; j++)
        if (a->box_low[j] != b->box_low[j] || a->box_high[j] != b->box_high[j])
            return false;
    return true;
}

/* check_layout_welcome: what every welcome with an env ABI 2 layout must
 * say, SEED or stream, before either reads it: our protocol version, a
 * spec of 1 to MAX_NUM_ENVS envs. 0, or RO_EPROTO with one line in err. */
static int check_layout_welcome(const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    const Rollout__V1__EnvSpec *spec = w->spec;
    if (w->protocol_version != RO_PROTOCOL_VERSION)
        return ro__errorf(err, errlen, RO_EPROTO, "protocol version %u (this learner speaks %u)",
                          w->protocol_version, RO_PROTOCOL_VERSION);
    if (!spec || spec->num_envs < 1 || spec->num_envs > MAX_NUM_ENVS)
        return ro__errorf(err, errlen, RO_EPROTO, "welcome spec num_envs %u outside [1, %u]",
                          spec ? spec->num_envs : 0, MAX_NUM_ENVS);
    return 0;
}

/* adopt_layout: a SEED welcome with an env ABI 2 layout (past
 * check_layout_welcome). The first builds the policy for it
 * (ro__policy_new_layout; on failure L->err and exit code 2 are set, and
 * RO_EINVAL returned: stop); every later one must match it. *rows gets
 * the node's rows (num_envs x agents). 0, or a negative code with one
 * line in err. */
static int adopt_layout(learner_t *L, const Rollout__V1__Welcome *w, uint32_t *rows, char *err,
                        size_t errlen)
{
    const Rollout__V1__EnvSpec *spec = w->spec;
    ro_space_layout_t lay;
    int rc = ro__layout_from_wire(&lay, w->layout, err, errlen);
    if (rc)
        return rc;
    if ((uint64_t)spec->num_envs * lay.agents > MAX_NUM_ENVS) {
        ro__layout_free(&lay);
        return ro__errorf(err, errlen, RO_EPROTO, "welcome: %u envs of %u agents: over %u rows",
                          spec->num_envs, lay.agents, MAX_NUM_ENVS);
    }
    *rows = spec->num_envs * lay.agents;
    if (L->have_spec) {
        bool same = L->abi2 && same_layout(&L->lay, &lay);
        ro__layout_free(&lay);
        return same ? 0
                    : ro__errorf(err, errlen, RO_EPROTO,
                                 "its env layout differs from the first "
                                 "node's");
    }
    L->lay = lay;
    L->abi2 = true;
    L->have_spec = true;
    L->obs_dim = lay.obs_width;
    L->act_ndisc = lay.ndisc;
    L->act_dim = lay.nbox;
    L->discrete = false;
    char perr[256] = "";
    if (ro__policy_new_layout(&L->policy, &L->cfg.policy, &L->lay, perr, sizeof perr) != 0) {
        snprintf(L->err, sizeof L->err, "%s", perr);
        L->exit_code = 2;
        return ro__errorf(err, errlen, RO_EINVAL, "%s", perr);
    }
    L->fw.policy = L->policy;
    L->fw.obs_dim = L->obs_dim;
    return 0;
}

/* A stream node: nothing to act on; its segments are checked against
 * its spaces and counted. stream_rules_abi2 makes the segment rules of a
 * stream welcome that carries an env ABI 2 layout (check_layout_welcome
 * passed; checked here: every field of it is the node's word, untrusted). */
static int stream_rules_abi2(const Rollout__V1__Welcome *w, ro_segment_rules_t *r, char *err,
                             size_t errlen)
{
    const Rollout__V1__EnvSpec *spec = w->spec;
    ro_traj_rows_t rows;
    char why[200];
    if (ro__traj_layout_rows(w->layout, &rows, why, sizeof why) != 0)
        return ro__errorf(err, errlen, RO_EPROTO, "welcome %s", why);
    r->abi2 = true;
    r->num_envs = spec->num_envs;
    r->agents = rows.agents;
    r->nobs = rows.ntensors;
    r->ndisc = rows.ndisc;
    r->nbox = rows.nbox;
    r->mask_width = rows.mask_width;
    for (uint32_t k = 0; k < rows.ntensors; k++) {
        const Rollout__V1__NamedTensor *t = w->layout->tensors[k];
        snprintf(r->obs[k].name, sizeof r->obs[k].name, "%s", t->name);
        r->obs[k].dtype = t->dtype;
        r->obs[k].ndim = (uint32_t)t->n_shape;
        for (size_t d = 0; d < t->n_shape; d++)
            r->obs[k].shape[d] = t->shape[d];
    }
    return 0;
}

static int welcome_stream(node_t *n, const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    ro_segment_rules_t rules;
    memset(&rules, 0, sizeof rules); /* compared bytewise on a reconnect */
    int rc;
    if (w->layout) {
        if ((rc = stream_rules_abi2(w, &rules, err, errlen)) != 0)
            return rc;
    } else {
        ro_space_t os, as;
        if ((rc = ro__check_welcome(w, MAX_NUM_ENVS, &os, &as, err, errlen)) != 0)
            return rc;
        rules.num_envs = w->spec->num_envs;
        rules.obs_dim = (uint32_t)ro_space_size(&os);
        rules.act_dim = (uint32_t)ro_space_size(&as);
        rules.discrete = as.kind == RO_SPACE_DISCRETE;
    }
    if (w->unroll < 1 || w->unroll > 1u << 16)
        return ro__errorf(err, errlen, RO_EPROTO, "a stream node with unroll %u", w->unroll);
    rules.unroll = w->unroll;
    if (w->recurrent && *w->recurrent) { /* segments carry the rows' states */
        ro_policy_spec_t cell = {0};
        char why[160];
        if (ro__flag_recurrent(&cell, w->recurrent, why, sizeof why) != 0)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "a stream node whose policy's cell is '%.32s'", w->recurrent);
        rules.state_hid = cell.cell_hidden;
        rules.state_lstm = cell.cell == RO_CELL_LSTM;
    }
    n->ack_owed = 0;
    n->ack_every = w->window / 2 ? w->window / 2 : 1;
    if (n->stream) { /* a reconnect: the same node goes on, a restarted one over */
        if (memcmp(&rules, &n->rx.rules, sizeof rules) != 0)
            return ro__errorf(err, errlen, RO_EPROTO, "came back with other spaces or envs");
        if (w->node_id != n->link.node_id)
            ro__stream_rx_restart(&n->rx);
    } else {
        n->stream = true;
        n->num_envs = rules.num_envs;
        if (ro__stream_rx_init(&n->rx, &rules) != 0)
            return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for %u envs", rules.num_envs);
    }
    /* This connection's segments: in the node's memory, if it offered it. */
    ro__shared_mem_release(&n->rx.shm);
    if (!w->segment_memory_fd)
        return 0;
    if (!n->link.shared)
        return ro__errorf(err, errlen, RO_EPROTO, "offered shared memory we did not ask for");
    char why[300];
    if (ro__shared_mem_map_peer(&n->rx.shm, n->link.fds, n->link.nfds, w->segment_memory_fd,
                                w->segment_memory_bytes, false, "segment memory", why,
                                sizeof why) != 0)
        return ro__errorf(err, errlen, RO_EPROTO, "%s", why);
    return 0;
}

/* abi1_memory_view: an ABI 1 node's checked memory columns (one float
 * observation, int32 or float actions at act_off) seen as the adapted
 * layout's, as an ABI 2 node's memory describes them: one tensor at the
 * observation column, the discrete entries or box floats at act_off. */
static void abi1_memory_view(const learner_t *L, ro_seed_mem_layout_t *ml)
{
    ml->ntensors = 1;
    ml->row_bytes[0] = (uint64_t)L->obs_dim * sizeof(float);
    ml->tensor_off[0] = ml->obs_off;
    ml->final_tensor_off[0] = ml->final_off;
    ml->mask_width = 0;
    ml->mask_off = 0;
    ml->ndisc = L->lay.ndisc;
    ml->nbox = L->lay.nbox;
    ml->act_box_off = ml->act_off;
}

/* This connection's SEED memory, if the node offered it (we asked only
 * where we can map it): checked against the spaces, then mapped. */
static int map_seed_memory(learner_t *L, node_t *n, const Rollout__V1__Welcome *w, uint32_t rows,
                           char *err, size_t errlen)
{
    ro__shared_mem_release(&n->seed_obs);
    ro__shared_mem_release(&n->seed_act);
    (void)ro__learner_ring_map(n, NULL, false, err, errlen); /* releases it */
    const Rollout__V1__SeedMemory *m = w->seed_memory;
    if (!m)
        return 0;
    if (!n->link.shared)
        return ro__errorf(err, errlen, RO_EPROTO, "offered shared memory we did not ask for");
    int rc = L->abi2 ? ro__seed_mem_check_typed(m, rows, &L->lay, &n->seed_lay, err, errlen)
                     : ro__seed_mem_check(m, rows, L->obs_dim, L->discrete ? 1 : L->act_dim,
                                          &n->seed_lay, err, errlen);
    if (rc)
        return rc;
    if (!L->abi2)
        abi1_memory_view(L, &n->seed_lay);
    char why[300];
    const ro_link_t *l = &n->link;
    if (ro__shared_mem_map_peer(&n->seed_obs, l->fds, l->nfds, m->obs_fd, m->obs_bytes, false,
                                "observation memory", why, sizeof why) != 0 ||
        ro__shared_mem_map_peer(&n->seed_act, l->fds, l->nfds, m->act_fd, m->act_bytes, true,
                                "action memory", why, sizeof why) != 0) {
        ro__shared_mem_release(&n->seed_obs);
        return ro__errorf(err, errlen, RO_EPROTO, "%s", why);
    }
    return ro__learner_ring_map(n, m, n->link.o.seed_ring, err, errlen);
}

int ro__learner_welcome(learner_t *L, node_t *n, const Rollout__V1__Welcome *w, bool *misfit,
                        char *err, size_t errlen)
{
    ro_link_t *l = &n->link;
    if (!L->welcomed_any) { /* steps/s count from here, not from a wait for a node to start */
        L->welcomed_any = true;
        L->t0 = ro__now_ns();
    }
    if (L->push) { /* --push-policy: the weights, then wait for the answer */
        ro_frame_t out = ROLLOUT__V1__FRAME__INIT;
        out.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_PARAMS;
        out.policy_params = L->push;
        if (ro__conn_send(&l->conn, &out) != 0)
            return ro__errorf(err, errlen, RO_EIO, "could not send the policy");
        return 0;
    }
    int rc = w->layout ? check_layout_welcome(w, err, errlen) : 0;
    if (rc)
        return rc;
    if (w->mode && strcmp(w->mode, "stream") == 0) {
        rc = welcome_stream(n, w, err, errlen);
        n->rx.returns = L->met.on ? &L->met.ret_iv : NULL; /* --tensorboard, --prometheus */
        L->threads = ro__thread_count();
        return rc;
    }
    uint32_t envs = 0;
    rc = w->layout ? adopt_layout(L, w, &envs, err, errlen) : adopt_spec(L, w, misfit, err, errlen);
    if (rc == RO_EINVAL && w->layout)
        *misfit = true;
    if (rc)
        return rc;
    if (!w->layout)
        envs = w->spec->num_envs; /* ABI 2: rows, envs x agents */
    if ((rc = map_seed_memory(L, n, w, envs, err, errlen)) != 0)
        return rc;
    n->steps_at_welcome = n->steps; /* what this connection adds: its goodbye may say (serve.c) */
    if (l->attached) {
        /* A reconnect: the sampling streams go on (a lane may still hold a
         * job with some of them); a restarted node starts its envs over. */
        if (envs != n->num_envs)
            return ro__errorf(err, errlen, RO_EPROTO, "came back with %u envs, had %u", envs,
                              n->num_envs);
        if (w->node_id != l->node_id) {
            memset(n->ep_ret, 0, n->num_envs * sizeof *n->ep_ret);
            memset(n->next_step, 0, n->num_envs * sizeof *n->next_step);
            ro__state_table_clear(&n->rstate); /* its envs start over: no state of ours fits */
        }
    } else {
        n->num_envs = envs;
        n->rngs = calloc(envs, sizeof *n->rngs);
        n->ep_ret = calloc(envs, sizeof *n->ep_ret);
        n->next_step = calloc(envs, sizeof *n->next_step);
        const uint32_t sf = ro__policy_state_floats(L->policy);
        if (!n->rngs || !n->ep_ret || !n->next_step ||
            (sf && ro__state_table_init(&n->rstate, envs, sf) != 0))
            return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for %u envs", envs);
        uint64_t seed = L->cfg.policy.seed ^ ((uint64_t)l->o.index << 32);
        for (uint32_t e = 0; e < envs; e++)
            ro__rng_init(&n->rngs[e], ro__seed_mix(seed, e, RO_STREAM_ACTION));
    }
    L->threads = ro__thread_count();
    return 0;
}
