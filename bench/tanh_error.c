/*
 * tanh's error over every float, on every kernel path this CPU runs
 * (docs/policy.md): each path's result against tanh in double, in ulp of
 * the float result, and every path's bits against the portable path's.
 * Negative inputs are covered by oddness, which the unit tests check.
 *
 * usage: tanh_error [--stride K]   (every K-th float; 1, the default, is all)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/kernels.h"

#define CHUNK 65536

int main(int argc, char **argv)
{
    uint32_t stride = 1;
    if (argc == 3 && !strcmp(argv[1], "--stride"))
        stride = (uint32_t)atoi(argv[2]);
    if (stride == 0) {
        fprintf(stderr, "usage: tanh_error [--stride K]\n");
        return 2;
    }
    const ro_kernels_t *k[3];
    int np = 0;
    for (int p = RO_KERNELS_SCALAR; p <= RO_KERNELS_AVX512; p++)
        if ((k[np] = ro__kernels((ro_kernel_path_t)p)))
            np++;
    static float in[CHUNK], out[3][CHUNK];
    double worst = 0, sum = 0;
    float worst_x = 0;
    unsigned long long n = 0, over[4] = {0}, mismatches = 0;
    uint64_t u = 0;
    while (u <= 0x7f800000u) {
        size_t m = 0;
        for (; m < CHUNK && u <= 0x7f800000u; u += stride) {
            uint32_t b = (uint32_t)u;
            memcpy(&in[m++], &b, sizeof b);
        }
        for (int p = 0; p < np; p++) {
            memcpy(out[p], in, m * sizeof(float));
            k[p]->act(out[p], m, RO_ACT_TANH);
        }
        for (size_t i = 0; i < m; i++) {
            for (int p = 1; p < np; p++)
                mismatches += memcmp(&out[p][i], &out[0][i], sizeof(float)) != 0;
            const double t = tanh((double)in[i]);
            int e;
            frexp(t, &e);
            const double ulp = t < 0x1p-126 ? 0x1p-149 : ldexp(1.0, e - 24);
            const double err = fabs((double)out[0][i] - t) / ulp;
            sum += err;
            for (int j = 0; j < 4; j++)
                over[j] += err > (double)(j + 1) / (j ? 1 : 2); /* 0.5, 2, 3, 4 */
            if (err > worst) {
                worst = err;
                worst_x = in[i];
            }
            n++;
        }
    }
    printf("paths:");
    for (int p = 0; p < np; p++)
        printf(" %s", k[p]->name);
    printf(" (bits differing from %s: %llu)\n", k[0]->name, mismatches);
    printf("floats: %llu (every %u-th of [+0, +inf])\n", n, stride);
    printf("max error: %.3f ulp at x = %.9g (%a)\n", worst, (double)worst_x, (double)worst_x);
    printf("mean error: %.4f ulp; over 0.5 ulp: %.4f %%, over 2: %.5f %%, over 3: %.6f %%, "
           "over 4: %.7f %%\n",
           sum / (double)n, 100.0 * (double)over[0] / (double)n,
           100.0 * (double)over[1] / (double)n, 100.0 * (double)over[2] / (double)n,
           100.0 * (double)over[3] / (double)n);
    return mismatches ? 1 : 0;
}
