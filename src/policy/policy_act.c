/*
 * Running a policy: the lane's scratch, the forward pass a block of rows at
 * a time, and one sampled action per row. The arithmetic is the kernels'
 * (kernels.h); this file moves rows in and out of blocks and takes each
 * row's random numbers from that row's own generator.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/logp.h"
#include "policy/policy.h"
#include "policy/policy_internal.h"
#include "runtime/error.h"
#include "runtime/numa_mem.h"

void *ro__policy_alloc_aligned(size_t bytes)
{
    void *ptr = NULL;
    if (posix_memalign(&ptr, RO_POLICY_ALIGN, bytes ? bytes : RO_POLICY_ALIGN) != 0)
        return NULL;
    return ptr;
}

int ro__policy_ws_new(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch)
{
    return ro__policy_ws_new_on(out, p, max_batch, -1);
}

int ro__policy_ws_new_on(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch,
                         int mem_node)
{
    *out = NULL;
    if (max_batch == 0)
        return RO_EINVAL;
    ro_policy_ws_t *ws = calloc(1, sizeof *ws);
    if (!ws)
        return RO_ENOMEM;
    ws->p = p;
    ws->max_batch = max_batch;
    if (p->obs_dim > SIZE_MAX / sizeof(float) / max_batch) {
        free(ws);
        return RO_ENOMEM;
    }
    const size_t in_bytes = (size_t)max_batch * p->obs_dim * sizeof(float);
    /* Block buffers, each a whole number of 64-byte lines (RO_BLOCK floats
     * are 256 bytes). A random policy uses none of them but the draws. */
    const size_t xt = (size_t)p->obs_dim * RO_BLOCK, h = (size_t)p->max_out * RO_BLOCK;
    /* A cell's: its states in, the gates' two sides, an LSTM's new c. */
    const size_t st = (size_t)ro__policy_state_floats(p) * RO_BLOCK,
                 g = (size_t)ro_cell_gates(p->cell) * p->hid * RO_BLOCK,
                 cout = p->cell == RO_CELL_LSTM ? (size_t)p->hid * RO_BLOCK : 0;
    const size_t cell = p->cell ? st + 2 * g + cout : 0;
    const size_t hmem_bytes =
        (xt + 2 * h + RO_BLOCK + cell) * sizeof(float) + 2 * RO_BLOCK * sizeof(double);
    if (mem_node >= 0) {
        /* The lane's worker's node: page blocks, placed and touched now. */
        ws->on_node = true;
        ws->in_bytes = in_bytes;
        ws->hmem_bytes = hmem_bytes;
        ws->in = ro__numa_alloc(in_bytes, mem_node);
        ws->hmem = ro__numa_alloc(hmem_bytes, mem_node);
    } else {
        ws->in = ro__policy_alloc_aligned(in_bytes);
        ws->hmem = ro__policy_alloc_aligned(hmem_bytes);
    }
    if (!ws->in || !ws->hmem) {
        ro__policy_ws_free(ws);
        return RO_ENOMEM;
    }
    ws->u[0] = ws->hmem;
    ws->u[1] = ws->u[0] + RO_BLOCK;
    ws->xt = (float *)(ws->u[1] + RO_BLOCK);
    ws->h[0] = ws->xt + xt;
    ws->h[1] = ws->h[0] + h;
    ws->col = ws->h[1] + h;
    if (p->cell) {
        ws->st = ws->col + RO_BLOCK;
        ws->gi = ws->st + st;
        ws->gh = ws->gi + g;
        ws->cout = cout ? ws->gh + g : NULL;
    }
    *out = ws;
    return 0;
}

void ro__policy_ws_free(ro_policy_ws_t *ws)
{
    if (!ws)
        return;
    if (ws->on_node) {
        ro__numa_free(ws->in, ws->in_bytes);
        ro__numa_free(ws->hmem, ws->hmem_bytes);
    } else {
        free(ws->in);
        free(ws->hmem);
    }
    free(ws);
}

float *ro__policy_ws_input(ro_policy_ws_t *ws)
{
    return ws->in;
}

/* lanes returns n rounded up to the widest vector any path reads. */
static uint32_t lanes(uint32_t n)
{
    return (n + RO_POLICY_MAX_LANES - 1) / RO_POLICY_MAX_LANES * RO_POLICY_MAX_LANES;
}

/* dense_blas computes layer l as the kernels do, but with OpenBLAS: y =
 * bias, then y += W x in one sgemm ([out x in] times [in x lanes]), then the
 * activation. Its sums are in OpenBLAS's order, so a row's result depends
 * on the batch (--gemm openblas, policy.h). */
