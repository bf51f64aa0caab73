/*
 * The kernels built for AVX-512 (F, DQ): 16 floats a vector
 * (kernel_build_x86.h).
 */
#define RO_SIMD RO_SIMD_AVX512
#define RO_X86_TARGET "avx512f,avx512dq,avx2,fma"
#define RO_X86_TABLE ro__kernels_avx512
#define RO_X86_PATH RO_KERNELS_AVX512
#define RO_X86_NAME "avx512"
#include "policy/kernel_build_x86.h"
