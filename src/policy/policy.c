#include "policy/policy.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/activation.h"
#include "runtime/error.h"
#include "runtime/numa_mem.h"
#include "policy/params.h"

/*
 * Rows go through all the layers a block at a time: a block's activations
 * (2 x 48 rows x 64 floats = 24 KiB for 64-wide layers) stay in L1 between
 * one layer and the next and the scratch does not grow with the batch. 48
 * is a multiple of the dense kernel's 6-row block, so only the last block
 * of a batch has a ragged end.
 */
#define BLOCK_ROWS 48

/* Buffers the vector kernels read are aligned to a cache line. */
#define ALIGN 64

struct ro_policy {
    ro_policy_kind_t kind;
    ro_space_kind_t act_kind;
    uint32_t obs_dim;
    uint32_t act_dim; /* floats per action: 1 for discrete */
    uint32_t nout;    /* discrete: number of actions; box: act_dim */

    /* MLP only. params is the PyTorch-layout copy that save writes; dense
     * the same weights in the kernel's layout. */
    ro_policy_params_t params;
    uint32_t nlayers;
    ro_dense_t dense[RO_POLICY_MAX_HIDDEN + 1];
    uint32_t max_ldw; /* widest layer output, padded */
    float *std;       /* box head: exp(log_std) */
    char *path;       /* the weights file, or NULL for seeded init */
    void *kmem;       /* dense weights and biases */
    ro_gemm_t gemm;   /* which kernel computes the dense layers */

    /* Box actions: MLP clip bounds, or the random policy's sampling range
     * (infinite bounds replaced, see random_range). */
    float *low;
    float *high;
};

struct ro_policy_ws {
    const ro_policy_t *p;
    uint32_t max_batch;
    float *in;    /* [max_batch x obs_dim] */
    float *h[2];  /* [BLOCK_ROWS x max_ldw] each, layer outputs in turn */
    float *probs; /* [nout] softmax weights of one row */
    void *hmem;
    size_t in_bytes, hmem_bytes; /* sizes of in and hmem */
    bool on_node;                /* in and hmem are NUMA blocks (ro__numa_alloc) */
};

static void *alloc_aligned(size_t bytes)
{
    void *ptr = NULL;
    if (posix_memalign(&ptr, ALIGN, bytes ? bytes : ALIGN) != 0)
        return NULL;
    return ptr;
}

static uint32_t pad(uint32_t n)
{
    return (n + RO_DENSE_PAD - 1) / RO_DENSE_PAD * RO_DENSE_PAD;
}

/* check_spaces validates what every policy kind needs of the env. */
static int check_spaces(const ro_space_t *obs, const ro_space_t *act, char *err, size_t errlen)
{
    if (obs->kind != RO_SPACE_BOX)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: the observation space must be a box");
    if (obs->ndim < 1 || obs->ndim > RO_SPACE_MAX_DIMS || ro_space_size(obs) == 0 ||
        ro_space_size(obs) > UINT32_MAX)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: the observation box has a bad shape");
    if (act->kind == RO_SPACE_DISCRETE) {
        if (act->n == 0 || act->n > INT32_MAX)
            return ro__errorf(err, errlen, RO_EINVAL, "policy: %u discrete actions; expected 1..%d",
                              act->n, INT32_MAX);
        return 0;
    }
    if (act->kind != RO_SPACE_BOX)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "policy: the action space must be discrete or a box");
    if (act->ndim < 1 || act->ndim > RO_SPACE_MAX_DIMS || ro_space_size(act) == 0 ||
        ro_space_size(act) > RO_POLICY_MAX_WIDTH)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: the action box has a bad shape");
    if (!act->low || !act->high)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: the action box has no bounds");
    for (size_t j = 0; j < ro_space_size(act); j++)
        if (!(act->low[j] <= act->high[j])) /* also catches NaN */
            return ro__errorf(err, errlen, RO_EINVAL,
                              "policy: action bounds low[%zu] = %g, high[%zu] = %g are not a range",
                              j, (double)act->low[j], j, (double)act->high[j]);
    return 0;
}

/* check_spec validates the fields of spec a seeded MLP uses. */
static int check_spec(const ro_policy_spec_t *spec, char *err, size_t errlen)
{
    if (spec->nhidden < 1 || spec->nhidden > RO_POLICY_MAX_HIDDEN)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: %u hidden layers; expected 1..%d",
                          spec->nhidden, RO_POLICY_MAX_HIDDEN);
    for (uint32_t l = 0; l < spec->nhidden; l++)
        if (spec->hidden[l] < 1 || spec->hidden[l] > RO_POLICY_MAX_WIDTH)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "policy: hidden layer %u is %u wide; expected 1..%u", l,
                              spec->hidden[l], RO_POLICY_MAX_WIDTH);
    if (spec->activation != RO_ACT_TANH && spec->activation != RO_ACT_RELU)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: unknown activation %d",
                          (int)spec->activation);
    return 0;
}