static void dense_blas(const ro_policy_t *p, uint32_t l, const float *x, uint32_t n, float *y,
                       ro_activation_t act)
{
    const ro_dense_t *d = &p->dense[l];
    const uint32_t nl = lanes(n);
    for (uint32_t j = 0; j < d->out; j++)
        for (uint32_t s = 0; s < nl; s++)
            y[(size_t)j * RO_BLOCK + s] = d->bias[j];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d->out, (int)nl, (int)d->in, 1.0f,
                p->params.layers[l].weight, (int)d->in, x, RO_BLOCK, 1.0f, y, RO_BLOCK);
    if (act)
        for (uint32_t j = 0; j < d->out; j++)
            p->kern->act(y + (size_t)j * RO_BLOCK, nl, act);
}

/* ro__policy_forward_block runs rows i0 .. i0 + *bn - 1 of ws->in
 * (row-major, obs_dim floats each; *bn = min(RO_BLOCK, n - i0)) through
 * the MLP and returns the head's outputs, a block [nout][RO_BLOCK] in the
 * scratch. */
float *ro__policy_forward_block(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t call_n,
                                uint32_t i0, const ro_policy_carry_t *carry, uint32_t *bn)
{
    const uint32_t n = call_n - i0 < RO_BLOCK ? call_n - i0 : RO_BLOCK;
    const float *rows = ws->in + (size_t)i0 * p->obs_dim;
    *bn = n;
    /* Transposed into the block, the lanes past n zeroed: they are
     * computed too (whole vectors), and must hold numbers. */
    const uint32_t od = p->obs_dim, nl = lanes(n);
    for (uint32_t k = 0; k < od; k++) {
        float *xk = ws->xt + (size_t)k * RO_BLOCK;
        for (uint32_t s = 0; s < n; s++)
            xk[s] = rows[(size_t)s * od + k];
        for (uint32_t s = n; s < nl; s++)
            xk[s] = 0.0f;
    }
    const float *x = ws->xt;
    float *y = NULL;
    for (uint32_t l = 0; l < p->nlayers; l++) {
        const ro_activation_t act = l + 1 < p->nlayers ? p->params.activation : 0;
        y = ws->h[l & 1];
        if (p->cell && l == p->cell_at)
            ro__policy_cell_block(p, ws, x, y, n, carry, i0);
        else if (p->gemm == RO_GEMM_BLAS)
            dense_blas(p, l, x, n, y, act);
        else
            p->kern->dense(&p->dense[l], x, y, n, act);
        x = y;
    }
    return y;
}

void ro__policy_check_call(const ro_policy_t *p, const ro_policy_ws_t *ws, uint32_t n)
{
    /* Programmer errors: the scratch is for another policy, or too small. */
    if (ws->p != p || n > ws->max_batch) {
        fprintf(stderr, "ro__policy: workspace misuse (n=%u, max_batch=%u)\n", n, ws->max_batch);
        abort();
    }
}

void ro__policy_forward(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, float *out,
                        const ro_policy_carry_t *carry)
{
    ro__policy_check_call(p, ws, n);
    if (p->kind != RO_POLICY_MLP) {
        fprintf(stderr, "ro__policy_forward: not an MLP policy\n");
        abort();
    }
    for (uint32_t i0 = 0, bn; i0 < n; i0 += bn) {
        const float *head = ro__policy_forward_block(p, ws, n, i0, carry, &bn);
        for (uint32_t s = 0; s < bn; s++)
            for (uint32_t j = 0; j < p->nout; j++)
                out[(size_t)(i0 + s) * p->nout + j] = head[(size_t)j * RO_BLOCK + s];
    }
}

/* sample_random draws a uniform action: one draw per row (discrete) or per
 * dimension (box). */
static void sample_random(const ro_policy_t *p, ro_rng_t *rng, int32_t *ai, float *af)
{
    if (p->act_kind == RO_SPACE_DISCRETE) {
        uint64_t k = (uint64_t)(ro__rng_double(rng) * p->nout);
        *ai = (int32_t)(k < p->nout ? k : p->nout - 1); /* u * n may round up to n */
        return;
    }
    for (uint32_t j = 0; j < p->act_dim; j++) {
        const double lo = p->low[j], hi = p->high[j];
        float v = (float)(lo + (hi - lo) * ro__rng_double(rng));
        af[j] = v > p->high[j] ? p->high[j] : v; /* rounding to float may pass hi */
    }
}

/*
 * sample_block draws the actions of the n rows of a block from the head's
 * outputs. Row s draws only from rngs[s], a fixed count whatever the batch:
 * one uniform (discrete), or two per action dimension (box: Box-Muller's
 * u1 = 1 - u, then u2, dimension after dimension). The kernels then work on
 * the block's draws together.
 */
