#include "policy/policy.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/params.h"
#include "policy/policy_internal.h"
#include "runtime/error.h"

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
    if (spec->cell != RO_CELL_NONE && spec->cell != RO_CELL_GRU && spec->cell != RO_CELL_LSTM)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: unknown recurrent cell %d",
                          (int)spec->cell);
    if (spec->cell && spec->nhidden == RO_POLICY_MAX_HIDDEN)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "policy: %u hidden layers and a recurrent cell; the cell takes a layer's "
                          "place, so at most %d hidden layers",
                          spec->nhidden, RO_POLICY_MAX_HIDDEN - 1);
    if (spec->cell && (spec->cell_hidden < 1 || spec->cell_hidden > RO_CELL_MAX))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "policy: a recurrent cell of %u units; expected 1..%u", spec->cell_hidden,
                          RO_CELL_MAX);
    return 0;
}

/*
 * init_params fills pp with seeded weights: layer l draws from its own
 * stream ro__seed_mix(seed, l, RO_STREAM_INIT), weights row by row then
 * biases, uniform in +-1/sqrt(in) (nn.Linear's default). The head's
 * weights are scaled by 0.01 and its bias is 0, so the first actions are
 * close to uniform (discrete) or to N(0, 1) (box); log_std starts at 0.
 * A recurrent cell (layer nhidden, before the head) draws weight, weight_hh,
 * bias, bias_hh in that order, all uniform in +-1/sqrt(H) (torch's
 * GRUCell/LSTMCell default).
 */
static int init_params(ro_policy_params_t *pp, const ro_policy_spec_t *spec, uint32_t obs_dim,
                       ro_space_kind_t kind, uint32_t nout)
{
    memset(pp, 0, sizeof *pp);
    pp->activation = spec->activation;
    pp->obs_dim = obs_dim;
    pp->action_kind = kind;
    pp->action_dim = nout;
    const uint32_t cells = spec->cell ? 1 : 0, head_at = spec->nhidden + cells;
    pp->nlayers = head_at + 1;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        pp->layers[l].in = l == 0 ? obs_dim : pp->layers[l - 1].out;
        pp->layers[l].out = l < spec->nhidden ? spec->hidden[l]
                            : l < head_at     ? spec->cell_hidden
                                              : nout;
        pp->layers[l].cell = l == spec->nhidden && cells ? spec->cell : RO_CELL_NONE;
    }
    if (ro__policy_params_alloc(pp) < 0)
        return RO_ENOMEM;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        ro_policy_layer_t *L = &pp->layers[l];
        const int head = l == head_at;
        ro_rng_t rng;
        ro__rng_init(&rng, ro__seed_mix(spec->seed, l, RO_STREAM_INIT));
        const size_t rows = ro__policy_layer_rows(L);
        if (L->cell) {
            const double b = 1.0 / sqrt((double)L->out);
            float *const parts[] = {L->weight, L->weight_hh, L->bias, L->bias_hh};
            const size_t len[] = {rows * L->in, rows * L->out, rows, rows};
            for (int k = 0; k < 4; k++)
                for (size_t i = 0; i < len[k]; i++)
                    parts[k][i] = (float)ro__rng_uniform(&rng, -b, b);
            continue;
        }
        const double bound = 1.0 / sqrt((double)L->in);
        const double scale = head ? 0.01 : 1.0;
        for (size_t i = 0; i < rows * L->in; i++)
            L->weight[i] = (float)(scale * ro__rng_uniform(&rng, -bound, bound));
        for (uint32_t j = 0; j < L->out; j++)
            L->bias[j] = head ? 0.0f : (float)ro__rng_uniform(&rng, -bound, bound);
    }
    if (pp->log_std)
        memset(pp->log_std, 0, pp->action_dim * sizeof(float));
    return 0;
}

/* lay_dense lays out one [out x in] weight and its bias at *mem for the
 * dense kernels: transposed to [in x ldw] with zero padding columns. */
static ro_dense_t lay_dense(float **mem, const float *weight, const float *bias, uint32_t in,
                            uint32_t out)
{
    const uint32_t ldw = pad(out);
    float *wt = *mem, *b = *mem + (size_t)in * ldw;
    *mem = b + ldw; /* in * ldw and ldw are multiples of 8 floats: stays aligned */
    memset(wt, 0, ((size_t)in + 1) * ldw * sizeof(float));
    for (uint32_t j = 0; j < out; j++) {
        for (uint32_t k = 0; k < in; k++)
            wt[(size_t)k * ldw + j] = weight[(size_t)j * in + k];
        b[j] = bias[j];
    }
    return (ro_dense_t){.in = in, .out = out, .ldw = ldw, .wt = wt, .bias = b};
}