/*
 * init_params fills pp with seeded weights: layer l draws from its own
 * stream ro__seed_mix(seed, l, RO_STREAM_INIT), weights row by row then
 * biases, uniform in +-1/sqrt(in) (nn.Linear's default). The head's
 * weights are scaled by 0.01 and its bias is 0, so the first actions are
 * close to uniform (discrete) or to N(0, 1) (box); log_std starts at 0.
 */
static int init_params(ro_policy_params_t *pp, const ro_policy_spec_t *spec, uint32_t obs_dim,
                       ro_space_kind_t kind, uint32_t nout)
{
    memset(pp, 0, sizeof *pp);
    pp->activation = spec->activation;
    pp->obs_dim = obs_dim;
    pp->action_kind = kind;
    pp->action_dim = nout;
    pp->nlayers = spec->nhidden + 1;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        pp->layers[l].in = l ? spec->hidden[l - 1] : obs_dim;
        pp->layers[l].out = l < spec->nhidden ? spec->hidden[l] : nout;
    }
    if (ro__policy_params_alloc(pp) < 0)
        return RO_ENOMEM;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        ro_policy_layer_t *L = &pp->layers[l];
        const int head = l == spec->nhidden;
        ro_rng_t rng;
        ro__rng_init(&rng, ro__seed_mix(spec->seed, l, RO_STREAM_INIT));
        const double bound = 1.0 / sqrt((double)L->in);
        const double scale = head ? 0.01 : 1.0;
        for (size_t i = 0; i < (size_t)L->out * L->in; i++)
            L->weight[i] = (float)(scale * ro__rng_uniform(&rng, -bound, bound));
        for (uint32_t j = 0; j < L->out; j++)
            L->bias[j] = head ? 0.0f : (float)ro__rng_uniform(&rng, -bound, bound);
    }
    if (pp->log_std)
        memset(pp->log_std, 0, pp->action_dim * sizeof(float));
    return 0;
}

/* build_kernels lays the weights of p->params out for ro__dense: each
 * layer transposed to [in x ldw] with zero padding columns. */
static int build_kernels(ro_policy_t *p)
{
    const ro_policy_params_t *pp = &p->params;
    size_t total = 0;
    for (uint32_t l = 0; l < pp->nlayers; l++)
        total += ((size_t)pp->layers[l].in + 1) * pad(pp->layers[l].out);
    float *mem = alloc_aligned(total * sizeof(float));
    if (!mem)
        return RO_ENOMEM;
    p->kmem = mem;
    p->nlayers = pp->nlayers;
    p->max_ldw = 0;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        const ro_policy_layer_t *L = &pp->layers[l];
        const uint32_t ldw = pad(L->out);
        float *wt = mem, *b = mem + (size_t)L->in * ldw;
        mem = b + ldw; /* in * ldw and ldw are multiples of 8 floats: stays aligned */
        memset(wt, 0, ((size_t)L->in + 1) * ldw * sizeof(float));
        for (uint32_t j = 0; j < L->out; j++) {
            for (uint32_t k = 0; k < L->in; k++)
                wt[(size_t)k * ldw + j] = L->weight[(size_t)j * L->in + k];
            b[j] = L->bias[j];
        }
        p->dense[l] = (ro_dense_t){.in = L->in, .out = L->out, .ldw = ldw, .wt = wt, .bias = b};
        if (ldw > p->max_ldw)
            p->max_ldw = ldw;
    }
    return 0;
}

/*
 * random_range gives the random policy's sampling range for one box
 * dimension: the bounds, with an infinite one replaced by -1 or +1; if that
 * leaves an empty range (e.g. [5, inf)), the infinite side is put 2 away
 * from the finite one instead.
 */
static void random_range(float lo, float hi, float *rlo, float *rhi)
{
    if (isinf(lo) && isinf(hi)) {
        lo = -1.0f;
        hi = 1.0f;
    } else if (isinf(lo)) {
        lo = hi > -1.0f ? -1.0f : hi - 2.0f;
    } else if (isinf(hi)) {
        hi = lo < 1.0f ? 1.0f : lo + 2.0f;
    }
    *rlo = lo;
    *rhi = hi;
}