static void sample_block(const ro_policy_t *p, ro_policy_ws_t *ws, float *head, uint32_t n,
                         ro_rng_t *const *rngs, int32_t *act_i, float *act_f)
{
    const uint32_t nl = lanes(n);
    double *u1 = ws->u[0], *u2 = ws->u[1];
    if (p->act_kind == RO_SPACE_DISCRETE) {
        for (uint32_t s = 0; s < n; s++)
            u1[s] = ro__rng_double(rngs[s]);
        for (uint32_t s = n; s < nl; s++)
            u1[s] = 0.0;
        p->kern->categorical(head, p->nout, n, u1, act_i);
        return;
    }
    for (uint32_t s = n; s < nl; s++) {
        u1[s] = 1.0;
        u2[s] = 0.0;
    }
    for (uint32_t j = 0; j < p->act_dim; j++) {
        for (uint32_t s = 0; s < n; s++) {
            u1[s] = 1.0 - ro__rng_double(rngs[s]); /* in (0, 1]: log never sees 0 */
            u2[s] = ro__rng_double(rngs[s]);
        }
        p->kern->gaussian(head + (size_t)j * RO_BLOCK, n, u1, u2, p->std[j], p->low[j], p->high[j],
                          ws->col);
        for (uint32_t s = 0; s < n; s++)
            act_f[(size_t)s * p->act_dim + j] = ws->col[s];
    }
}

/*
 * block_stats tells stream learners about a sampled block (ro_act_stats_t),
 * from the head as sampling left it: a discrete head holds the softmax
 * weights exp(z - max z), so log p(a) = log w_a - log sum w; a box head
 * still holds the Gaussian's means.
 */
static void block_stats(const ro_policy_t *p, const float *head, uint32_t n, const int32_t *act_i,
                        const float *act_f, float *logp, float *mean)
{
    for (uint32_t s = 0; s < n; s++) {
        if (p->act_kind == RO_SPACE_DISCRETE) {
            double total = 0.0;
            for (uint32_t j = 0; j < p->nout; j++)
                total += head[(size_t)j * RO_BLOCK + s];
            /* One float log a row: two double ones were a tenth of a
             * stream node's CPU (perf), for no precision a learner uses. */
            if (logp)
                logp[s] = logf((float)((double)head[(size_t)act_i[s] * RO_BLOCK + s] / total));
            continue;
        }
        if (logp)
            logp[s] = ro__logp_gaussian(head + s, RO_BLOCK, act_f + (size_t)s * p->act_dim, p->std,
                                        p->params.log_std, p->act_dim);
        for (uint32_t j = 0; mean && j < p->act_dim; j++)
            mean[(size_t)s * p->act_dim + j] = head[(size_t)j * RO_BLOCK + s];
    }
}

const float *ro__policy_log_std(const ro_policy_t *p)
{
    return p->kind == RO_POLICY_MLP && p->act_kind == RO_SPACE_BOX ? p->params.log_std : NULL;
}

void ro__policy_act(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, ro_rng_t *const *rngs,
                    int32_t *act_i, float *act_f, const ro_act_stats_t *stats,
                    const ro_policy_carry_t *carry)
{
    ro__policy_check_call(p, ws, n);
    float *logp = stats ? stats->logp : NULL, *mean = stats ? stats->mean : NULL;
    if (p->kind == RO_POLICY_RANDOM) {
        for (uint32_t i = 0; i < n; i++)
            sample_random(p, rngs[i], act_i ? act_i + i : NULL,
                          act_f ? act_f + (size_t)i * p->act_dim : NULL);
        float lp = p->act_kind == RO_SPACE_DISCRETE
                       ? ro__logp_uniform_discrete(p->nout)
                       : ro__logp_uniform_box(p->low, p->high, p->act_dim);
        for (uint32_t i = 0; logp && i < n; i++)
            logp[i] = lp;
        return;
    }
    for (uint32_t i0 = 0, bn; i0 < n; i0 += bn) {
        float *head = ro__policy_forward_block(p, ws, n, i0, carry, &bn);
        int32_t *ai = act_i ? act_i + i0 : NULL;
        float *af = act_f ? act_f + (size_t)i0 * p->act_dim : NULL;
        sample_block(p, ws, head, bn, rngs + i0, ai, af);
        if (logp || mean)
            block_stats(p, head, bn, ai, af, logp ? logp + i0 : NULL,
                        mean ? mean + (size_t)i0 * p->act_dim : NULL);
    }
}
