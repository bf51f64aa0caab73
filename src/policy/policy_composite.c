/*
 * Acting with a composite action (env ABI 2, policy.h's
 * ro__policy_act_masked): MultiDiscrete and MultiBinary entries, Tuples,
 * masks. The head is split by the layout (spaces/layout.h): each discrete
 * entry a categorical over its slice of logits, masked values set to -inf
 * first (their softmax weight is then exactly 0, so the inverse CDF never
 * lands on them); each box float a Gaussian with its own std. A row's
 * draws come from that row's generator, part after part, whatever the
 * batch.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/logp.h"
#include "policy/policy.h"
#include "policy/policy_internal.h"

/* lanes rounds n up to the widest vector any kernel path reads. */
static uint32_t lanes(uint32_t n)
{
    return (n + RO_POLICY_MAX_LANES - 1) / RO_POLICY_MAX_LANES * RO_POLICY_MAX_LANES;
}

/* random_row draws one row's action uniformly: each discrete entry over its
 * allowed values (one draw), each box float in its range (one draw).
 * Returns the row's log-probability. */
static float random_row(const ro_policy_t *p, ro_rng_t *rng, const uint8_t *mask, int32_t *ai,
                        float *af)
{
    const ro_space_layout_t *lay = p->lay;
    double lp = 0.0;
    for (uint32_t i = 0; i < lay->nparts; i++) {
        const ro_part_layout_t *part = &lay->part[i];
        if (part->kind == RO_SPACE_BOX) {
            for (uint32_t k = part->first; k < part->first + part->n; k++) {
                const double lo = p->low[k], hi = p->high[k];
                float v = (float)(lo + (hi - lo) * ro__rng_double(rng));
                af[k] = v > p->high[k] ? p->high[k] : v; /* rounding may pass hi */
            }
            lp += ro__logp_uniform_box(p->low + part->first, p->high + part->first, part->n);
            continue;
        }
        for (uint32_t d = part->first; d < part->first + part->n; d++) {
            const uint32_t nv = lay->disc_n[d];
            const uint8_t *m = mask ? mask + lay->disc_mask[d] : NULL;
            uint32_t allowed = 0;
            for (uint32_t j = 0; j < nv; j++)
                allowed += !m || m[j];
            const double u = ro__rng_double(rng);
            if (allowed == 0) { /* the env actor never lets this through */
                ai[d] = 0;
                continue;
            }
            uint64_t pick = (uint64_t)(u * allowed);
            pick = pick < allowed ? pick : allowed - 1; /* u * n may round up to n */
            uint32_t j = 0;
            for (;; j++)
                if ((!m || m[j]) && pick-- == 0)
                    break;
            ai[d] = (int32_t)j;
            lp -= log((double)allowed);
        }
    }
    return (float)lp;
}

/* sample_entry draws discrete entry d for the n rows of a block from its
 * logits in head (masked first), adding each row's log-probability. */
static void sample_entry(const ro_policy_t *p, ro_policy_ws_t *ws, float *head, uint32_t n,
                         ro_rng_t *const *rngs, const uint8_t *mask, uint32_t d, int32_t *act_i,
                         float *logp)
{
    const ro_space_layout_t *lay = p->lay;
    const uint32_t nv = lay->disc_n[d], nl = lanes(n);
    float *z = head + (size_t)lay->disc_head[d] * RO_BLOCK;
    for (uint32_t s = 0; mask && s < n; s++) {
        const uint8_t *m = mask + (size_t)s * lay->mask_width + lay->disc_mask[d];
        for (uint32_t j = 0; j < nv; j++)
            if (!m[j])
                z[(size_t)j * RO_BLOCK + s] = -INFINITY;
    }
    double *u = ws->u[0];
    for (uint32_t s = 0; s < n; s++)
        u[s] = ro__rng_double(rngs[s]);
    for (uint32_t s = n; s < nl; s++)
        u[s] = 0.0;
    int32_t a[RO_BLOCK];
    p->kern->categorical(z, nv, n, u, a); /* z now holds the softmax weights */
    for (uint32_t s = 0; s < n; s++) {
        act_i[(size_t)s * lay->ndisc + d] = a[s];
        if (!logp)
            continue;
        double total = 0.0;
        for (uint32_t j = 0; j < nv; j++)
            total += z[(size_t)j * RO_BLOCK + s];
        logp[s] += logf((float)((double)z[(size_t)a[s] * RO_BLOCK + s] / total));
    }
}

