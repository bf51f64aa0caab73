/*
 * rollout-learner's rows of a SEED frame, one path for both env ABIs: a
 * frame's (or the node's memory's) rows taken for the forward pass, their
 * steps and returns counted, their recurrent states chosen, and the actions
 * written back into the node's memory. An ABI 1 node's spaces were adapted
 * to a layout at its welcome (welcome.c: one float32 tensor "obs", one
 * action part, and its memory seen through the ABI 2 columns), so past
 * that only the wire's frame (a flat obs column or typed tensors) tells the
 * ABIs apart. Called by serve.c; calls nothing of it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learner/learner.h"
#include "runtime/error.h"

/* Steps and episode returns. A batch sent again after a reconnect repeats
 * (env, step) pairs already counted: those are skipped, so every env step
 * is counted once however often it was served. Steps are rows (env ABI 2:
 * agent steps, as the node's summary counts them); an episode is an env's,
 * which ends for all its agents at once (env-api.md): it counts once, on
 * agent 0's row, and its return is the agents' mean, as the node counts
 * it. */
static void count_step(learner_t *L, node_t *n, uint32_t e, uint64_t step, float reward, bool done)
{
    if (step < n->next_step[e])
        return;
    n->next_step[e] = step + 1;
    n->steps++;
    L->steps++;
    n->ep_ret[e] += reward;
    if (done) {
        const uint32_t agents = L->lay.agents ? L->lay.agents : 1;
        n->episodes += e % agents == 0;
        n->return_sum += n->ep_ret[e] / agents;
        if (L->met.on && agents == 1) /* several agents: their rows hold shares of it */
            ro__histo_add(&L->met.ret_iv, n->ep_ret[e]);
        n->ep_ret[e] = 0.0;
    }
}

/* take_states gives each row of p the state its step starts from
 * (state_table.h), when the policy is recurrent: row i's env (row) index,
 * step and episode start. 0 or RO_ENOMEM. */
static int take_states(node_t *n, ro_pending_t *p, const uint64_t *step,
                       const protobuf_c_boolean *start, const uint8_t *flags)
{
    ro_state_table_t *t = &n->rstate;
    const size_t rows = p->item.rows, f = t->floats;
    if (!f)
        return 0;
    p->rs = malloc(rows * 2 * f * sizeof(float) + rows * sizeof(uint64_t));
    if (!p->rs)
        return RO_ENOMEM;
    p->rs_step = (uint64_t *)(p->rs + rows * 2 * f);
    for (size_t i = 0; i < rows; i++) {
        const uint32_t e = p->env[i];
        /* a frame's columns are per row; memory's per env index */
        const uint64_t k = flags ? step[e] : step[i];
        const bool first = flags ? (flags[e] & RO_SEEDMEM_EPISODE_START) != 0 : start[i] != 0;
        float *in = p->rs + i * 2 * f;
        ro__state_table_take(t, e, k, first, in);
        memcpy(in + f, in, f * sizeof(float)); /* the lane works on the copy */
        p->rs_step[i] = k;
    }
    return 0;
}

size_t ro__learner_rows_bytes(const learner_t *L, const Rollout__V1__Observations *o, uint32_t rows)
{
    if (!o->in_memory && !L->abi2) /* the frame's own obs column is read in place */
        return 0;
    /* In memory: each row's env index, reward and flags too (take_rows). */
    const size_t checked = sizeof(uint32_t) + sizeof(float) + 1;
    return (size_t)rows *
           (L->obs_dim * sizeof(float) + L->lay.mask_width + (o->in_memory ? checked : 0));
}

/* A frame's own rows: an ABI 1 frame's obs column read in place; typed
 * tensors flattened into p->obs_copy, their mask rows after them. */
static void frame_rows(const learner_t *L, const Rollout__V1__Observations *o, ro_pending_t *p)
{
    const ro_space_layout_t *lay = &L->lay;
    p->mask = NULL;
    if (!L->abi2) {
        p->obs = o->obs;
        return;
    }
    const uint8_t *t[RO_ENV_MAX_TENSORS];
    for (uint32_t k = 0; k < lay->ntensors; k++)
        t[k] = o->tensors[k]->data.data;
    const uint32_t n = p->item.rows;
    ro__layout_flatten(lay, t, n, p->obs_copy);
    p->obs = p->obs_copy;
    if (lay->mask_width) {
        uint8_t *m = (uint8_t *)(p->obs_copy + (size_t)n * lay->obs_width);
        memcpy(m, o->mask.data, (size_t)n * lay->mask_width);
        p->mask = m;
    }
}

