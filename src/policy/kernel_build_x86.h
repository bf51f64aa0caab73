/*
 * One x86 vector build of the kernels, for kernels_avx2.c and
 * kernels_avx512.c: they set RO_SIMD, RO_X86_TARGET (the compiler's target
 * features, a string), RO_X86_TABLE (the table's symbol), RO_X86_PATH and
 * RO_X86_NAME, then include this. On x86-64 with GCC or clang the kernels
 * are compiled for that target (kernel_build.h) and the table filled; only
 * called where the CPU has the features (kernels.c). Elsewhere the table
 * has no functions and ro__kernels never returns it.
 */
#ifndef RO_KERNEL_BUILD_X86_H
#define RO_KERNEL_BUILD_X86_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* RO_PRAGMA(x): #pragma x, with the macros in x expanded first. */
#define RO_PRAGMA_(x) _Pragma(#x)
#define RO_PRAGMA(x) RO_PRAGMA_(x)
#if defined(__clang__)
RO_PRAGMA(clang attribute push(__attribute__((target(RO_X86_TARGET))), apply_to = function))
#else
RO_PRAGMA(GCC target(RO_X86_TARGET))
#endif
#include "policy/kernel_build.h"

RO_KERNEL_TABLE(RO_X86_TABLE, RO_X86_PATH, RO_X86_NAME);
#if defined(__clang__)
#pragma clang attribute pop
#endif
#else
#include "policy/kernels.h"
const ro_kernels_t RO_X86_TABLE = {.path = RO_X86_PATH, .name = RO_X86_NAME};
#endif

#endif