/* build_bounds copies the action bounds a box policy needs. */
static int build_bounds(ro_policy_t *p, const ro_space_t *act)
{
    p->low = malloc(2 * (size_t)p->act_dim * sizeof(float));
    if (!p->low)
        return RO_ENOMEM;
    p->high = p->low + p->act_dim;
    for (uint32_t j = 0; j < p->act_dim; j++) {
        if (p->kind == RO_POLICY_RANDOM) {
            random_range(act->low[j], act->high[j], &p->low[j], &p->high[j]);
        } else {
            p->low[j] = act->low[j];
            p->high[j] = act->high[j];
        }
    }
    return 0;
}

/* finish_policy builds what every policy derives from its weights and
 * spaces: the kernels' layout, the Gaussian std, the box bounds. */
static int finish_policy(ro_policy_t *p, const ro_space_t *act, char *err, size_t errlen)
{
    if (p->kind == RO_POLICY_MLP) {
        if (build_kernels(p) < 0)
            return ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory for the weights");
        if (act->kind == RO_SPACE_BOX) {
            p->std = malloc(p->nout * sizeof(float));
            if (!p->std)
                return ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory");
            for (uint32_t j = 0; j < p->nout; j++)
                p->std[j] = expf(p->params.log_std[j]);
        }
    }
    if (act->kind == RO_SPACE_BOX && build_bounds(p, act) < 0)
        return ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory");
    return 0;
}

int ro__policy_new(ro_policy_t **out, const ro_policy_spec_t *spec, const ro_space_t *obs,
                   const ro_space_t *act, char *err, size_t errlen)
{
    *out = NULL;
    if (spec->kind != RO_POLICY_RANDOM && spec->kind != RO_POLICY_MLP)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: unknown kind %d", (int)spec->kind);
    int rc = check_spaces(obs, act, err, errlen);
    if (rc < 0)
        return rc;
    const int loaded = spec->kind == RO_POLICY_MLP && spec->params_path;
    if (spec->kind == RO_POLICY_MLP && !loaded && (rc = check_spec(spec, err, errlen)) < 0)
        return rc;

    ro_policy_t *p = calloc(1, sizeof *p);
    if (!p)
        return RO_ENOMEM;
    p->kind = spec->kind;
    p->gemm = spec->gemm;
    p->act_kind = act->kind;
    p->obs_dim = (uint32_t)ro_space_size(obs);
    p->act_dim = (uint32_t)ro_space_size(act);
    p->nout = act->kind == RO_SPACE_DISCRETE ? act->n : p->act_dim;

    if (loaded) {
        rc = ro__policy_params_load(&p->params, spec->params_path, obs, act, err, errlen);
        if (rc < 0)
            goto fail;
        p->path = strdup(spec->params_path);
        if (!p->path) {
            rc = ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory");
            goto fail;
        }
    } else if (spec->kind == RO_POLICY_MLP) {
        if (p->nout > RO_POLICY_MAX_WIDTH) {
            rc = ro__errorf(err, errlen, RO_EINVAL,
                            "policy: %u discrete actions; an MLP head takes %u", p->nout,
                            RO_POLICY_MAX_WIDTH);
            goto fail;
        }
        if (init_params(&p->params, spec, p->obs_dim, act->kind, p->nout) < 0) {
            rc = ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory for the weights");
            goto fail;
        }
    }
    if ((rc = finish_policy(p, act, err, errlen)) < 0)
        goto fail;
    *out = p;
    return 0;

fail:
    ro__policy_free(p);
    return rc;
}

