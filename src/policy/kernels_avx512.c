/*
 * The kernels built for AVX-512 (F, DQ): 16 floats a vector. Only called
 * where the CPU has them (kernels.c).
 */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx2,fma"))),                 \
                             apply_to = function)
#else
#pragma GCC target("avx512f,avx512dq,avx2,fma")
#endif
#define RO_SIMD RO_SIMD_AVX512
#include "policy/kernel_build.h"

RO_KERNEL_TABLE(ro__kernels_avx512, RO_KERNELS_AVX512, "avx512");
#if defined(__clang__)
#pragma clang attribute pop
#endif
#else
#include "policy/kernels.h"
/* Not an x86-64 build: no table (ro__kernels never returns it). */
const ro_kernels_t ro__kernels_avx512 = {.path = RO_KERNELS_AVX512, .name = "avx512"};
#endif
