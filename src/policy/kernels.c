#include "policy/kernels.h"

/*
 * ro__kernels picks a table from what the CPU reports (cpuid, read once by
 * libgcc at start-up; __builtin_cpu_supports reads that word), not from how
 * the program was compiled, so one binary runs everywhere and uses AVX-512
 * where there is some. The choice changes speed only: every table gives
 * the same bits.
 */
static int cpu_runs(ro_kernel_path_t path)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    switch (path) {
    case RO_KERNELS_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case RO_KERNELS_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case RO_KERNELS_SCALAR:
        return 1;
    default:
        return 0;
    }
#else
    return path == RO_KERNELS_SCALAR;
#endif
}

const ro_kernels_t *ro__kernels(ro_kernel_path_t path)
{
    static const ro_kernels_t *const by_path[] = {
        [RO_KERNELS_SCALAR] = &ro__kernels_scalar,
        [RO_KERNELS_AVX2] = &ro__kernels_avx2,
        [RO_KERNELS_AVX512] = &ro__kernels_avx512,
    };
    if (path == RO_KERNELS_AUTO) {
        for (int p = RO_KERNELS_AVX512; p >= RO_KERNELS_SCALAR; p--)
            if (cpu_runs((ro_kernel_path_t)p) && by_path[p]->dense)
                return by_path[p];
        return &ro__kernels_scalar;
    }
    if (path < RO_KERNELS_SCALAR || path > RO_KERNELS_AVX512 || !cpu_runs(path) ||
        !by_path[path]->dense)
        return NULL;
    return by_path[path];
}

const char *ro__kernels_path_name(ro_kernel_path_t path)
{
    static const char *const names[] = {[RO_KERNELS_AUTO] = "auto",
                                        [RO_KERNELS_SCALAR] = "scalar",
                                        [RO_KERNELS_AVX2] = "avx2",
                                        [RO_KERNELS_AVX512] = "avx512"};
    return (unsigned)path < sizeof names / sizeof names[0] ? names[path] : "?";
}