/* build_kernels lays the weights of p->params out for the dense kernels; a
 * recurrent cell as two dense layers, its input side in dense[] and its
 * recurrent side in cell_hh. */
static int build_kernels(ro_policy_t *p)
{
    const ro_policy_params_t *pp = &p->params;
    size_t total = 0;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        const ro_policy_layer_t *L = &pp->layers[l];
        const size_t rows = pad((uint32_t)ro__policy_layer_rows(L));
        total += ((size_t)L->in + 1) * rows + (L->cell ? ((size_t)L->out + 1) * rows : 0);
    }
    float *mem = ro__policy_alloc_aligned(total * sizeof(float));
    if (!mem)
        return RO_ENOMEM;
    p->kmem = mem;
    p->nlayers = pp->nlayers;
    p->max_out = 0;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        const ro_policy_layer_t *L = &pp->layers[l];
        const uint32_t rows = (uint32_t)ro__policy_layer_rows(L);
        p->dense[l] = lay_dense(&mem, L->weight, L->bias, L->in, rows);
        if (L->cell) {
            p->cell = L->cell;
            p->cell_at = l;
            p->hid = L->out;
            p->cell_hh = lay_dense(&mem, L->weight_hh, L->bias_hh, L->out, rows);
        }
        if (L->out > p->max_out)
            p->max_out = L->out;
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

/* set_bound: box action value j's bounds, the env's [lo, hi], or for the
 * random policy the range it draws from (random_range). */
static void set_bound(ro_policy_t *p, uint32_t j, float lo, float hi)
{
    if (p->kind == RO_POLICY_RANDOM) {
        random_range(lo, hi, &p->low[j], &p->high[j]);
    } else {
        p->low[j] = lo;
        p->high[j] = hi;
    }
}

/* build_bounds copies the action bounds a box policy needs. */
static int build_bounds(ro_policy_t *p, const ro_space_t *act)
{
    p->low = malloc(2 * (size_t)p->act_dim * sizeof(float));
    if (!p->low)
        return RO_ENOMEM;
    p->high = p->low + p->act_dim;
    for (uint32_t j = 0; j < p->act_dim; j++)
        set_bound(p, j, act->low[j], act->high[j]);
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
            /* exp in double, rounded once: the float libm's expf could round
             * differently from one C library to another. */
            for (uint32_t j = 0; j < p->nout; j++)
                p->std[j] = (float)exp((double)p->params.log_std[j]);
        }
    }
    if (act->kind == RO_SPACE_BOX && build_bounds(p, act) < 0)
        return ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory");
    return 0;
}

/* A zeroed policy of spec's kind with its kernels; 0, RO_ENOMEM, or
 * RO_EINVAL when this CPU cannot run the kernels asked for. */
static int alloc_policy(ro_policy_t **out, const ro_policy_spec_t *spec, char *err, size_t errlen)
{
    const ro_kernels_t *kern = ro__kernels(spec->kernels);
    if (!kern)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: this CPU cannot run the %s kernels",
                          ro__kernels_path_name(spec->kernels));
    ro_policy_t *p = calloc(1, sizeof *p);
    if (!p)
        return RO_ENOMEM;
    p->kind = spec->kind;
    p->gemm = spec->gemm;
    p->kern = kern;
    *out = p;
    return 0;
}

