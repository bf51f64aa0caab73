/*
 * Building and freeing an env shard (env_shard.h): its probe instance, its
 * one block of memory (laid out by layout() below) and its envs.
 */
#include "actors/local/env_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "envs/registry.h"
#include "runtime/alloc.h"
#include "runtime/error.h"
#include "runtime/numa_mem.h"
#include "spaces/layout.h"

/* Reserve the next array of `bytes` in a block, on its own cache line: no
 * two arrays (nor two shards' arrays) share a line. Returns its offset. */
static size_t carve(size_t *off, size_t bytes)
{
    size_t at = *off;
    *off += (bytes + RO_CACHE_LINE - 1) / RO_CACHE_LINE * RO_CACHE_LINE;
    return at;
}

/* row_bytes is tensor k's bytes per row (ABI 1: the one float tensor). */
static size_t row_bytes(const ro_env_shard_t *s, uint32_t k)
{
    return s->vt2 ? s->xchg.layout->t[k].row_bytes : (size_t)s->xchg.obs_dim * sizeof(float);
}

/* All of a shard's per-env and per-row arrays live in one
 * cache-line-aligned block, allocated (and first touched) once. With mem
 * == NULL, only returns its size; otherwise also points the arrays into
 * mem. An ABI 1 shard's block is what it was before ABI 2: the ABI 2
 * arrays take no bytes. */
static size_t layout(ro_env_shard_t *s, char *mem)
{
    ro_step_batch_t *b = &s->xchg;
    const ro_space_layout_t *lay = b->layout;
    const size_t n = b->n, ne = n / b->agents, ad = b->act_dim;
    const uint32_t nt = s->vt2 ? lay->ntensors : 1, nm = s->vt2 ? lay->nmetrics : 0;
    size_t off = 0, at[25], tat[2][RO_ENV_MAX_TENSORS];
    at[0] = carve(&off, ne * sizeof(void *));
    at[1] = carve(&off, ne * sizeof(uint32_t));
    at[2] = carve(&off, ne * sizeof(double));
    at[3] = carve(&off, ne * sizeof(uint64_t));
    at[4] = carve(&off, n * sizeof(ro_rng_t));
    for (uint32_t f = 0; f < 2; f++) /* the tensors, then the final ones */
        for (uint32_t k = 0; k < nt; k++)
            tat[f][k] = carve(&off, n * row_bytes(s, k));
    at[7] = carve(&off, n * sizeof(float));
    at[8] = carve(&off, n);
    at[9] = carve(&off, n);
    at[10] = carve(&off, n);
    at[11] = carve(&off, n);
    at[12] = carve(&off, n * b->act_ndisc * sizeof(int32_t));
    at[13] = carve(&off, n * ad * sizeof(float));
    at[14] = carve(&off, ne * sizeof(uint64_t));
    at[15] = carve(&off, n * sizeof(float));
    at[16] = carve(&off, n * ad * sizeof(float));
    at[17] = carve(&off, ad * sizeof(float));
    at[18] = carve(&off, s->vt2 ? n * lay->mask_width : 0);
    at[19] = carve(&off, s->vt2 ? b->agents * sizeof(ro_step_t) : 0);
    at[20] = carve(&off, nm * sizeof(double));
    at[21] = carve(&off, nm * sizeof(uint64_t));
    at[22] = carve(&off, ne);
    at[23] = carve(&off, ne * sizeof(uint64_t));
    at[24] = carve(&off, ne);
    if (mem) {
        s->envs = (void **)(mem + at[0]);
        s->ep_len = (uint32_t *)(mem + at[1]);
        s->ep_return = (double *)(mem + at[2]);
        s->ep_num = (uint64_t *)(mem + at[3]);
        b->act_rng = (ro_rng_t *)(mem + at[4]);
        for (uint32_t k = 0; k < nt; k++) {
            b->tensor[k] = (uint8_t *)(mem + tat[0][k]);
            b->final_tensor[k] = (uint8_t *)(mem + tat[1][k]);
        }
        bool plain = !s->vt2 || lay->plain_obs;
        b->obs = plain ? (float *)(void *)b->tensor[0] : NULL;
        b->final_obs = plain ? (float *)(void *)b->final_tensor[0] : NULL;
        b->reward = (float *)(mem + at[7]);
        b->terminated = (uint8_t *)(mem + at[8]);
        b->truncated = (uint8_t *)(mem + at[9]);
        b->episode_start = (uint8_t *)(mem + at[10]);
        b->has_final = (uint8_t *)(mem + at[11]);
        b->act_i = (int32_t *)(mem + at[12]);
        b->act_f = (float *)(mem + at[13]);
        s->ep_policy = (uint64_t *)(mem + at[14]);
        b->logp = (float *)(mem + at[15]);
        b->mean = (float *)(mem + at[16]);
        b->log_std = (float *)(mem + at[17]);
        b->mask = s->vt2 && lay->mask_width ? (uint8_t *)(mem + at[18]) : NULL;
        s->agent_steps = s->vt2 ? (ro_step_t *)(mem + at[19]) : NULL;
        s->metric_sum = nm ? (double *)(mem + at[20]) : NULL;
        s->metric_count = nm ? (uint64_t *)(mem + at[21]) : NULL;
        b->hold = (uint8_t *)(mem + at[22]);
        b->reseed_env = (uint64_t *)(mem + at[23]);
        b->reseed_has = (uint8_t *)(mem + at[24]);
    }
    return off;
}

