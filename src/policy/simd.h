/*
 * simd.h: the vector operations the policy's kernels are written with, one
 * definition per instruction set. A kernel file defines RO_SIMD (one of the
 * RO_SIMD_* below) and includes this header, then the kernel bodies
 * (kernel_math.h, kernel_dense.h, kernel_sample.h): every kernel is written
 * once, over these operations, and compiled three times.
 *
 * Why this shape: the kernels must give the same bits on every path
 * (docs/policy.md). That holds when every path performs the same IEEE
 * operations on each lane in the same order, and only the number of lanes
 * differs. So each operation here is one IEEE-defined operation per lane
 * (add, sub, mul, div, sqrt and a fused multiply-add, each correctly
 * rounded; compares and selects; integer and bit operations), never an
 * approximation whose bits the vendor defines (rcp, rsqrt), and the scalar
 * path computes the fused multiply-add with fmaf/fma, which C defines as
 * correctly rounded. Each operation is a function call in the source, so
 * no compiler contracts a multiply and an add of ours into one FMA (clang's
 * default -ffp-contract=on fuses within one expression only).
 *
 * Types: vf is VF_LANES floats, vi as many int32, vd VD_LANES doubles, vq
 * as many int64; mf and md are the masks of float and double compares.
 *
 * max and min are x86's: vf_max(a, b) is a > b ? a : b, so a NaN in either
 * operand gives b. Kernels order the operands for the NaN behaviour they
 * want, and the scalar path spells the same select.
 */
#ifndef RO_POLICY_SIMD_H
#define RO_POLICY_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define RO_SIMD_SCALAR 1
#define RO_SIMD_AVX2 2
#define RO_SIMD_AVX512 3

#ifndef RO_SIMD
#error "define RO_SIMD before including policy/simd.h"
#endif

#define RO_INLINE static inline __attribute__((always_inline))

/* RO_SIMD_OP defines an operation whose body is one expression over its
 * parameters, and RO_SIMD_DO one that stores: each instruction set's header
 * is then a table, one line an operation. */
#define RO_SIMD_OP(type, name, params, expr)                                                       \
    RO_INLINE type name params                                                                     \
    {                                                                                              \
        return expr;                                                                               \
    }
#define RO_SIMD_DO(name, params, stmt)                                                             \
    RO_INLINE void name params                                                                     \
    {                                                                                              \
        stmt;                                                                                      \
    }

#if RO_SIMD == RO_SIMD_AVX512 || RO_SIMD == RO_SIMD_AVX2
#include <immintrin.h>
#endif

#if RO_SIMD == RO_SIMD_AVX512
#include "policy/simd_avx512.h"
#elif RO_SIMD == RO_SIMD_AVX2
#include "policy/simd_avx2.h"
#elif RO_SIMD == RO_SIMD_SCALAR
#include "policy/simd_scalar.h"
#else
#error "unknown RO_SIMD"
#endif

#endif