/* set_dims takes p's sizes from the spaces it acts in. */
static void set_dims(ro_policy_t *p, const ro_space_t *obs, const ro_space_t *act)
{
    p->act_kind = act->kind;
    p->obs_dim = (uint32_t)ro_space_size(obs);
    p->act_dim = (uint32_t)ro_space_size(act);
    p->nout = act->kind == RO_SPACE_DISCRETE ? act->n : p->act_dim;
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

    ro_policy_t *p = NULL;
    if ((rc = alloc_policy(&p, spec, err, errlen)) < 0)
        return rc;
    set_dims(p, obs, act);

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

/* load_layout_file reads spec's weights file for a policy of layout lay
 * into p (params and path) and checks it against lay. */
static int load_layout_file(ro_policy_t *p, const ro_policy_spec_t *spec,
                            const ro_space_layout_t *lay, char *err, size_t errlen)
{
    int rc = ro__policy_params_read(&p->params, spec->params_path, err, errlen);
    if (rc < 0)
        return rc;
    size_t nlen = strlen(spec->params_path) + sizeof "policy file ";
    char *name = malloc(nlen);
    p->path = strdup(spec->params_path);
    if (!name || !p->path) {
        free(name);
        return ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory");
    }
    snprintf(name, nlen, "policy file %s", spec->params_path);
    rc = ro__policy_layout_check(ro__policy_params_view(&p->params), lay, name, err, errlen);
    free(name);
    return rc;
}

/* new_composite builds a composite policy (ro__policy_new_layout): seeded,
 * from a format-2 weights file of the same layout, or from weights pp
 * already checked against it (moved in; label names them). */
static int new_composite(ro_policy_t **out, const ro_policy_spec_t *spec,
                         const ro_space_layout_t *lay, ro_policy_params_t *pp, const char *label,
                         char *err, size_t errlen)
{
    const bool loaded = spec->kind == RO_POLICY_MLP && (spec->params_path || pp);
    int rc = spec->kind == RO_POLICY_MLP && !loaded ? check_spec(spec, err, errlen) : 0;
    if (rc < 0)
        return rc;
    if (spec->kind == RO_POLICY_MLP && lay->head_width > RO_POLICY_MAX_WIDTH)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "policy: the action needs %u head outputs; an MLP head takes %u",
                          lay->head_width, RO_POLICY_MAX_WIDTH);
    ro_policy_t *p = NULL;
    if ((rc = alloc_policy(&p, spec, err, errlen)) < 0)
        return rc;
    p->lay = lay;
    p->composite = true;
    /* The weights hold one plain head of head_width outputs; the box
     * floats' log_std live beside them (box_log_std). */
    p->act_kind = RO_SPACE_DISCRETE;
    p->obs_dim = lay->obs_width;
    p->act_dim = lay->nbox;
    p->nout = lay->head_width;
    const size_t nb = lay->nbox ? lay->nbox : 1;
    if (pp) {
        p->params = *pp; /* the weights move in */
        memset(pp, 0, sizeof *pp);
        if (!(p->path = strdup(label))) {
            rc = ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory");
            goto fail;
        }
    } else if (loaded && (rc = load_layout_file(p, spec, lay, err, errlen)) < 0) {
        goto fail;
    }
    p->low = malloc(4 * nb * sizeof(float));
    if (!p->low ||
        (spec->kind == RO_POLICY_MLP &&
         ((!loaded && init_params(&p->params, spec, p->obs_dim, RO_SPACE_DISCRETE, p->nout) < 0) ||
          build_kernels(p) < 0))) {
        rc = ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory for the weights");
        goto fail;
    }
    p->high = p->low + nb;
    p->box_log_std = p->high + nb;
    p->box_std = p->box_log_std + nb;
    for (uint32_t j = 0; j < lay->nbox; j++) {
        set_bound(p, j, lay->box_low[j], lay->box_high[j]);
        /* exp in double, rounded once, as finish_policy does */
        p->box_log_std[j] = loaded ? p->params.log_std[j] : 0.0f;
        p->box_std[j] = loaded ? (float)exp((double)p->box_log_std[j]) : 1.0f; /* exp(0) */
    }
    *out = p;
    return 0;
fail:
    ro__policy_free(p);
    return rc;
}

/* plain_spaces gives the ABI 1 spaces of a simple_act layout's policy. */
static void plain_spaces(const ro_space_layout_t *lay, ro_space_t *obs, ro_space_t *act)
{
    const ro_part_layout_t *p0 = &lay->part[0];
    if (ro__layout_abi1_view(lay, obs, act))
        return;
    /* Typed tensors or agents, one plain action: the MLP of ABI 1 over the
     * flattened rows (a box of obs_width floats; its bounds are never
     * read). */
    *obs = (ro_space_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {lay->obs_width}};
    if (p0->kind == RO_SPACE_DISCRETE) {
        *act = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = lay->disc_n[0]};
    } else {
        *act = (ro_space_t){
            .kind = RO_SPACE_BOX, .ndim = p0->ndim, .low = lay->box_low, .high = lay->box_high};
        memcpy(act->shape, p0->shape, sizeof act->shape);
    }
}