/* The rows of a frame in node n's memory (ranges checked), flattened into
 * p->obs_copy from the tensors' columns, their mask rows copied to mask. */
static void memory_rows(const learner_t *L, const node_t *n, const Rollout__V1__Observations *o,
                        ro_pending_t *p, uint8_t *mask)
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
    p->obs = p->obs_copy;
    p->mask = lay->mask_width ? mask : NULL;
}

int ro__learner_take_rows(learner_t *L, node_t *n, const Rollout__V1__Observations *o,
                          ro_pending_t *p, char *err, size_t errlen)
{
    if (!o->in_memory) {
        for (size_t i = 0; i < o->n_env; i++)
            count_step(L, n, o->env[i], o->step[i], o->reward[i],
                       o->terminated[i] || o->truncated[i]);
        p->env = o->env;
        frame_rows(L, o, p);
        return take_states(n, p, o->step, o->episode_start, NULL) == 0
                   ? 0
                   : ro__errorf(err, errlen, RO_ENOMEM, "out of memory for recurrent states");
    }
    const uint8_t *mem = n->seed_obs.base;
    const ro_seed_mem_layout_t *lay = &n->seed_lay;
    const size_t od = L->obs_dim, rows = p->item.rows;
    const unsigned long long seq = (unsigned long long)o->seq;
    const float *reward = (const float *)(mem + lay->reward_off);
    const uint64_t *step = (const uint64_t *)(mem + lay->step_off);
    const uint8_t *flags = mem + lay->flags_off;
    /* After the rows' floats: env indices, then the rewards and flags as
     * checked (the node may write its memory meanwhile: what is counted is
     * what was checked), then the mask rows (rows_bytes). */
    uint32_t *env = (uint32_t *)(p->obs_copy + rows * od);
    float *rew = (float *)(env + rows);
    uint8_t *fls = (uint8_t *)(rew + rows);
    size_t r = 0;
    for (size_t k = 0; k < o->n_ranges; k += 2) {
        const uint32_t first = o->ranges[k], count = o->ranges[k + 1];
        for (uint32_t e = first; e < first + count; e++, r++) {
            const float rw = reward[e];
            const uint8_t fl = flags[e];
            if (!isfinite(rw))
                return ro__errorf(err, errlen, RO_ERANGE,
                                  "observations %llu in memory: the reward of env %u is %s", seq, e,
                                  isnan(rw) ? "NaN" : "infinite");
            if (fl & ~(RO_SEEDMEM_TERMINATED | RO_SEEDMEM_TRUNCATED | RO_SEEDMEM_EPISODE_START |
                       RO_SEEDMEM_HAS_FINAL))
                return ro__errorf(err, errlen, RO_ERANGE,
                                  "observations %llu in memory: the flags of env %u are 0x%02x, "
                                  "bits no node sets",
                                  seq, e, fl);
            env[r] = e;
            rew[r] = rw;
            fls[r] = fl;
        }
    }
    p->env = env;
    memory_rows(L, n, o, p, fls + rows);
    for (size_t i = 0; i < r * od; i++) /* our copy: what the forward pass will read */
        if (!isfinite(p->obs_copy[i]))
            return ro__errorf(err, errlen, RO_ERANGE,
                              "observations %llu in memory: the observation of env %u holds %s "
                              "(value %zu)",
                              seq, env[i / od], isnan(p->obs_copy[i]) ? "NaN" : "an infinity",
                              i % od);
    if (take_states(n, p, step, NULL, flags) != 0)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for recurrent states");
    /* Counted once the whole frame is taken: a refused frame counts none. */
    for (size_t i = 0; i < r; i++)
        count_step(L, n, env[i], step[env[i]], rew[i],
                   (fls[i] & (RO_SEEDMEM_TERMINATED | RO_SEEDMEM_TRUNCATED)) != 0);
    return 0;
}

void ro__learner_write_actions(const learner_t *L, node_t *n, const ro_pending_t *p,
                               const int32_t *act_i, const float *act_f)
{
    const size_t nd = L->lay.ndisc, nb = L->lay.nbox;
    uint8_t *base = n->seed_act.base;
    int32_t *disc = (int32_t *)(void *)(base + n->seed_lay.act_off);
    float *box = (float *)(void *)(base + n->seed_lay.act_box_off);
    for (size_t i = 0; i < p->item.rows; i++) {
        const size_t row = p->env[i];
        if (nd)
            memcpy(disc + row * nd, act_i + i * L->act_ndisc, nd * sizeof(int32_t));
        if (nb)
            memcpy(box + row * nb, act_f + i * L->act_dim, nb * sizeof(float));
    }
}