int ro__policy_new_from_params(ro_policy_t **out, ro_policy_params_t *pp, ro_gemm_t gemm,
                               const ro_space_t *obs, const ro_space_t *act, const char *label,
                               char *err, size_t errlen)
{
    *out = NULL;
    int rc = check_spaces(obs, act, err, errlen);
    if (rc == 0)
        rc = ro__policy_params_check_spaces(pp, obs, act, label, err, errlen);
    if (rc < 0)
        return rc;
    ro_policy_t *p = calloc(1, sizeof *p);
    if (!p)
        return RO_ENOMEM;
    p->kind = RO_POLICY_MLP;
    p->gemm = gemm;
    p->act_kind = act->kind;
    p->obs_dim = (uint32_t)ro_space_size(obs);
    p->act_dim = (uint32_t)ro_space_size(act);
    p->nout = act->kind == RO_SPACE_DISCRETE ? act->n : p->act_dim;
    p->params = *pp; /* the weights move in */
    memset(pp, 0, sizeof *pp);
    p->path = strdup(label);
    if (!p->path)
        rc = ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory");
    if (rc < 0 || (rc = finish_policy(p, act, err, errlen)) < 0) {
        ro__policy_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void ro__policy_free(ro_policy_t *p)
{
    if (!p)
        return;
    ro__policy_params_free(&p->params);
    free(p->kmem);
    free(p->std);
    free(p->path);
    free(p->low);
    free(p);
}

/* append adds formatted text at *pos in buf, keeping it NUL-terminated and
 * *pos within len when the text does not fit. */
__attribute__((format(printf, 4, 5))) static void append(char *buf, size_t len, size_t *pos,
                                                         const char *fmt, ...)
{
    if (*pos >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *pos, len - *pos, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *pos)
        *pos = len;
    else
        *pos += (size_t)n;
}

void ro__policy_describe(const ro_policy_t *p, char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = 0;
    size_t pos = 0;
    if (p->kind == RO_POLICY_RANDOM) {
        append(buf, len, &pos, "random");
        return;
    }
    append(buf, len, &pos, "mlp(");
    if (p->path)
        append(buf, len, &pos, "file:%s,", p->path);
    for (uint32_t l = 0; l + 1 < p->nlayers; l++)
        append(buf, len, &pos, "%u,", p->dense[l].out);
    append(buf, len, &pos, "%s%s)", p->params.activation == RO_ACT_RELU ? "relu" : "tanh",
           p->gemm == RO_GEMM_BLAS ? ",openblas" : "");
}

uint32_t ro__policy_obs_dim(const ro_policy_t *p)
{
    return p->obs_dim;
}

uint32_t ro__policy_act_dim(const ro_policy_t *p)
{
    return p->act_kind == RO_SPACE_DISCRETE ? 1 : p->act_dim;
}

uint64_t ro__policy_version(const ro_policy_t *p)
{
    return p->params.version; /* zeroed for a random or seeded policy */
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
    /* A random policy has no layers: max_ldw is 0 and only probs is
     * unused space. */
    const size_t hsize = (size_t)BLOCK_ROWS * p->max_ldw;
    const size_t psize = p->kind == RO_POLICY_MLP ? pad(p->nout) : 0;
    const size_t hmem_bytes = (2 * hsize + psize) * sizeof(float);
    if (mem_node >= 0) {
        /* The lane's worker's node: page blocks, placed and touched now. */
        ws->on_node = true;
        ws->in_bytes = in_bytes;
        ws->hmem_bytes = hmem_bytes;
        ws->in = ro__numa_alloc(in_bytes, mem_node);
        ws->hmem = ro__numa_alloc(hmem_bytes, mem_node);
    } else {
        ws->in = alloc_aligned(in_bytes);
        ws->hmem = alloc_aligned(hmem_bytes);
    }
    if (!ws->in || !ws->hmem) {
        ro__policy_ws_free(ws);
        return RO_ENOMEM;
    }
    ws->h[0] = ws->hmem;
    ws->h[1] = ws->h[0] + hsize;
    ws->probs = ws->h[1] + hsize;
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

/* dense_blas computes the same layer as ro__dense with OpenBLAS: y = bias,
 * then y += x wt in one sgemm ([n x in] times [in x ldw]). */
static void dense_blas(const ro_dense_t *d, const float *x, size_t ldx, uint32_t n, float *y)
{
    for (uint32_t i = 0; i < n; i++)
        memcpy(y + (size_t)i * d->ldw, d->bias, d->ldw * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)d->ldw, (int)d->in, 1.0f, x,
                (int)ldx, d->wt, (int)d->ldw, 1.0f, y, (int)d->ldw);
}

/* forward_block runs the n <= BLOCK_ROWS input rows at x through the MLP
 * and returns the head outputs, rows of stride dense[nlayers-1].ldw. */
static const float *forward_block(const ro_policy_t *p, ro_policy_ws_t *ws, const float *x,
                                  uint32_t n)
{
    size_t ldx = p->obs_dim;
    for (uint32_t l = 0; l < p->nlayers; l++) {
        const ro_dense_t *d = &p->dense[l];
        float *y = ws->h[l & 1];
        if (p->gemm == RO_GEMM_BLAS)
            dense_blas(d, x, ldx, n, y);
        else
            ro__dense(d, x, ldx, n, y, d->ldw);
        if (l + 1 < p->nlayers) {
            if (p->params.activation == RO_ACT_RELU)
                ro__act_relu(y, (size_t)n * d->ldw);
            else
                ro__act_tanh(y, (size_t)n * d->ldw);
        }
        x = y;
        ldx = d->ldw;
    }
    return x;
}

static void check_call(const ro_policy_t *p, const ro_policy_ws_t *ws, uint32_t n)
{
    /* Programmer errors: the scratch is for another policy, or too small. */
    if (ws->p != p || n > ws->max_batch) {
        fprintf(stderr, "ro__policy: workspace misuse (n=%u, max_batch=%u)\n", n, ws->max_batch);
        abort();
    }
}

void ro__policy_forward(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, float *out)
{
    check_call(p, ws, n);
    if (p->kind != RO_POLICY_MLP) {
        fprintf(stderr, "ro__policy_forward: not an MLP policy\n");
        abort();
    }
    for (uint32_t i0 = 0; i0 < n; i0 += BLOCK_ROWS) {
        const uint32_t bn = n - i0 < BLOCK_ROWS ? n - i0 : BLOCK_ROWS;
        const float *head = forward_block(p, ws, ws->in + (size_t)i0 * p->obs_dim, bn);
        const uint32_t ld = p->dense[p->nlayers - 1].ldw;
        for (uint32_t i = 0; i < bn; i++)
            memcpy(out + (size_t)(i0 + i) * p->nout, head + (size_t)i * ld,
                   p->nout * sizeof(float));
    }
}

/*
 * sample_categorical draws from softmax(z[0..n)) with one uniform draw:
 * the weights exp(z - max z) (at most 1, so no overflow) are summed, and
 * u * sum is located in their running sum. The running sum is the same
 * double additions in the same order as the total, but u * total may still
 * round up to the total: then (and for NaN logits) the last index with a
 * positive weight, or 0, is taken, so the result is always in [0, n).
 */
static int32_t sample_categorical(const float *z, uint32_t n, float *w, ro_rng_t *rng)
{
    float m = z[0];
    for (uint32_t j = 1; j < n; j++)
        m = z[j] > m ? z[j] : m;
    double total = 0.0;
    for (uint32_t j = 0; j < n; j++) {
        w[j] = expf(z[j] - m);
        total += w[j];
    }
    const double target = ro__rng_double(rng) * total;
    double acc = 0.0;
    int32_t last = 0;
    for (uint32_t j = 0; j < n; j++) {
        acc += w[j];
        if (target < acc)
            return (int32_t)j;
        if (w[j] > 0.0f)
            last = (int32_t)j;
    }
    return last;
}

/* sample_gaussian draws mean + std * N(0, 1) per dimension (one normal
 * each), clipped to the bounds. A NaN mean gives a NaN action. */
static void sample_gaussian(const ro_policy_t *p, const float *mean, ro_rng_t *rng, float *a)
{
    for (uint32_t j = 0; j < p->act_dim; j++) {
        float v = (float)((double)mean[j] + (double)p->std[j] * ro__rng_normal(rng));
        v = v < p->low[j] ? p->low[j] : v;
        v = v > p->high[j] ? p->high[j] : v;
        a[j] = v;
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

void ro__policy_act(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, ro_rng_t *const *rngs,
                    int32_t *act_i, float *act_f)
{
    check_call(p, ws, n);
    if (p->kind == RO_POLICY_RANDOM) {
        for (uint32_t i = 0; i < n; i++)
            sample_random(p, rngs[i], act_i ? act_i + i : NULL,
                          act_f ? act_f + (size_t)i * p->act_dim : NULL);
        return;
    }
    const uint32_t ld = p->dense[p->nlayers - 1].ldw;
    for (uint32_t i0 = 0; i0 < n; i0 += BLOCK_ROWS) {
        const uint32_t bn = n - i0 < BLOCK_ROWS ? n - i0 : BLOCK_ROWS;
        const float *head = forward_block(p, ws, ws->in + (size_t)i0 * p->obs_dim, bn);
        for (uint32_t i = 0; i < bn; i++) {
            const float *z = head + (size_t)i * ld;
            if (p->act_kind == RO_SPACE_DISCRETE)
                act_i[i0 + i] = sample_categorical(z, p->nout, ws->probs, rngs[i0 + i]);
            else
                sample_gaussian(p, z, rngs[i0 + i], act_f + (size_t)(i0 + i) * p->act_dim);
        }
    }
}

int ro__policy_save(const ro_policy_t *p, const char *path, char *err, size_t errlen)
{
    if (p->kind != RO_POLICY_MLP)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: a random policy has no weights to save");
    return ro__policy_params_save(&p->params, path, err, errlen);
}