int ro__policy_new_layout(ro_policy_t **out, const ro_policy_spec_t *spec,
                          const ro_space_layout_t *lay, char *err, size_t errlen)
{
    *out = NULL;
    if (!lay->simple_act)
        return new_composite(out, spec, lay, NULL, NULL, err, errlen);
    ro_space_t obs, act;
    plain_spaces(lay, &obs, &act);
    int rc = ro__policy_new(out, spec, &obs, &act, err, errlen);
    if (rc < 0)
        return rc;
    (*out)->lay = lay;
    if ((*out)->path) { /* a format-2 file records the typed inputs: they must match */
        size_t nlen = strlen((*out)->path) + sizeof "policy file ";
        char *name = malloc(nlen);
        if (name)
            snprintf(name, nlen, "policy file %s", (*out)->path);
        rc = name ? ro__policy_layout_check(ro__policy_params_view(&(*out)->params), lay, name, err,
                                            errlen)
                  : ro__errorf(err, errlen, RO_ENOMEM, "policy: out of memory");
        free(name);
        if (rc < 0) {
            ro__policy_free(*out);
            *out = NULL;
        }
    }
    return rc;
}

int ro__policy_new_from_params_layout(ro_policy_t **out, ro_policy_params_t *pp, ro_gemm_t gemm,
                                      const ro_space_layout_t *lay, const char *label, char *err,
                                      size_t errlen)
{
    *out = NULL;
    int rc = ro__policy_layout_check(ro__policy_params_view(pp), lay, label, err, errlen);
    if (rc < 0)
        return rc;
    if (!lay->simple_act) {
        ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .gemm = gemm};
        return new_composite(out, &spec, lay, pp, label, err, errlen);
    }
    ro_space_t obs, act;
    plain_spaces(lay, &obs, &act);
    rc = ro__policy_new_from_params(out, pp, gemm, &obs, &act, label, err, errlen);
    if (rc == 0)
        (*out)->lay = lay;
    return rc;
}

const ro_space_layout_t *ro__policy_layout(const ro_policy_t *p)
{
    return p->lay;
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
    /* Any kernels: every path gives the same bits. */
    const ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .gemm = gemm, .kernels = RO_KERNELS_AUTO};
    ro_policy_t *p = NULL;
    if ((rc = alloc_policy(&p, &spec, err, errlen)) < 0)
        return rc;
    set_dims(p, obs, act);
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
    free(p->low); /* high (and a composite's log_std and std) share its block */
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
    for (uint32_t l = 0; l + 1 < p->nlayers; l++) {
        const ro_cell_t c = p->params.layers[l].cell;
        if (c)
            append(buf, len, &pos, "%s:%u,", c == RO_CELL_GRU ? "gru" : "lstm", p->hid);
        else
            append(buf, len, &pos, "%u,", p->dense[l].out);
    }
    append(buf, len, &pos, "%s%s)", p->params.activation == RO_ACT_RELU ? "relu" : "tanh",
           p->gemm == RO_GEMM_BLAS ? ",openblas" : "");
}

const char *ro__policy_kernels_name(const ro_policy_t *p)
{
    return p->kern->name;
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

int ro__policy_save(const ro_policy_t *p, const char *path, char *err, size_t errlen)
{
    if (p->kind != RO_POLICY_MLP)
        return ro__errorf(err, errlen, RO_EINVAL, "policy: a random policy has no weights to save");
    if (!p->lay || p->lay->abi1)
        return ro__policy_params_save(&p->params, path, err, errlen);
    /* Env ABI 2: format 2, with the layout (and a composite's log_std). */
    ro_policy_params_t q = p->params; /* borrows p's arrays */
    if (ro__policy_layout_pack(p->lay, &q.layout, &q.layout_len) < 0)
        return ro__errorf(err, errlen, RO_ENOMEM, "policy file %s: out of memory", path);
    if (p->composite) {
        q.composite = true;
        q.log_std = p->lay->nbox ? p->box_log_std : NULL;
        q.nlog_std = p->lay->nbox;
    }
    int rc = ro__policy_params_save(&q, path, err, errlen);
    free(q.layout);
    return rc;
}
