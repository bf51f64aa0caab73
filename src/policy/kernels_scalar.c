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
#include "policy/kernel_build.h"

RO_KERNEL_TABLE(ro__kernels_scalar, RO_KERNELS_SCALAR, "scalar");
