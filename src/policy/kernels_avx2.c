/*
 * The kernels built for AVX2 and FMA: 8 floats a vector
 * (kernel_build_x86.h).
 */
#define RO_SIMD RO_SIMD_AVX2
#define RO_X86_TARGET "avx2,fma"
#define RO_X86_TABLE ro__kernels_avx2
#define RO_X86_PATH RO_KERNELS_AVX2
#define RO_X86_NAME "avx2"
#include "policy/kernel_build_x86.h"
