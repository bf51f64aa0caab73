/*
 * NumPy's sum of a contiguous array (np.sum, its pairwise_sum), for the
 * MuJoCo envs' costs: Gymnasium computes them as np.sum(np.square(x)), and a
 * sum in the same order rounds the same way (issue 32).
 */
#ifndef RO_ENVS_MUJOCO_MJ_NPSUM_H
#define RO_ENVS_MUJOCO_MJ_NPSUM_H

#include <stddef.h>

/* ro__np_sum is np.sum of n float64 values; ro__np_sum_f of n float32
 * values, accumulated in float32 as NumPy does. Any thread. */
double ro__np_sum(const double *a, size_t n);
float ro__np_sum_f(const float *a, size_t n);

#endif
