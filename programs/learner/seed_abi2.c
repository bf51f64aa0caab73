/*
 * rollout-learner and SEED nodes of env ABI 2 envs (docs/protocol.md "SEED
 * mode and env ABI 2"): the welcome's layout adopted (the policy built for
 * it), and a frame's typed rows flattened for the forward pass with their
 * masks beside them. Called by serve.c; calls nothing of it.
 */
#include <stdio.h>
#include <string.h>

#include "learner/learner.h"
#include "runtime/error.h"
#include "wire/seed_abi2.h"

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

int ro__learner_check_welcome_abi2(const Rollout__V1__Welcome *w, char *err, size_t errlen)
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

int ro__learner_adopt_layout(learner_t *L, const Rollout__V1__Welcome *w, uint32_t *rows, char *err,
                             size_t errlen)
{
    const Rollout__V1__EnvSpec *spec = w->spec;
    int rc = ro__learner_check_welcome_abi2(w, err, errlen);
    if (rc)
        return rc;
    ro_space_layout_t lay;
    rc = ro__layout_from_wire(&lay, w->layout, err, errlen);
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
    L->fw.layout = &L->lay;
    return 0;
}

void ro__learner_rows_abi2(const learner_t *L, const Rollout__V1__Observations *o, ro_pending_t *p)
{
    const ro_space_layout_t *lay = &L->lay;
    const uint8_t *t[RO_ENV_MAX_TENSORS];
    for (uint32_t k = 0; k < lay->ntensors; k++)
        t[k] = o->tensors[k]->data.data;
    const uint32_t n = p->item.rows;
    ro__layout_flatten(lay, t, n, p->obs_copy);
    p->obs = p->obs_copy;
    p->mask = NULL;
    if (lay->mask_width) {
        uint8_t *m = (uint8_t *)(p->obs_copy + (size_t)n * lay->obs_width);
        memcpy(m, o->mask.data, (size_t)n * lay->mask_width);
        p->mask = m;
    }
}

void ro__learner_rows_memory_abi2(const learner_t *L, const node_t *n,
                                  const Rollout__V1__Observations *o, ro_pending_t *p,
                                  uint8_t *mask)
{
    const ro_space_layout_t *lay = &L->lay;
    const ro_seed_mem_layout_t *ml = &n->seed_lay;
    const uint8_t *mem = n->seed_obs.base;
    size_t r = 0;
    for (size_t k = 0; k < o->n_ranges; k += 2) {
        const uint32_t first = o->ranges[k], count = o->ranges[k + 1];
        const uint8_t *t[RO_ENV_MAX_TENSORS];
        for (uint32_t i = 0; i < lay->ntensors; i++)
            t[i] = mem + ml->tensor_off[i] + (size_t)first * ml->row_bytes[i];
        ro__layout_flatten(lay, t, count, p->obs_copy + r * lay->obs_width);
        if (lay->mask_width)
            memcpy(mask + r * lay->mask_width, mem + ml->mask_off + (size_t)first * lay->mask_width,
                   (size_t)count * lay->mask_width);
        r += count;
    }
    p->mask = lay->mask_width ? mask : NULL;
}

void ro__learner_write_actions_abi2(const learner_t *L, node_t *n, const ro_pending_t *p,
                                    const int32_t *act_i, const float *act_f)
{
    const size_t nd = L->act_ndisc, nb = L->act_dim;
    uint8_t *base = n->seed_act.base;
    int32_t *disc = (int32_t *)(void *)(base + n->seed_lay.act_off);
    float *box = (float *)(void *)(base + n->seed_lay.act_box_off);
    for (size_t i = 0; i < p->item.rows; i++) {
        const size_t row = p->env[i];
        if (nd)
            memcpy(disc + row * nd, act_i + i * nd, nd * sizeof(int32_t));
        if (nb)
            memcpy(box + row * nb, act_f + i * nb, nb * sizeof(float));
    }
}