/* sample_box draws box part `part` for the n rows of a block, as the ABI 1
 * box head does (two draws per float), with its stats. */
static void sample_box(const ro_policy_t *p, ro_policy_ws_t *ws, const float *head, uint32_t n,
                       ro_rng_t *const *rngs, const ro_part_layout_t *part, float *act_f,
                       float *logp, float *mean)
{
    const ro_space_layout_t *lay = p->lay;
    const uint32_t nl = lanes(n), nb = lay->nbox;
    double *u1 = ws->u[0], *u2 = ws->u[1];
    for (uint32_t s = n; s < nl; s++) {
        u1[s] = 1.0;
        u2[s] = 0.0;
    }
    for (uint32_t k = part->first; k < part->first + part->n; k++) {
        for (uint32_t s = 0; s < n; s++) {
            u1[s] = 1.0 - ro__rng_double(rngs[s]); /* in (0, 1]: log never sees 0 */
            u2[s] = ro__rng_double(rngs[s]);
        }
        const float *mu = head + (size_t)lay->box_head[k] * RO_BLOCK;
        p->kern->gaussian(mu, n, u1, u2, p->box_std[k], p->low[k], p->high[k], ws->col);
        for (uint32_t s = 0; s < n; s++) {
            act_f[(size_t)s * nb + k] = ws->col[s];
            if (mean)
                mean[(size_t)s * nb + k] = mu[s];
        }
    }
    const float *mu0 = head + (size_t)lay->box_head[part->first] * RO_BLOCK;
    for (uint32_t s = 0; logp && s < n; s++)
        logp[s] +=
            ro__logp_gaussian(mu0 + s, RO_BLOCK, act_f + (size_t)s * nb + part->first,
                              p->box_std + part->first, p->box_log_std + part->first, part->n);
}

void ro__policy_act_masked(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n,
                           ro_rng_t *const *rngs, const uint8_t *mask, int32_t *act_i, float *act_f,
                           const ro_act_stats_t *stats, const ro_policy_carry_t *carry)
{
    if (!p->composite) {
        ro__policy_act(p, ws, n, rngs, act_i, act_f, stats, carry);
        return;
    }
    ro__policy_check_call(p, ws, n);
    const ro_space_layout_t *lay = p->lay;
    float *logp = stats ? stats->logp : NULL, *mean = stats ? stats->mean : NULL;
    if (p->kind == RO_POLICY_RANDOM) {
        for (uint32_t i = 0; i < n; i++) {
            float lp = random_row(p, rngs[i], mask ? mask + (size_t)i * lay->mask_width : NULL,
                                  act_i + (size_t)i * lay->ndisc, act_f + (size_t)i * lay->nbox);
            if (logp)
                logp[i] = lp;
        }
        return;
    }
    for (uint32_t i0 = 0, bn; i0 < n; i0 += bn) {
        float *head = ro__policy_forward_block(p, ws, n, i0, carry, &bn);
        float *lp = logp ? logp + i0 : NULL;
        if (lp)
            memset(lp, 0, bn * sizeof *lp);
        const uint8_t *m = mask ? mask + (size_t)i0 * lay->mask_width : NULL;
        for (uint32_t i = 0; i < lay->nparts; i++) {
            const ro_part_layout_t *part = &lay->part[i];
            if (part->kind == RO_SPACE_BOX) {
                sample_box(p, ws, head, bn, rngs + i0, part, act_f + (size_t)i0 * lay->nbox, lp,
                           mean ? mean + (size_t)i0 * lay->nbox : NULL);
                continue;
            }
            for (uint32_t d = part->first; d < part->first + part->n; d++)
                sample_entry(p, ws, head, bn, rngs + i0, m, d, act_i + (size_t)i0 * lay->ndisc, lp);
        }
    }
}
