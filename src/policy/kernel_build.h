/*
 * One build of the kernels (kernels.h), for a kernels_*.c that has set
 * RO_SIMD and its compiler's target: the kernels compiled from the shared
 * headers, and RO_KERNEL_TABLE(SYM, PATH, NAME) defining that build's
 * table. The three builds differ only in what they set before this.
 */
#ifndef RO_KERNEL_BUILD_H
#define RO_KERNEL_BUILD_H

#include "policy/kernels.h"
#include "policy/simd.h"
#include "policy/kernel_math.h"
#include "policy/kernel_dense.h"
#include "policy/kernel_sample.h"
#include "policy/kernel_cell.h"

#define RO_KERNEL_TABLE(SYM, PATH, NAME)                                                           \
    const ro_kernels_t SYM = {                                                                     \
        .path = (PATH),                                                                            \
        .name = (NAME),                                                                            \
        .lanes = VF_LANES,                                                                         \
        .dense = kernel_dense,                                                                     \
        .act = kernel_act,                                                                         \
        .categorical = kernel_categorical,                                                         \
        .gaussian = kernel_gaussian,                                                               \
        .exp_weight = kernel_exp_weight,                                                           \
        .gru = kernel_gru,                                                                         \
        .lstm = kernel_lstm,                                                                       \
    }

#endif
