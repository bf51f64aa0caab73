/*
 * The yardstick network of the benchmarks: the policy's MLP (obs_dim -> 64
 * -> 64 -> nout, ReLU) computed the standard way, with OpenBLAS's sgemm, row
 * by row in row-major batches. Shared by bench_engine (the machine loop)
 * and bench_kernels.
 */
#ifndef RO_BENCH_BLAS_H
#define RO_BENCH_BLAS_H

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"

/* The OpenBLAS network: obs_dim -> 64 -> 64 -> nout, ReLU, weights as
 * nn.Linear initialises them, stored [in][out] for NoTrans sgemm. */
typedef struct blas_net {
    uint32_t dims[4];
    float *w[3], *b[3], *h[3];
} blas_net_t;

static inline void blas_net_init(blas_net_t *n, uint32_t od, uint32_t nout, uint32_t B)
{
    const uint32_t dims[4] = {od, 64, 64, nout};
    memcpy(n->dims, dims, sizeof dims);
    ro_rng_t rng;
    ro__rng_init(&rng, 3);
    for (int l = 0; l < 3; l++) {
        const uint32_t in = dims[l], out = dims[l + 1];
        const double bound = 1.0 / sqrt((double)in);
        n->w[l] = malloc(sizeof(float) * in * out);
        n->b[l] = malloc(sizeof(float) * out);
        n->h[l] = malloc(sizeof(float) * out * B);
        for (size_t i = 0; i < (size_t)in * out; i++)
            n->w[l][i] = (float)ro__rng_uniform(&rng, -bound, bound);
        for (uint32_t j = 0; j < out; j++)
            n->b[l][j] = (float)ro__rng_uniform(&rng, -bound, bound);
    }
}

static inline void blas_net_free(blas_net_t *n)
{
    for (int l = 0; l < 3; l++) {
        free(n->w[l]);
        free(n->b[l]);
        free(n->h[l]);
    }
}

/* blas_forward: h = relu(x W + b) per hidden layer, logits = h W + b, and
 * the argmax action per row. */
static inline void blas_forward(blas_net_t *n, const float *x, uint32_t B, int32_t *act)
{
    for (int l = 0; l < 3; l++) {
        const uint32_t in = n->dims[l], out = n->dims[l + 1];
        float *y = n->h[l];
        for (uint32_t i = 0; i < B; i++)
            memcpy(y + (size_t)i * out, n->b[l], out * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)out, (int)in, 1.0f, x,
                    (int)in, n->w[l], (int)out, 1.0f, y, (int)out);
        if (l < 2)
            for (size_t i = 0; i < (size_t)B * out; i++)
                y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        x = y;
    }
    const uint32_t nout = n->dims[3];
    for (uint32_t i = 0; i < B; i++) {
        const float *z = x + (size_t)i * nout;
        int32_t best = 0;
        for (uint32_t j = 1; j < nout; j++)
            best = z[j] > z[best] ? (int32_t)j : best;
        act[i] = best;
    }
}

#endif
