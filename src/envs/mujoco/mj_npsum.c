/*
 * Sums rounded as NumPy's (mj_npsum.h).
 */
#include "envs/mujoco/mj_npsum.h"

/*
 * NP_SUM defines numpy's sum of a contiguous array of T (its pairwise_sum,
 * accumulating in T): under 8 values in order; up to 128 in 8 interleaved
 * partial sums, combined pairwise, then the rest in order; more split in
 * two at a multiple of 8. One definition for both element types: the
 * costs of float32 actions are float32 in NumPy 2, the others float64.
 */
#define NP_SUM(fn, T)                                                                              \
    T fn(const T *a, size_t n)                                                                     \
    {                                                                                              \
        if (n < 8) {                                                                               \
            T r = 0;                                                                               \
            for (size_t i = 0; i < n; i++)                                                         \
                r += a[i];                                                                         \
            return r;                                                                              \
        }                                                                                          \
        if (n <= 128) {                                                                            \
            T r[8];                                                                                \
            for (size_t j = 0; j < 8; j++)                                                         \
                r[j] = a[j];                                                                       \
            size_t i = 8;                                                                          \
            for (; i < n - n % 8; i += 8)                                                          \
                for (size_t j = 0; j < 8; j++)                                                     \
                    r[j] += a[i + j];                                                              \
            T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));             \
            for (; i < n; i++)                                                                     \
                res += a[i];                                                                       \
            return res;                                                                            \
        }                                                                                          \
        size_t n2 = n / 2;                                                                         \
        n2 -= n2 % 8;                                                                              \
        return fn(a, n2) + fn(a + n2, n - n2);                                                     \
    }
NP_SUM(ro__np_sum, double)
NP_SUM(ro__np_sum_f, float)