int ro__env_shard_init(ro_env_shard_t *s, const ro_env_vtable_t *vt, const ro_env_arg_t *args,
                       size_t nargs, uint32_t first, uint32_t n, uint64_t seed, char *err,
                       size_t errlen)
{
    return ro__env_shard_init_on(s, vt, args, nargs, first, n, seed, -1, err, errlen);
}

int ro__env_shard_init_on(ro_env_shard_t *s, const ro_env_vtable_t *vt, const ro_env_arg_t *args,
                          size_t nargs, uint32_t first, uint32_t n, uint64_t seed, int mem_node,
                          char *err, size_t errlen)
{
    const ro_env_kind_t kind = {.vt = vt};
    return ro__env_shard_init_kind(s, &kind, NULL, args, nargs, first, n, seed, mem_node, err,
                                   errlen);
}

/* same_layout: an instance reports what the kind's layout says (every
 * instance of a kind must report the same spaces: buffers are sized once). */
static bool same_layout(const ro_space_layout_t *a, const ro_space_layout_t *b)
{
    return a->agents == b->agents && a->ntensors == b->ntensors && a->obs_bytes == b->obs_bytes &&
           a->obs_width == b->obs_width && a->ndisc == b->ndisc && a->nbox == b->nbox &&
           a->mask_width == b->mask_width && a->head_width == b->head_width;
}

/* probe_spaces sizes the shard from its first instance: ABI 1 spaces are
 * checked as always; an ABI 2 instance must match the kind's layout. */
static int probe_spaces(ro_env_shard_t *s, void *probe, const ro_space_layout_t *lay, char *err,
                        size_t errlen)
{
    ro_step_batch_t *b = &s->xchg;
    if (!s->vt2) {
        ro_space_t os = {0}, as = {0};
        s->vt->spaces(probe, &os, &as);
        /* Checked before anything sizes a buffer or reads a bound from them:
         * a plugin's NULL bounds or bad shape is one clear error, in every
         * mode. */
        int rc = ro__env_check_spaces(s->vt, &os, &as, err, errlen);
        if (rc)
            return rc;
        b->obs_dim = (uint32_t)ro_space_size(&os);
        b->discrete = as.kind == RO_SPACE_DISCRETE;
        b->act_dim = (uint32_t)ro_space_size(&as);
        b->act_ndisc = 1;
        b->act_nbox = b->discrete ? 0 : b->act_dim;
        return 0;
    }
    ro_space_layout_t mine;
    int rc = ro__env_layout_of(NULL, s->vt2, probe, &mine, err, errlen);
    if (rc)
        return rc;
    bool same = same_layout(&mine, lay);
    ro__layout_free(&mine);
    if (!same)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': instance %u reports other spaces than the first one; every "
                          "instance of an env must report the same spaces",
                          s->vt2->name, b->first);
    b->obs_dim = lay->obs_width;
    /* One Discrete part, unmasked: actions as ABI 1's, one int32 a row. */
    b->discrete = lay->simple_act && lay->part[0].kind == RO_SPACE_DISCRETE;
    b->act_ndisc = lay->ndisc;
    b->act_nbox = lay->nbox;
    b->act_dim = lay->nbox ? lay->nbox : 1;
    return 0;
}

