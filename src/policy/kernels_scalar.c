/*
 * The kernels in portable C: one float at a time, the fused multiply-adds
 * through fmaf and fma (correctly rounded, as C defines them: in hardware
 * where the CPU has FMA, in software otherwise), so the results are the
 * vector paths' bits. Runs on any CPU; the tests run it everywhere.
 */
#if defined(__clang__)
/* Each operation is already its own call; this only makes sure. */
#pragma STDC FP_CONTRACT OFF
#endif
#define RO_SIMD RO_SIMD_SCALAR
#include "policy/kernels.h"
#include "policy/simd.h"
#include "policy/kernel_math.h"
#include "policy/kernel_dense.h"
#include "policy/kernel_sample.h"
#include "policy/kernel_cell.h"

const ro_kernels_t ro__kernels_scalar = {
    .path = RO_KERNELS_SCALAR,
    .name = "scalar",
    .lanes = VF_LANES,
    .dense = kernel_dense,
    .act = kernel_act,
    .categorical = kernel_categorical,
    .gaussian = kernel_gaussian,
    .exp_weight = kernel_exp_weight,
    .gru = kernel_gru,
    .lstm = kernel_lstm,
};