int ro__env_shard_init_kind(ro_env_shard_t *s, const ro_env_kind_t *kind,
                            const ro_space_layout_t *lay, const ro_env_arg_t *args, size_t nargs,
                            uint32_t first, uint32_t n, uint64_t seed, int mem_node, char *err,
                            size_t errlen)
{
    const ro_env_vtable_t *vt = kind->vt;
    const ro_env2_vtable_t *vt2 = kind->vt2;
    memset(s, 0, sizeof *s);
    s->kind = *kind;
    if (!vt == !vt2 || (vt2 && !lay))
        return ro__errorf(err, errlen, RO_EINVAL, "env shard: one vtable, and a layout for ABI 2");
    s->vt = vt;
    s->vt2 = vt2;
    s->args = args;
    s->nargs = nargs;
    ro_step_batch_t *b = &s->xchg;
    const uint32_t agents = vt2 ? lay->agents : 1;
    b->layout = lay;
    b->agents = agents;
    b->first = first;
    b->n = n * agents;
    b->item.rows = b->n;

    /* One probe instance tells the spaces, hence the buffer sizes. */
    void *probe;
    int rc = ro__env_create(kind, &probe, args, nargs, ro__seed_mix(seed, first, RO_STREAM_ENV),
                            first, err, errlen);
    if (rc != 0)
        return rc;
    if ((rc = probe_spaces(s, probe, lay, err, errlen)) != 0) {
        if (vt)
            vt->destroy(probe);
        else
            vt2->destroy(probe);
        return rc;
    }

    /* On the node of the worker that steps the shard (and the lane that
     * reads it), placed and touched now; else cache-line-aligned heap. */
    s->mem_node = mem_node;
    if (mem_node >= 0) {
        s->mem_bytes = layout(s, NULL);
        s->mem = ro__numa_alloc(s->mem_bytes, mem_node);
    } else {
        s->mem = ro__calloc_lines(1, layout(s, NULL));
    }
    if (!s->mem) {
        if (vt)
            vt->destroy(probe);
        else
            vt2->destroy(probe);
        snprintf(err, errlen, "out of memory creating envs %u..%u", first, first + n - 1);
        return RO_ENOMEM;
    }
    layout(s, s->mem);
    s->envs[0] = probe;
    for (uint32_t j = 0; j < n; j++) {
        uint64_t idx = (uint64_t)first + j;
        if (j > 0) {
            uint64_t es = ro__seed_mix(seed, idx, RO_STREAM_ENV);
            rc = ro__env_create(kind, &s->envs[j], args, nargs, es, (uint32_t)idx, err, errlen);
            if (rc != 0) {
                ro__env_shard_destroy(s);
                return rc;
            }
        }
        for (uint32_t a = 0; a < agents; a++)
            ro__rng_init(&b->act_rng[(size_t)j * agents + a],
                         ro__seed_mix(seed, idx * agents + a, RO_STREAM_ACTION));
    }
    atomic_init(&s->steps, 0);
    atomic_init(&s->episodes_pub, 0);
    atomic_init(&s->return_pub, 0.0);
    for (uint32_t m = 0; m < RO_ENV_MAX_METRICS; m++) {
        atomic_init(&s->metric_sum_pub[m], 0.0);
        atomic_init(&s->metric_count_pub[m], 0);
    }
    return 0;
}

int ro__env_shard_want_state(ro_env_shard_t *s, uint32_t floats)
{
    ro_step_batch_t *b = &s->xchg;
    free(b->rstate);
    b->rstate = floats ? ro__calloc_lines((size_t)b->n * floats, sizeof(float)) : NULL;
    b->state_floats = b->rstate ? floats : 0;
    return floats && !b->rstate ? RO_ENOMEM : 0;
}

void ro__env_shard_destroy(ro_env_shard_t *s)
{
    const uint32_t ne = s->xchg.agents ? s->xchg.n / s->xchg.agents : 0;
    if (s->envs)
        for (uint32_t j = 0; j < ne; j++)
            if (s->envs[j]) {
                if (s->vt)
                    s->vt->destroy(s->envs[j]);
                else
                    s->vt2->destroy(s->envs[j]);
            }
    if (s->mem_bytes)
        ro__numa_free(s->mem, s->mem_bytes);
    else
        free(s->mem);
    free(s->xchg.rstate);
    memset(s, 0, sizeof *s);
}
